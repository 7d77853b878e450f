// The DeepSeek-V4 model, top to bottom, as transformers' DeepseekV4ForCausalLM computes it:
//   embed -> hc_mult copies of the row (the residual streams)
//   per layer (DecoderLayer, decoder-layer.ts):
//               attn_hc (pre/post/comb, collapse) -> input_layernorm -> Attention -> hc write-back
//               ffn_hc  (pre/post/comb, collapse) -> post_attention_layernorm -> Moe -> hc write-back
//   hc_head (collapse the streams) -> norm -> lm_head
// Every layer object is built once from the weights and carries its shapes and the model's numerics
// (numerics.ts: activation rounding, rope tables, reference-quant hooks). Attention (attention.ts)
// holds its Compressor(s) (compressor.ts) and Indexer (indexer.ts) and its cache layout
// (cache-layout.ts); makeCache() builds the cache from those layouts. Moe is moe.ts, the
// hyper-connections hyper-connections.ts. `act` rounds to bf16 at transformers' bf16 rounding points
// in a bf16 profile and is the identity in f32.
import { PdBridgeError } from '../../errors.ts'
import type { DeepseekV4Config } from '../config.ts'
import type { NumericsProfile } from '../profiles/index.ts'
import type { Linear, PreparedWeights } from '../weights/index.ts'
import { Attention, type AttentionShape } from './attention.ts'
import { ModelCache } from './cache.ts'
import { DecoderLayer, type AttnInputHook } from './decoder-layer.ts'
import { hcHead, type HcHeadParams, type HcParams, type HcShape } from './hyper-connections.ts'
import { Moe, type MoeShape, type MoeWeights } from './moe.ts'
import { modelNumerics, type ModelNumerics } from './numerics.ts'
import { weightedRmsNorm } from './norms.ts'
import { scratch } from './scratch.ts'

export type { AttnInputHook } from './decoder-layer.ts'

/** The attention sizes of `cfg`. */
export function attentionShape (cfg: DeepseekV4Config): AttentionShape {
  return {
    heads: cfg.numAttentionHeads, headDim: cfg.headDim, ropeDim: cfg.qkRopeHeadDim, oGroups: cfg.oGroups, oLoraRank: cfg.oLoraRank,
    window: cfg.slidingWindow, rmsEps: cfg.rmsNormEps, indexHeads: cfg.indexNHeads, indexHeadDim: cfg.indexHeadDim, indexTopk: cfg.indexTopk,
  }
}

function moeWeights (weights: PreparedWeights, cfg: DeepseekV4Config, i: number): MoeWeights {
  const m = `model.layers.${i}.mlp`
  const experts = Array.from({ length: cfg.nRoutedExperts }, (_, e) => e)
  return {
    gate: weights.linear(`${m}.gate.weight`),
    correctionBias: cfg.mlpLayerTypes[i] === 'moe' ? weights.vector(`${m}.gate.e_score_correction_bias`) : null,
    tid2eid: cfg.mlpLayerTypes[i] === 'hash_moe' ? weights.tid2eid(i) : null,
    gateUp: experts.map((e) => weights.linear(`${m}.experts.gate_up_proj[${e}]`)),
    down: experts.map((e) => weights.linear(`${m}.experts.down_proj[${e}]`)),
    sharedGate: weights.linear(`${m}.shared_experts.gate_proj.weight`),
    sharedUp: weights.linear(`${m}.shared_experts.up_proj.weight`),
    sharedDown: weights.linear(`${m}.shared_experts.down_proj.weight`),
  }
}

/** A model ready to run: config, numerics, and its layer objects built from the weights (looked up once, by transformers' parameter names). */
export class DeepseekV4Model {
  readonly numerics: ModelNumerics
  readonly layers: DecoderLayer[]
  private readonly hcShape: HcShape
  private readonly hcHead: HcHeadParams
  private readonly finalNorm: Float32Array
  private readonly lmHead: Linear

  constructor (readonly cfg: DeepseekV4Config, private readonly weights: PreparedWeights, profile: NumericsProfile) {
    if (cfg.scoringFunc !== 'sqrtsoftplus') throw new PdBridgeError(`engine: scoring_func ${cfg.scoringFunc} is not supported (DeepSeek-V4 uses sqrtsoftplus)`)
    const numerics = modelNumerics(profile, { rope: cfg.rope, headDim: cfg.headDim, ropeDim: cfg.qkRopeHeadDim })
    const hc = (name: string): HcParams => ({ fn: weights.vector(`${name}.fn`), base: weights.vector(`${name}.base`), scale: weights.vector(`${name}.scale`) })
    this.numerics = numerics
    this.hcShape = { hc: cfg.hcMult, hidden: cfg.hiddenSize, sinkhornIters: cfg.hcSinkhornIters, hcEps: cfg.hcEps, rmsEps: cfg.rmsNormEps }
    const attnShape = attentionShape(cfg)
    const moeShape: MoeShape = {
      hidden: cfg.hiddenSize, inter: cfg.moeIntermediateSize, experts: cfg.nRoutedExperts, topk: cfg.numExpertsPerTok,
      routedScalingFactor: cfg.routedScalingFactor, swigluLimit: cfg.swigluLimit, scoringFunc: cfg.scoringFunc,
    }
    this.layers = cfg.layerTypes.map((type, i) => {
      const p = `model.layers.${i}`
      // Looked up in transformers' parameter order (a missing weight is reported as before).
      const attnHc = hc(`${p}.attn_hc`)
      const inputNorm = weights.vector(`${p}.input_layernorm.weight`)
      const attention = Attention.build(weights, { weights, oGroups: cfg.oGroups }, i, type, attnShape, cfg, numerics)
      const ffnHc = hc(`${p}.ffn_hc`)
      const postNorm = weights.vector(`${p}.post_attention_layernorm.weight`)
      const moe = new Moe(moeWeights(weights, cfg, i), moeShape, numerics.act)
      return new DecoderLayer(i, { attnHc, inputNorm, ffnHc, postNorm }, attention, moe, this.hcShape, numerics.act)
    })
    this.hcHead = { fn: weights.vector('model.hc_head.hc_fn'), base: weights.vector('model.hc_head.hc_base'), scale: weights.vector('model.hc_head.hc_scale') }
    this.finalNorm = weights.vector('model.norm.weight')
    this.lmHead = weights.linear(cfg.tieWordEmbeddings ? 'model.embed_tokens.weight' : 'lm_head.weight')
  }

