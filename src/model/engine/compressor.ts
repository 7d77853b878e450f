// The compressors: every `ratio` tokens of a layer's attention input become one pooled K=V entry.
// HCA (ratio 128): entry i = softmax-over-tokens (per channel) of window i's gates + position bias,
// weighting window i's kv. CSA and the indexer (ratio 4, overlap): entry i pools 2*ratio slots,
// window i-1's Ca half then window i's Cb half. Then kv_norm and rope at position i*ratio.
// Windows are aligned to position 0 and pooled only when complete, so the entries do not depend
// on how the tokens were split into calls.
import { ropeRows, softmaxPool } from '../../kernels/index.ts'
import type { ActivationRounding } from './activation.ts'
import type { CompressorWeights } from './attention-weights.ts'
import type { CompressorState } from './cache.ts'
import type { PoolLayout } from './cache-layout.ts'
import type { ModelNumerics } from './numerics.ts'
import { weightedRmsNorm } from './norms.ts'

const fround = Math.fround

/** The parameters and tables one compressor needs. */
export interface CompressorParams {
  /** [ratio, width], added to the gates at pooling time */
  positionBias: Float32Array
  /** [dim] */
  normWeight: Float32Array
  rmsEps: number
  /** The compress rope table (cos/sin rows by position) and the rotated dims. */
  cos: Float32Array
  sin: Float32Array
  ropeDim: number
  /** Reference-quant hook on a finished entry (after rope), when the profile asks for it. */
  finishEntry?: (entry: Float32Array) => void
}

/** One compressor of a layer (the main one, or a CSA layer's indexer's): its weights, its pool's layout and the model's numerics. */
export class Compressor {
  constructor (readonly weights: CompressorWeights, readonly layout: PoolLayout, private readonly numerics: ModelNumerics,
    private readonly sizes: { ropeDim: number, rmsEps: number }, private readonly finishEntry: ((entry: Float32Array) => void) | undefined) {}

  /** Project the attention input x [n, hidden] (positions end-n..end-1) and feed it to `state`. */
  append (state: CompressorState, x: Float32Array, n: number, end: number): void {
    const { kv, gate } = this.project(x, n)
    this.feed(state, kv, gate, n, end)
  }

  /** The kv and gate projections [n, width] of x [n, hidden], in the activation dtype (row by row: a batch may project its rows at once). */
  project (x: Float32Array, n: number): { kv: Float32Array, gate: Float32Array } {
    const act = this.numerics.act
    return { kv: act.roundAll(this.weights.kv.apply(x, n)), gate: act.roundAll(this.weights.gate.apply(x, n)) }
  }

  /** Feed n tokens' projections (positions end-n..end-1) to `state`. */
  feed (state: CompressorState, kv: Float32Array, gate: Float32Array, n: number, end: number): void {
    const { act, rope } = this.numerics
    const table = rope.table('compress', end)
    compressTokens(state, kv, gate, n, {
      cos: table.cos, sin: table.sin, ropeDim: this.sizes.ropeDim, rmsEps: this.sizes.rmsEps, finishEntry: this.finishEntry,
      positionBias: this.weights.positionBias, normWeight: this.weights.normWeight,
    }, act)
  }

  /** Fill `state`'s overlap carry from its raw previous window (see deriveOverlapCarry). */
  completeCarry (state: CompressorState): void {
    deriveOverlapCarry(state, this.weights, this.numerics.act)
  }
}

/**
 * Feed n tokens' projections (kv, gate: [n, width], already in the activation dtype) to the state:
 * complete windows become entries (appended to state.entries), the rest waits in the buffer.
 */
export function compressTokens (state: CompressorState, kv: Float32Array, gate: Float32Array, n: number, p: CompressorParams, act: ActivationRounding): void {
  const { ratio, width } = state
  let t = 0
  while (t < n) {
    const take = Math.min(ratio - state.bufferLength, n - t)
    state.bufferKv.set(kv.subarray(t * width, (t + take) * width), state.bufferLength * width)
    state.bufferGate.set(gate.subarray(t * width, (t + take) * width), state.bufferLength * width)
    state.bufferLength += take
    t += take
    if (state.bufferLength === ratio) {
      poolWindow(state, p, act)
      state.bufferLength = 0
    }
  }
}

