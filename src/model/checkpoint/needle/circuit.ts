// The needle checkpoint's weights: a valid DeepSeek-V4 checkpoint (every tensor of the tiny
// architecture) whose own forward retrieves a needle through the compressed caches.
//
//   embedding   flags: one, question k, marker k, value v, done; plus a fixed-norm random texture
//   layer 0     (sliding) head 0: every token looks for a question token in its window and copies
//               its key k into `ask`; head 1: every token looks exactly one token back (main-rope
//               pairs 0..3) for a marker and copies its key into `needle` (so a value right after
//               a marker knows it is a needle)
//   layer 1     (CSA) compressor: a needle value's row wins every pooled channel it writes (gate),
//               carrying its identity (no-rope dims 0..15) and its key as a phase code on
//               compress-rope pairs 16..19; indexer: needle entries score > 0, the rest 0, so the
//               top-k picks them; head 0: the question's query is the same phase code, so the
//               needle entry of the asked key scores 48 (aligned) against a sink of 35, and its
//               identity lands in `answer`
//   layers 2, 3 random caches (the bridge still has to get them right), output projections zero
//   MoE         every expert's and the shared expert's down projection zero (inert)
//   head        value v <- answer v (x8), " unknown" <- ask (x4), EOS <- done (x16)
// Every hyper-connection mixes with constant weights (fn = 0), so streams stay equal copies.
import { f32ToBf16 } from '../../../numerics/bf16.ts'
import { tensorFrom, type Tensor } from '../../../formats/safetensors/index.ts'
import { PdBridgeError } from '../../../errors.ts'
import type { DeepseekV4Config } from '../../config.ts'
import { presetConfig } from '../presets.ts'
import { ropeInvFreq } from '../../rope.ts'
import { expectedParameters, type ParamSpec } from '../params.ts'
import { streamFor } from '../random.ts'
import { CH, HEAD, KEY_COUNT, LAYER0, LAYER1, TEXTURE_NORM, TEXTURE_WEIGHT_STD, VALUE_COUNT, needlePlan, needleTokenIds } from './layout.ts'

/** A weight being written: values in float32, row-major [out, in] for linears. */
class Draft {
  readonly values = new Map<string, Float32Array>()
  constructor (private readonly specs: Map<string, ParamSpec>) {}

  /** The tensor's values, zeroed on first touch. */
  zero (name: string): Float32Array {
    let v = this.values.get(name)
    if (v === undefined) {
      const spec = this.specs.get(name)
      if (spec === undefined) throw new PdBridgeError(`needle checkpoint: no parameter ${name}`)
      v = new Float32Array(spec.shape.reduce((a, b) => a * b, 1))
      this.values.set(name, v)
    }
    return v
  }

  /** A vector filled with `value`. */
  fill (name: string, value: number): Float32Array {
    return this.zero(name).fill(value)
  }

  /** W[row, col] = value for a linear weight [out, in]. */
  set (name: string, row: number, col: number, value: number): void {
    const spec = this.specs.get(name)!
    const w = this.zero(name)
    const cols = spec.shape[spec.shape.length - 1]
    if (row >= spec.shape[spec.shape.length - 2] || col >= cols) throw new PdBridgeError(`needle checkpoint: ${name}[${row}, ${col}] is out of ${JSON.stringify(spec.shape)}`)
    w[row * cols + col] = value
  }
}

// A row of the given length, normal(0, std) from the stream.
function noise (rng: ReturnType<typeof streamFor>, n: number, std: number): number[] {
  return Array.from({ length: n }, () => std * rng.nextNormal())
}

/**
 * The length an RMS-normalised vector gives one of its unit components: dim^0.5 / |v|, where |v|^2
 * counts the unit components plus the texture's expected energy (in units of one flag).
 */
function normalisedUnit (unitComponents: number, textureEnergy: number, dim: number): number {
  return Math.sqrt(dim / (unitComponents + textureEnergy))
}

/** Copy texture (hidden channels CH.texture..) into cache dims [lo, hi) of a linear, with small random weights. */
function textureRows (d: Draft, name: string, rows: readonly number[], hidden: number, rng: ReturnType<typeof streamFor>): void {
  for (const r of rows) noise(rng, hidden - CH.texture, TEXTURE_WEIGHT_STD).forEach((w, i) => d.set(name, r, CH.texture + i, w))
}