  /** The numerics profile. */
  get profile (): NumericsProfile {
    return this.numerics.profile
  }

  /** An empty cache: one LayerCache per layer, as each Attention's cache layout describes it. */
  makeCache (): ModelCache {
    return new ModelCache(this.layers.map((l) => l.attention.makeCache()))
  }

  /**
   * Run tokens through the model at positions cache.tokenCount.., updating `cache`. Returns the
   * logits [rows.length, vocab] of the chunk rows listed in `logitRows` (indices into the chunk).
   */
  forward (tokens: ArrayLike<number>, cache: ModelCache, logitRows: number[], hook?: AttnInputHook): Float32Array {
    return this.forwardSequences([{ tokens, cache }], logitRows, hook)
  }

  /**
   * Several sequences in one pass over the weights: sequence i's tokens run at positions
   * cache_i.tokenCount.. and update its own cache. Rows are numbered across the sequences in order
   * (logitRows indexes them). Every step is row by row or per sequence, so each sequence's rows are
   * bit-identical to forward() of it alone (the batch-invariance rule of docs/kernels.md).
   */
  forwardSequences (sequences: ReadonlyArray<{ tokens: ArrayLike<number>, cache: ModelCache }>, logitRows: number[], hook?: AttnInputHook): Float32Array {
    const { cfg, hcShape } = this
    const act = this.numerics.act
    const tokens: number[] = []
    for (const s of sequences) for (let t = 0; t < s.tokens.length; t++) tokens.push(s.tokens[t])
    const n = tokens.length
    const hidden = cfg.hiddenSize

    // Embedding, copied into every residual stream. The streams between layers live only inside
    // this call (the head copies its rows out): scratch slots, the layers alternating between two.
    let h: Float32Array = scratch('model-embedded-streams', n * cfg.hcMult * hidden)
    const row = new Float32Array(hidden)
    for (let t = 0; t < n; t++) {
      this.weights.embedding(tokens[t], row)
      for (let j = 0; j < cfg.hcMult; j++) h.set(row, (t * cfg.hcMult + j) * hidden)
    }

    this.layers.forEach((layer, i) => {
      const segments = sequences.map((s) => ({ n: s.tokens.length, start: s.cache.tokenCount, cache: s.cache.layers[i] }))
      h = layer.forwardSegments(h, tokens, segments, hook, scratch(i % 2 === 0 ? 'model-streams-even' : 'model-streams-odd', h.length))
    })
    for (const s of sequences) s.cache.tokenCount += s.tokens.length

    // Head: only the rows whose logits were asked for.
    const m = logitRows.length
    if (m === 0) return new Float32Array(0)
    const width = cfg.hcMult * hidden
    const picked = new Float32Array(m * width)
    logitRows.forEach((r, k) => picked.set(h.subarray(r * width, (r + 1) * width), k * width))
    const collapsed = hcHead(picked, m, this.hcHead, hcShape, act)
    const normed = weightedRmsNorm(collapsed, m, hidden, this.finalNorm, cfg.rmsNormEps, act)
    return act.roundAll(this.lmHead.apply(normed, m))
  }

  /**
   * Append `count` tokens to every layer's cache from their attention inputs alone (inputFor(layer):
   * [count, hidden], as the attention block would receive them) at positions cache.tokenCount..:
   * window rows, pooled entries, buffers and carries, with no attention, MoE or logits. The result is
   * bit-identical to what a forward over the same tokens leaves in the cache.
   */
  appendFromAttentionInputs (cache: ModelCache, count: number, inputFor: (layer: number) => Float32Array): void {
    const start = cache.tokenCount
    this.layers.forEach((layer, i) => {
      layer.attention.updateCache(inputFor(i), count, start, cache.layers[i])
    })
    cache.tokenCount = start + count
  }

  /** Fill the derived overlap carries of every layer of `cache` (see Attention.completeCarries). */
  completeCarries (cache: ModelCache): void {
    cache.layers.forEach((layer, i) => this.layers[i].attention.completeCarries(layer))
  }
}
