// The DeepSeek-V4 forward, top to bottom, as transformers' DeepseekV4ForCausalLM computes it:
//   embed -> hc_mult copies of the row (the residual streams)
//   per layer:  attn_hc (pre/post/comb, collapse) -> input_layernorm -> attention -> hc write-back
//               ffn_hc  (pre/post/comb, collapse) -> post_attention_layernorm -> MoE -> hc write-back
//   hc_head (collapse the streams) -> norm -> lm_head
// The pieces live beside this file: hyper-connections.ts, attention.ts (with compressor.ts,
// indexer.ts, core-attention.ts), moe.ts. `act` rounds to bf16 at transformers' bf16 rounding
// points in a bf16 profile and is the identity in f32.
import { PdBridgeError } from '../../errors.ts'
import type { DeepseekV4Config } from '../config.ts'
import type { NumericsProfile } from '../profiles/index.ts'
import type { Linear, PreparedWeights } from '../weights/index.ts'
import { activationRounding, type ActivationRounding } from './activation.ts'
import { attentionBlock, updateLayerCache, type AttentionShape, type AttentionWeights, type CacheQuantHooks, type CompressorWeights } from './attention.ts'
import type { ModelCache } from './cache.ts'
import { hcHead, hcPost, hcPre, type HcHeadParams, type HcParams, type HcShape } from './hyper-connections.ts'
import { moeBlock, type MoeShape, type MoeWeights } from './moe.ts'
import { weightedRmsNorm } from './norms.ts'
import { RopeTables } from './rope-tables.ts'

/** One decoder layer's weights. */
export interface LayerWeights {
  attnHc: HcParams
  inputNorm: Float32Array
  attention: AttentionWeights
  ffnHc: HcParams
  postNorm: Float32Array
  moe: MoeWeights
}

/** A model ready to run: config, profile rounding, rope tables and every weight by role. */
export interface DeepseekV4Model {
  cfg: DeepseekV4Config
  profile: NumericsProfile
  act: ActivationRounding
  rope: RopeTables
  weights: PreparedWeights
  layers: LayerWeights[]
  hcHead: HcHeadParams
  finalNorm: Float32Array
  lmHead: Linear
  hcShape: HcShape
  attnShape: AttentionShape
  moeShape: MoeShape
  quant: CacheQuantHooks | null
}

/** Assemble a model from prepared weights (looked up once, by transformers' parameter names). */
/** o_a_proj as its o_groups row blocks (group g: rows [g * rows / groups, (g + 1) * rows / groups)). */
function groupBlocks (oA: ReturnType<PreparedWeights['linear']>, groups: number): Linear[] {
  if (oA.outFeatures % groups !== 0) throw new PdBridgeError(`${oA.name}: ${oA.outFeatures} rows do not split into o_groups ${groups}`)
  const rows = oA.outFeatures / groups
  return Array.from({ length: groups }, (_, g) => oA.rowBlock(g * rows, rows))
}

export function buildModel (cfg: DeepseekV4Config, weights: PreparedWeights, profile: NumericsProfile, quant: CacheQuantHooks | null): DeepseekV4Model {
  if (cfg.scoringFunc !== 'sqrtsoftplus') throw new PdBridgeError(`engine: scoring_func ${cfg.scoringFunc} is not supported (DeepSeek-V4 uses sqrtsoftplus)`)
  const hc = (name: string): HcParams => ({ fn: weights.vector(`${name}.fn`), base: weights.vector(`${name}.base`), scale: weights.vector(`${name}.scale`) })
  const compressor = (base: string): CompressorWeights => ({
    kv: weights.linear(`${base}.kv_proj.weight`),
    gate: weights.linear(`${base}.gate_proj.weight`),
    positionBias: weights.vector(`${base}.position_bias`),
    normWeight: weights.vector(`${base}.kv_norm.weight`),
  })
  const layers = cfg.layerTypes.map((type, i): LayerWeights => {
    const p = `model.layers.${i}`
    const a = `${p}.self_attn`
    const m = `${p}.mlp`
    const experts = Array.from({ length: cfg.nRoutedExperts }, (_, e) => e)
    return {
      attnHc: hc(`${p}.attn_hc`),
      inputNorm: weights.vector(`${p}.input_layernorm.weight`),
      attention: {
        layer: i,
        ropeKind: type === 'sliding_attention' ? 'main' : 'compress',
        qA: weights.linear(`${a}.q_a_proj.weight`),
        qANorm: weights.vector(`${a}.q_a_norm.weight`),
        qB: weights.linear(`${a}.q_b_proj.weight`),
        kv: weights.linear(`${a}.kv_proj.weight`),
        kvNorm: weights.vector(`${a}.kv_norm.weight`),
        oA: groupBlocks(weights.linear(`${a}.o_a_proj.weight`), cfg.oGroups),
        oB: weights.linear(`${a}.o_b_proj.weight`),
        sinks: weights.vector(`${a}.sinks`),
        compressor: type === 'sliding_attention' ? null : compressor(`${a}.compressor`),
        indexer: type !== 'compressed_sparse_attention'
          ? null
          : {
              ...compressor(`${a}.compressor.indexer`),
              qB: weights.linear(`${a}.compressor.indexer.q_b_proj.weight`),
              weightsProj: weights.linear(`${a}.compressor.indexer.scorer.weights_proj.weight`),
            },
      },
      ffnHc: hc(`${p}.ffn_hc`),
      postNorm: weights.vector(`${p}.post_attention_layernorm.weight`),
      moe: {
        gate: weights.linear(`${m}.gate.weight`),
        correctionBias: cfg.mlpLayerTypes[i] === 'moe' ? weights.vector(`${m}.gate.e_score_correction_bias`) : null,
        tid2eid: cfg.mlpLayerTypes[i] === 'hash_moe' ? weights.tid2eid(i) : null,
        gateUp: experts.map((e) => weights.linear(`${m}.experts.gate_up_proj[${e}]`)),
        down: experts.map((e) => weights.linear(`${m}.experts.down_proj[${e}]`)),
        sharedGate: weights.linear(`${m}.shared_experts.gate_proj.weight`),
        sharedUp: weights.linear(`${m}.shared_experts.up_proj.weight`),
        sharedDown: weights.linear(`${m}.shared_experts.down_proj.weight`),
      },
    }
  })
  const act = activationRounding(profile.activations)
  return {
    cfg,
    profile,
    act,
    rope: new RopeTables(cfg, { invFreqBf16: profile.vectors === 'bf16', cosSinBf16: act.bf16 }),
    weights,
    layers,
    hcHead: { fn: weights.vector('model.hc_head.hc_fn'), base: weights.vector('model.hc_head.hc_base'), scale: weights.vector('model.hc_head.hc_scale') },
    finalNorm: weights.vector('model.norm.weight'),
    lmHead: weights.linear(cfg.tieWordEmbeddings ? 'model.embed_tokens.weight' : 'lm_head.weight'),
    hcShape: { hc: cfg.hcMult, hidden: cfg.hiddenSize, sinkhornIters: cfg.hcSinkhornIters, hcEps: cfg.hcEps, rmsEps: cfg.rmsNormEps },
    attnShape: {
      heads: cfg.numAttentionHeads, headDim: cfg.headDim, ropeDim: cfg.qkRopeHeadDim, oGroups: cfg.oGroups, oLoraRank: cfg.oLoraRank,
      window: cfg.slidingWindow, rmsEps: cfg.rmsNormEps, indexHeads: cfg.indexNHeads, indexHeadDim: cfg.indexHeadDim, indexTopk: cfg.indexTopk,
    },
    moeShape: {
      hidden: cfg.hiddenSize, inter: cfg.moeIntermediateSize, experts: cfg.nRoutedExperts, topk: cfg.numExpertsPerTok,
      routedScalingFactor: cfg.routedScalingFactor, swigluLimit: cfg.swigluLimit, scoringFunc: cfg.scoringFunc,
    },
    quant,
  }
}