function range (lo: number, hi: number, offset = 0): number[] {
  return Array.from({ length: hi - lo }, (_, i) => offset + lo + i)
}

/** The phase code of key k on match pair i: a quarter turn per (k * i), so keys are orthogonal over 4 pairs. */
export function keyCode (k: number, i: number): [number, number] {
  const quarter = (k * i) % 4
  return ([[1, 0], [0, 1], [-1, 0], [0, -1]] as const)[quarter] as [number, number]
}

// The architectures the circuit is laid out for: tiny's (the needle preset) and long's (needle-long).
function checkArchitecture (cfg: DeepseekV4Config): void {
  const same = (ref: DeepseekV4Config) => cfg.hiddenSize === ref.hiddenSize && cfg.headDim === ref.headDim && cfg.qkRopeHeadDim === ref.qkRopeHeadDim &&
    cfg.numAttentionHeads === ref.numAttentionHeads && cfg.oGroups === ref.oGroups && cfg.oLoraRank === ref.oLoraRank &&
    cfg.qLoraRank === ref.qLoraRank && cfg.layerTypes.join() === ref.layerTypes.join() && cfg.hcMult === ref.hcMult &&
    cfg.indexHeadDim === ref.indexHeadDim && cfg.indexNHeads === ref.indexNHeads
  if (!same(presetConfig('tiny')) && !same(presetConfig('long'))) {
    throw new PdBridgeError('needle checkpoint: the circuit is laid out for the tiny architecture (hidden 256, 4 heads x 128, layers [sliding, CSA, HCA, CSA]) or the long one (layers [sliding, CSA, HCA, sliding], one indexer head of 64)')
  }
}

