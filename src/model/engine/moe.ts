// The MoE block: a router (sqrtsoftplus scores; top-k on scores + correction bias, or the hash
// table tid2eid[token] in hash_moe layers), routed experts with the clamped SwiGLU, and the shared
// expert added after. Orders: picked weights summed in ascending expert id; weighted expert
// outputs added in fp32 in ascending expert id, starting from zero, cast once.
import { NumericsError } from '../../errors.ts'
import { fmathArray, softplusF32, sqrtsoftplusF32, topkIndices } from '../../kernels/index.ts'
import { applyEach, type Linear } from '../weights/index.ts'
import type { ActivationRounding } from './activation.ts'

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

/**
 * The clamped SwiGLU of `rows` rows, elementwise into out: act(act(silu(min(gate, limit))) *
 * clamp(up, -limit, limit)), silu the kernels' siluF32. Gate row r is gate[gOff + r * gStride, + count),
 * up likewise, out row r out[oOff + r * count, + count): all rows go through fmathArray and each
 * rounding as one array (native in bulk).
 */
function swiglu (gate: Float32Array, gOff: number, up: Float32Array, uOff: number, count: number, limit: number,
  out: Float32Array, oOff: number, act: ActivationRounding, rows = 1, gStride = count, uStride = count): void {
  const lim = fround(limit)
  const g = new Float32Array(rows * count)
  for (let r = 0; r < rows; r++) {
    const src = gOff + r * gStride
    for (let i = 0; i < count; i++) {
      const v = gate[src + i]
      g[r * count + i] = v > lim ? lim : v
    }
  }
  act.roundAll(fmathArray('silu', g, g))
  for (let r = 0; r < rows; r++) {
    const src = uOff + r * uStride
    const o = oOff + r * count
    for (let i = 0; i < count; i++) {
      let u = up[src + i]
      if (u > lim) u = lim
      else if (u < -lim) u = -lim
      out[o + i] = fround(g[r * count + i] * u)
    }
  }
  act.roundAll(out, oOff, oOff + rows * count)
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
  // Experts in ascending id, each on the rows routed to it (batch-invariant matmuls): every
  // expert's rows gathered, all gate_up projections in one grouped call, each SwiGLU, all down
  // projections in one grouped call (applyEach: the same bits as one call per expert).
  const routedTo = Array.from({ length: experts }, () => ({ rows: [] as number[], wts: [] as number[] }))
  for (let t = 0; t < n; t++) {
    for (let k = 0; k < topk; k++) {
      const r = routedTo[picks[t * topk + k]]
      r.rows.push(t)
      r.wts.push(weights[t * topk + k])
    }
  }
  const active = routedTo.map((r, e) => ({ e, ...r })).filter((a) => a.rows.length > 0)
  const gathered = active.map(({ rows }) => {
    const xin = new Float32Array(rows.length * hidden)
    rows.forEach((t, r) => xin.set(x.subarray(t * hidden, (t + 1) * hidden), r * hidden))
    return { x: xin, m: rows.length }
  })
  const gateUps = applyEach(active.map((a) => w.gateUp[a.e]), gathered)
  const activated = gateUps.map((gu, i) => {
    const m = gathered[i].m
    act.roundAll(gu)
    const h = new Float32Array(m * inter)
    swiglu(gu, 0, gu, inter, inter, s.swigluLimit, h, 0, act, m, 2 * inter, 2 * inter)
    return { x: h, m }
  })
  const downs = applyEach(active.map((a) => w.down[a.e]), activated)
  const routed = new Float32Array(n * hidden)
  active.forEach(({ rows, wts }, i) => {
    const y = act.roundAll(downs[i])
    const m = rows.length
    // routed += act(y * weight) in fp32, experts in ascending id (the cast is elementwise: one call).
    for (let r = 0; r < m; r++) {
      const wr = wts[r]
      for (let c = 0; c < hidden; c++) y[r * hidden + c] = fround(y[r * hidden + c] * wr)
    }
    act.roundAll(y)
    for (let r = 0; r < m; r++) {
      const o = rows[r] * hidden
      for (let c = 0; c < hidden; c++) routed[o + c] = fround(routed[o + c] + y[r * hidden + c])
    }
  })
  // One cast of the expert sum, as transformers' default grouped_mm experts path does (its
  // per-token sum over the top-k outputs is an fp32 reduction of a bf16 tensor).
  act.roundAll(routed)
  // Shared expert, then routed + shared.
  const g = act.roundAll(w.sharedGate.apply(x, n))
  const u = act.roundAll(w.sharedUp.apply(x, n))
  const hs = new Float32Array(n * inter)
  swiglu(g, 0, u, 0, n * inter, s.swigluLimit, hs, 0, act)
  const shared = act.roundAll(w.sharedDown.apply(hs, n))
  for (let i = 0; i < n * hidden; i++) routed[i] = fround(routed[i] + shared[i])
  act.roundAll(routed)
  return routed
}