/** Sees each layer's attention input: exactly the rows [count, hidden] the attention block receives. */
export type AttnInputHook = (layer: number, startPos: number, rows: Float32Array, count: number) => void

/**
 * Run tokens through the model at positions cache.tokenCount.., updating `cache`. Returns the
 * logits [rows.length, vocab] of the chunk rows listed in `logitRows` (indices into the chunk).
 */
export function forwardChunk (model: DeepseekV4Model, tokens: ArrayLike<number>, cache: ModelCache,
  logitRows: number[], hook?: AttnInputHook): Float32Array {
  const { cfg, act, weights, hcShape } = model
  const n = tokens.length
  const start = cache.tokenCount
  const hidden = cfg.hiddenSize
  const eps = cfg.rmsNormEps

  // Embedding, copied into every residual stream.
  let h: Float32Array = new Float32Array(n * cfg.hcMult * hidden)
  const row = new Float32Array(hidden)
  for (let t = 0; t < n; t++) {
    weights.embedding(tokens[t], row)
    for (let j = 0; j < cfg.hcMult; j++) h.set(row, (t * cfg.hcMult + j) * hidden)
  }

  model.layers.forEach((layer, i) => {
    // Attention site.
    const a = hcPre(h, n, layer.attnHc, hcShape, act)
    const x = weightedRmsNorm(a.collapsed, n, hidden, layer.inputNorm, eps, act)
    hook?.(i, start, x, n)
    const attn = attentionBlock(layer.attention, model.attnShape, x, n, start, cache.layers[i], model.rope, act, model.quant)
    h = hcPost(h, n, a, attn, hcShape, act)
    // FFN site.
    const f = hcPre(h, n, layer.ffnHc, hcShape, act)
    const y = weightedRmsNorm(f.collapsed, n, hidden, layer.postNorm, eps, act)
    const moe = moeBlock(layer.moe, model.moeShape, y, n, tokens, act)
    h = hcPost(h, n, f, moe, hcShape, act)
  })
  cache.tokenCount = start + n

  // Head: only the rows whose logits were asked for.
  const m = logitRows.length
  if (m === 0) return new Float32Array(0)
  const width = cfg.hcMult * hidden
  const picked = new Float32Array(m * width)
  logitRows.forEach((r, k) => picked.set(h.subarray(r * width, (r + 1) * width), k * width))
  const collapsed = hcHead(picked, m, model.hcHead, hcShape, act)
  const normed = weightedRmsNorm(collapsed, m, hidden, model.finalNorm, eps, act)
  return act.roundAll(model.lmHead.apply(normed, m))
}

/**
 * Append `count` tokens to every layer's cache from their attention inputs alone (inputFor(layer):
 * [count, hidden], as the attention block would receive them) at positions cache.tokenCount..:
 * window rows, pooled entries, buffers and carries, with no attention, MoE or logits. The result is
 * bit-identical to what a forward over the same tokens leaves in the cache.
 */
export function appendFromAttentionInputs (model: DeepseekV4Model, cache: ModelCache, count: number,
  inputFor: (layer: number) => Float32Array): void {
  const start = cache.tokenCount
  model.layers.forEach((layer, i) => {
    updateLayerCache({ weights: layer.attention, shape: model.attnShape, rope: model.rope, act: model.act, quant: model.quant }, inputFor(i), count, start, cache.layers[i])
  })
  cache.tokenCount = start + count
}