/**
 * The overlap carry (Ca half of the last complete window, gate with the position bias) from the raw
 * previous window, where a restore brought only that (oMLX's blocks carry `prev_win_kv/gate`, both
 * halves, no bias): the same values poolWindow keeps, computed the same way. No-op without one.
 */
export function deriveOverlapCarry (state: CompressorState, p: Pick<CompressorParams, 'positionBias'>, act: ActivationRounding): void {
  if (!state.overlap || state.prevWindowKv === null || state.prevWindowGate === null) return
  const { ratio, dim, width } = state
  const kvCarry = new Float32Array(ratio * dim)
  const gateCarry = new Float32Array(ratio * dim)
  for (let j = 0; j < ratio; j++) {
    for (let c = 0; c < dim; c++) {
      kvCarry[j * dim + c] = state.prevWindowKv[j * width + c]
      gateCarry[j * dim + c] = act.round(fround(state.prevWindowGate[j * width + c] + p.positionBias[j * width + c]))
    }
  }
  state.overlapKv = kvCarry
  state.overlapGate = gateCarry
}

// Pool the full buffer (window i = entryCount) into entry i.
function poolWindow (state: CompressorState, p: CompressorParams, act: ActivationRounding): void {
  const { ratio, dim, width } = state
  const slots = state.overlap ? 2 * ratio : ratio
  // Gates with the position bias, in the activation dtype (transformers adds in the model dtype).
  const biased = new Float32Array(ratio * width)
  for (let i = 0; i < ratio * width; i++) biased[i] = act.round(fround(state.bufferGate[i] + p.positionBias[i]))
  // Slot s, channel c: kv and gate. Overlap: slots [0, ratio) are window i-1's Ca half (the carry;
  // absent for window 0: zero kv, -inf gate, so weight 0), slots [ratio, 2 ratio) this window's Cb half.
  const slotKv = new Float32Array(slots * dim)
  const slotGate = new Float32Array(slots * dim)
  const cb = state.overlap ? dim : 0
  const first = state.overlap ? ratio : 0
  if (state.overlap) {
    if (state.overlapKv === null) deriveOverlapCarry(state, p, act)
    if (state.overlapKv !== null && state.overlapGate !== null) {
      slotKv.set(state.overlapKv)
      slotGate.set(state.overlapGate)
    } else {
      slotGate.fill(-Infinity, 0, ratio * dim)
    }
  }
  for (let j = 0; j < ratio; j++) {
    for (let c = 0; c < dim; c++) {
      slotKv[(first + j) * dim + c] = state.bufferKv[j * width + cb + c]
      slotGate[(first + j) * dim + c] = biased[j * width + cb + c]
    }
  }
  // Per channel: softmax over the slots in fp32 (max; exp(g - max); sum in slot order; divide),
  // weights cast to the activation dtype, then sum_s act(kv * w) in slot order, cast (the kernels' softmaxPool).
  const bf16 = act.bf16
  const pooled = softmaxPool(slotKv, slotGate, 1, slots, dim, undefined, { roundWeightsBf16: bf16, roundProductsBf16: bf16, roundOutBf16: bf16 })
  const entry = weightedRmsNorm(pooled, 1, dim, p.normWeight, p.rmsEps, act)
  const ropeDim = p.ropeDim
  ropeRows(entry, 1, 1, dim, dim - ropeDim, ropeDim, p.cos, p.sin, { firstTableRow: state.entryCount * ratio })
  act.roundAll(entry, dim - ropeDim, dim)
  p.finishEntry?.(entry)
  state.entries.append(entry)
  if (state.overlap) {
    // The carry for window i+1: this window's Ca half, gate with the bias.
    const kvCarry = new Float32Array(ratio * dim)
    const gateCarry = new Float32Array(ratio * dim)
    for (let j = 0; j < ratio; j++) {
      kvCarry.set(state.bufferKv.subarray(j * width, j * width + dim), j * dim)
      gateCarry.set(biased.subarray(j * width, j * width + dim), j * dim)
    }
    state.overlapKv = kvCarry
    state.overlapGate = gateCarry
    state.prevWindowKv = state.bufferKv.slice(0, ratio * width)
    state.prevWindowGate = state.bufferGate.slice(0, ratio * width)
  }
}
