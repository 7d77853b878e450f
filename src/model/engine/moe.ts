// The MoE block: a router (sqrtsoftplus scores; top-k on scores + correction bias, or the hash
// table tid2eid[token] in hash_moe layers), routed experts with the clamped SwiGLU, and the shared
// expert added after. Orders: picked weights summed in ascending expert id; weighted expert
// outputs added in fp32 in ascending expert id, starting from zero, cast once.
import { NumericsError } from '../../errors.ts'
import { expertsStage, fmathArray, moeExperts, softplusF32, sqrtsoftplusF32, swigluRows, topkIndices, type AccumulationOrder, type ExpertOps } from '../../kernels/index.ts'
import type { Linear } from '../weights/index.ts'
import type { ActivationRounding } from './activation.ts'
import { groupedKernelsOn } from './grouping.ts'

const fround = Math.fround

/** One layer's MoE weights. */
export interface MoeWeights {
  gate: Linear
  /** moe layers: the selection bias; null in hash layers */
  correctionBias: Float32Array | null
  /** hash layers: flat [vocab, topk]; null in moe layers */
  tid2eid: Int32Array | null
  /** gate_up_proj[e] ([2*inter, hidden]) and down_proj[e] ([hidden, inter]) per expert */
  gateUp: Linear[]
  down: Linear[]
  sharedGate: Linear
  sharedUp: Linear
  sharedDown: Linear
}

/** MoE constants. */
export interface MoeShape {
  hidden: number
  inter: number
  experts: number
  topk: number
  routedScalingFactor: number
  swigluLimit: number
  scoringFunc: 'sqrtsoftplus' | 'softmax' | 'sigmoid'
}

/** One layer's MoE: its weights, the model's MoE constants and activation rounding. */
export class Moe {
  constructor (readonly weights: MoeWeights, readonly shape: MoeShape, private readonly act: ActivationRounding) {}

  /** The block for x [n, hidden] with token ids `tokens` (for hash routing). Returns [n, hidden]. */
  forward (x: Float32Array, n: number, tokens: ArrayLike<number>): Float32Array {
    return moeBlock(this.weights, this.shape, x, n, tokens, this.act)
  }
}

/** A layer's experts as the native stage takes them: every projection's bf16 codes, in one order. */
interface NativeExperts {
  gateUps: Uint16Array[]
  downs: Uint16Array[]
  order: AccumulationOrder
}

const nativeExpertsOf = new WeakMap<MoeWeights, NativeExperts | null>()

/**
 * The layer's experts for moeExperts when every projection is a plain bf16 matmul in one order,
 * else null; found once per layer's weights, not per forward.
 */
function nativeExperts (w: MoeWeights): NativeExperts | null {
  let found = nativeExpertsOf.get(w)
  if (found === undefined) {
    const order = w.gateUp[0]?.bf16Matmul?.order
    const plain = order !== undefined && [...w.gateUp, ...w.down].every((l) => l.bf16Matmul?.order === order)
    found = plain ? { gateUps: w.gateUp.map((l) => l.bf16Matmul!.codes), downs: w.down.map((l) => l.bf16Matmul!.codes), order } : null
    nativeExpertsOf.set(w, found)
  }
  return found
}

/** The activation rounding and silu of the stage (silu native in bulk). */
function expertOps (act: ActivationRounding): Pick<ExpertOps, 'round' | 'silu'> {
  return { round: (a) => { act.roundAll(a) }, silu: (a) => { fmathArray('silu', a, a) } }
}

/** Router scores: sqrt(softplus(logit)); in bf16 two ops each cast to bf16, as transformers' bf16 model computes it. */
function score (logit: number, act: ActivationRounding): number {
  return act.bf16 ? act.round(fround(Math.sqrt(act.round(softplusF32(logit))))) : sqrtsoftplusF32(logit)
}

/** The MoE block for x [n, hidden] with token ids `tokens` (for hash routing). Returns [n, hidden]. */
export function moeBlock (w: MoeWeights, s: MoeShape, x: Float32Array, n: number, tokens: ArrayLike<number>, act: ActivationRounding): Float32Array {
  if (s.scoringFunc !== 'sqrtsoftplus') throw new Error(`unreachable: scoring_func ${s.scoringFunc} is refused at load`)
  const { hidden, inter, experts, topk } = s
  const logits = act.roundAll(w.gate.apply(x, n))
  // Routing: per token the picked experts (ascending) and their weights.
  const picks = new Int32Array(n * topk)
  const weights = new Float32Array(n * topk)
  const scores = new Float32Array(experts)
  const selection = new Float32Array(experts)
  const scale = fround(s.routedScalingFactor)
  const tiny = fround(1e-20)
  for (let t = 0; t < n; t++) {
    for (let e = 0; e < experts; e++) scores[e] = score(logits[t * experts + e], act)
    let chosen: Int32Array
    if (w.tid2eid !== null) {
      chosen = w.tid2eid.slice(tokens[t] * topk, (tokens[t] + 1) * topk).sort()
    } else {
      for (let e = 0; e < experts; e++) selection[e] = act.round(fround(scores[e] + w.correctionBias![e]))
      chosen = topkIndices(selection, topk, { order: 'index' })
      if (chosen.length < topk) throw new NumericsError(`MoE router: token ${t} of the chunk has fewer than ${topk} finite expert scores`)
    }
    // The sum is fp32 and cast once (a reduction), then + 1e-20 in the activation dtype.
    let sum = 0
    for (let k = 0; k < topk; k++) sum = fround(sum + scores[chosen[k]])
    const den = act.round(fround(act.round(sum) + tiny))
    for (let k = 0; k < topk; k++) {
      picks[t * topk + k] = chosen[k]
      weights[t * topk + k] = act.round(fround(act.round(fround(scores[chosen[k]] / den)) * scale))
    }
  }
  const ops = expertOps(act)
  const native = groupedKernelsOn() ? nativeExperts(w) : null
  const routed = native !== null
    ? moeExperts(x, n, hidden, inter, native.gateUps, native.downs, picks, weights, topk, s.swigluLimit, { roundBf16: act.bf16, order: native.order })
    : expertsStage(x, n, hidden, inter, experts, picks, weights, topk, s.swigluLimit, {
      ...ops,
      gateUp: (es, ins) => es.map((e, i) => w.gateUp[e].apply(ins[i].x, ins[i].m)),
      down: (es, ins) => es.map((e, i) => w.down[e].apply(ins[i].x, ins[i].m)),
    })
  // One cast of the expert sum, as transformers' default grouped_mm experts path does (its
  // per-token sum over the top-k outputs is an fp32 reduction of a bf16 tensor).
  act.roundAll(routed)
  // Shared expert, then routed + shared.
  const g = act.roundAll(w.sharedGate.apply(x, n))
  const u = act.roundAll(w.sharedUp.apply(x, n))
  const hs = new Float32Array(n * inter)
  swigluRows(g, 0, u, 0, n * inter, s.swigluLimit, hs, 0, ops)
  const shared = act.roundAll(w.sharedDown.apply(hs, n))
  for (let i = 0; i < n * hidden; i++) routed[i] = fround(routed[i] + shared[i])
  act.roundAll(routed)
  return routed
}