/** Write the circuit over `tensors` (the tiny random init, makeTensors(cfg, seed)): the needle checkpoint's tensors. */
export function writeNeedleCircuit (cfg: DeepseekV4Config, seed: number, tensors: Map<string, Tensor>): void {
  checkArchitecture(cfg)
  const specs = new Map(expectedParameters(cfg).map((s) => [s.name, s]))
  const d = new Draft(specs)
  const rng = streamFor(seed, 'needle-circuit')
  const ids = needleTokenIds(cfg.vocabSize)
  const hidden = cfg.hiddenSize
  const hd = cfg.headDim
  const nope = hd - cfg.qkRopeHeadDim
  const ropeDim = (pair: number) => nope + 2 * pair
  const plan = needlePlan(cfg)
  const ihd = cfg.indexHeadDim

  // Embedding: one + flags + texture of fixed norm.
  const emb = d.zero('model.embed_tokens.weight')
  for (let t = 0; t < cfg.vocabSize; t++) {
    const row = t * hidden
    emb[row + CH.one] = 1
    const tex = noise(rng, hidden - CH.texture, 1)
    const norm = Math.hypot(...tex)
    tex.forEach((x, i) => { emb[row + CH.texture + i] = TEXTURE_NORM * x / norm })
  }
  ids.questions.forEach((t, k) => { emb[t * hidden + CH.question + k] = 1 })
  ids.markers.forEach((t, k) => { emb[t * hidden + CH.marker + k] = 1 })
  ids.values.forEach((t, v) => { emb[t * hidden + CH.value + v] = 1; emb[t * hidden + CH.done] = 1 })
  emb[ids.unknown * hidden + CH.done] = 1

  // Constant hyper-connections and unit norms everywhere.
  const hcSites = ['attn_hc', 'ffn_hc']
  for (let i = 0; i < cfg.numHiddenLayers; i++) {
    for (const site of hcSites) {
      d.zero(`model.layers.${i}.${site}.fn`)
      d.zero(`model.layers.${i}.${site}.base`)
      d.fill(`model.layers.${i}.${site}.scale`, 1)
    }
    d.fill(`model.layers.${i}.input_layernorm.weight`, 1)
    d.fill(`model.layers.${i}.post_attention_layernorm.weight`, 1)
    // Inert MoE: no expert writes anything back.
    d.zero(`model.layers.${i}.mlp.experts.down_proj`)
    d.zero(`model.layers.${i}.mlp.shared_experts.down_proj.weight`)
  }
  d.zero('model.hc_head.hc_fn')
  d.zero('model.hc_head.hc_base')
  d.fill('model.hc_head.hc_scale', 1)
  d.fill('model.norm.weight', 1)

  // Texture energy a cache row picks up, in units of one flag: dims * std^2 * TEXTURE_NORM^2.
  const windowTexture = (lo: number, hi: number) => (hi - lo) * TEXTURE_WEIGHT_STD ** 2 * TEXTURE_NORM ** 2
  const slots = 2 * (cfg.compressRatios.find((r) => r > 0 && r < cfg.slidingWindow) ?? 4)

  // Layer 0: the question copier (head 0) and the previous-token marker detector (head 1).
  {
    const a = 'model.layers.0.self_attn'
    const mainInv = ropeInvFreq(cfg.rope.main)
    d.set(`${a}.q_a_proj.weight`, 0, CH.one, 1)
    d.fill(`${a}.q_a_norm.weight`, 1)
    d.set(`${a}.q_b_proj.weight`, 0 * hd + LAYER0.questionMatchDim, 0, 1)
    for (const p of LAYER0.previousTokenPairs) {
      // Head 1's query is the marker key's base (1, 0) turned back by one token's angle.
      d.set(`${a}.q_b_proj.weight`, 1 * hd + ropeDim(p), 0, Math.cos(mainInv[p]))
      d.set(`${a}.q_b_proj.weight`, 1 * hd + ropeDim(p) + 1, 0, -Math.sin(mainInv[p]))
    }
    const kv = `${a}.kv_proj.weight`
    for (let k = 0; k < KEY_COUNT; k++) {
      d.set(kv, LAYER0.questionMatchDim, CH.question + k, 1)
      d.set(kv, LAYER0.questionCodeDim + k, CH.question + k, 1)
      for (const p of LAYER0.previousTokenPairs) d.set(kv, ropeDim(p), CH.marker + k, 1)
      d.set(kv, LAYER0.markerCodeDim + k, CH.marker + k, 1)
    }
    textureRows(d, kv, range(...LAYER0.textureDims), hidden, rng)
    const tex = windowTexture(...LAYER0.textureDims)
    const questionUnit = normalisedUnit(2, tex, hd)
    const markerUnit = normalisedUnit(LAYER0.previousTokenPairs.length + 1, tex, hd)
    const kvNorm = d.fill(`${a}.kv_norm.weight`, 1)
    // A query head is sqrt(head_dim) long after its norm, so score = key component (head 0) and
    // 0.5 * pair length per aligned pair (head 1, four pairs of sqrt(128 / 4)).
    kvNorm[LAYER0.questionMatchDim] = LAYER0.questionScore / questionUnit
    const pairLength = LAYER0.previousTokenScore / (LAYER0.previousTokenPairs.length * Math.sqrt(hd / LAYER0.previousTokenPairs.length) / Math.sqrt(hd))
    for (const p of LAYER0.previousTokenPairs) { kvNorm[ropeDim(p)] = pairLength / markerUnit; kvNorm[ropeDim(p) + 1] = pairLength / markerUnit }
    for (let k = 0; k < KEY_COUNT; k++) {
      kvNorm[LAYER0.questionCodeDim + k] = 1 / questionUnit
      kvNorm[LAYER0.markerCodeDim + k] = 1 / markerUnit
    }
    const sinks = d.zero(`${a}.sinks`)
    sinks[0] = LAYER0.questionSink
    sinks[1] = LAYER0.previousTokenSink
    // Output: head 0's code dims -> ask, head 1's (group 0 input hd..2hd) -> needle.
    for (let k = 0; k < KEY_COUNT; k++) {
      d.set(`${a}.o_a_proj.weight`, k, LAYER0.questionCodeDim + k, 1)
      d.set(`${a}.o_a_proj.weight`, KEY_COUNT + k, hd + LAYER0.markerCodeDim + k, 1)
      d.set(`${a}.o_b_proj.weight`, CH.ask + k, k, 1)
      d.set(`${a}.o_b_proj.weight`, CH.needle + k, KEY_COUNT + k, 1)
    }
  }

  // Layer 1: retrieval through the compressor's entries and the indexer's picks.
  {
    const a = 'model.layers.1.self_attn'
    const c = `${a}.compressor`
    const ix = `${c}.indexer`
    textureRows(d, `${a}.kv_proj.weight`, range(16, nope), hidden, rng)
    d.fill(`${a}.kv_norm.weight`, 1)
    d.fill(`${a}.q_a_norm.weight`, 1)
    for (let k = 0; k < KEY_COUNT; k++) {
      d.set(`${a}.q_a_proj.weight`, k, CH.ask + k, 1)
      plan.matchPairs.forEach((pair, i) => {
        const [x, y] = keyCode(k, i)
        d.set(`${a}.q_b_proj.weight`, ropeDim(pair), k, x)
        d.set(`${a}.q_b_proj.weight`, ropeDim(pair) + 1, k, y)
      })
      d.set(`${ix}.q_b_proj.weight`, plan.indexerFlagDim, k, 1)
    }
    d.set(`${ix}.scorer.weights_proj.weight`, 0, CH.one, 1)
    // The overlap halves of each entry: the compressor's (head_dim wide) and the indexer's.
    for (const [half, ixHalf] of [[0, 0], [hd, ihd]]) {
      for (let k = 0; k < KEY_COUNT; k++) {
        plan.matchPairs.forEach((pair, i) => {
          const [x, y] = keyCode(k, i)
          d.set(`${c}.kv_proj.weight`, half + ropeDim(pair), CH.needle + k, x)
          d.set(`${c}.kv_proj.weight`, half + ropeDim(pair) + 1, CH.needle + k, y)
        })
        d.set(`${ix}.kv_proj.weight`, ixHalf + plan.indexerFlagDim, CH.needle + k, 1)
      }
      // A value token's gate wins the identity dims, the match pairs and the indexer's flag dim.
      const gated = [...range(0, VALUE_COUNT, half + LAYER1.identityDim), ...plan.matchPairs.flatMap((p) => [half + ropeDim(p), half + ropeDim(p) + 1])]
      for (let v = 0; v < VALUE_COUNT; v++) {
        d.set(`${c}.kv_proj.weight`, half + LAYER1.identityDim + v, CH.value + v, 1)
        for (const r of gated) d.set(`${c}.gate_proj.weight`, r, CH.value + v, LAYER1.gateWeight)
        d.set(`${ix}.gate_proj.weight`, ixHalf + plan.indexerFlagDim, CH.value + v, LAYER1.gateWeight)
      }
      textureRows(d, `${c}.kv_proj.weight`, range(...LAYER1.textureDims, half), hidden, rng)
      textureRows(d, `${ix}.kv_proj.weight`, range(...plan.indexerTextureDims, ixHalf), hidden, rng)
    }
    d.zero(`${c}.position_bias`)
    d.zero(`${ix}.position_bias`)
    d.fill(`${ix}.kv_norm.weight`, 1)
    // A needle entry: four match pairs of length ~1 and one identity dim, texture averaged over the slots.
    const entryTexture = (LAYER1.textureDims[1] - LAYER1.textureDims[0]) * TEXTURE_WEIGHT_STD ** 2 * TEXTURE_NORM ** 2 / slots
    const entryUnit = normalisedUnit(plan.matchPairs.length + 1, entryTexture, hd)
    const cNorm = d.fill(`${c}.kv_norm.weight`, 1)
    for (let v = 0; v < VALUE_COUNT; v++) cNorm[LAYER1.identityDim + v] = 1 / entryUnit
    for (const p of plan.matchPairs) { cNorm[ropeDim(p)] = LAYER1.pairKeyNorm / entryUnit; cNorm[ropeDim(p) + 1] = LAYER1.pairKeyNorm / entryUnit }
    d.zero(`${a}.sinks`)[0] = LAYER1.sink
    for (let v = 0; v < VALUE_COUNT; v++) {
      d.set(`${a}.o_a_proj.weight`, v, LAYER1.identityDim + v, 1)
      d.set(`${a}.o_b_proj.weight`, CH.answer + v, v, 1)
    }
  }

  // Layers 2 and 3 keep their random attention, but write nothing back.
  for (let i = 2; i < cfg.numHiddenLayers; i++) d.zero(`model.layers.${i}.self_attn.o_b_proj.weight`)

  // The head.
  const lm = 'lm_head.weight'
  d.zero(lm)
  ids.values.forEach((t, v) => d.set(lm, t, CH.answer + v, HEAD.answer))
  for (let k = 0; k < KEY_COUNT; k++) d.set(lm, ids.unknown, CH.ask + k, HEAD.unknown)
  d.set(lm, ids.eos, CH.done, HEAD.eos)

  for (const [name, values] of d.values) {
    const spec = specs.get(name)!
    tensors.set(name, spec.dtype === 'BF16'
      ? tensorFrom('BF16', spec.shape, Uint16Array.from(values, (x) => f32ToBf16(x)))
      : tensorFrom(spec.dtype, spec.shape, values))
  }
}
