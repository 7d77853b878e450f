// A MoE layer's routed experts after the router (docs/kernels.md, "MoE experts"): every expert on
// the rows routed to it, gate_up, the clamped SwiGLU, down, each output scaled by its routing weight,
// and each token's sum over its experts in ascending expert id. `expertsStage` is that computation
// for any way of applying the projections, rounding and silu (the engine's fallback for weights
// that are not plain bf16 matmuls, src/model/engine/moe.ts); the reference `moeExperts` is it with
// the Math.fround references, which the native moeExperts (native/src/moe_experts.cc) matches bit
// for bit. Orders: an expert's rows in ascending token, then pick; the sum from zero, experts in
// ascending id, one fp32 add each; the rounding points are transformers' bf16 ones.
import { fmathArray as fmathArrayRef } from './fmath-array.ts'
import { matmulBf16, roundBf16InPlace } from './reference.ts'
import {
  checkArray, checkFinite, checkFloat32Shape, checkIntegers, checkMatmulOptions, checkShape, describe, type AccumulationOrder,
} from './validate.ts'
import { NumericsError } from '../errors.ts'

const fround = Math.fround

/** How the stage applies the projections and the elementwise steps. */
export interface ExpertOps {
  /** The activation rounding of a whole array in place (identity for f32 activations). */
  round (a: Float32Array): void
  /** silu of every element, in place. */
  silu (a: Float32Array): void
  /** Expert e's gate_up ([2 inter, hidden]) of each input, and its down ([hidden, inter]); one output per expert listed. */
  gateUp (experts: readonly number[], inputs: ReadonlyArray<{ x: Float32Array, m: number }>): Float32Array[]
  down (experts: readonly number[], inputs: ReadonlyArray<{ x: Float32Array, m: number }>): Float32Array[]
}

/**
 * The clamped SwiGLU of `rows` rows into out: round(round(silu(min(gate, limit))) * clamp(up,
 * -limit, limit)), elementwise. Gate row r is gate[gOff + r * gStride, + count), up likewise, out
 * row r out[oOff + r * count, + count).
 */
export function swigluRows (gate: Float32Array, gOff: number, up: Float32Array, uOff: number, count: number, limit: number,
  out: Float32Array, oOff: number, ops: Pick<ExpertOps, 'round' | 'silu'>, rows = 1, gStride = count, uStride = count): void {
  const lim = fround(limit)
  const g = new Float32Array(rows * count)
  for (let r = 0; r < rows; r++) {
    const src = gOff + r * gStride
    for (let i = 0; i < count; i++) {
      const v = gate[src + i]
      g[r * count + i] = v > lim ? lim : v
    }
  }
  ops.silu(g)
  ops.round(g)
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
  ops.round(out.subarray(oOff, oOff + rows * count))
}

/** The routed experts' weighted sum [n, hidden] for x [n, hidden], picks and weights [n, topk] (before the sum's cast). */
export function expertsStage (x: Float32Array, n: number, hidden: number, inter: number, experts: number,
  picks: Int32Array, weights: Float32Array, topk: number, limit: number, ops: ExpertOps): Float32Array {
  const routedTo = Array.from({ length: experts }, () => ({ rows: [] as number[], wts: [] as number[] }))
  for (let t = 0; t < n; t++) {
    for (let k = 0; k < topk; k++) {
      const r = routedTo[picks[t * topk + k]]
      r.rows.push(t)
      r.wts.push(weights[t * topk + k])
    }
  }
  const active = routedTo.map((r, e) => ({ e, ...r })).filter((a) => a.rows.length > 0)
  const ids = active.map((a) => a.e)
  const gathered = active.map(({ rows }) => {
    const xin = new Float32Array(rows.length * hidden)
    rows.forEach((t, r) => xin.set(x.subarray(t * hidden, (t + 1) * hidden), r * hidden))
    return { x: xin, m: rows.length }
  })
  const activated = ops.gateUp(ids, gathered).map((gu, i) => {
    const m = gathered[i].m
    ops.round(gu)
    const h = new Float32Array(m * inter)
    swigluRows(gu, 0, gu, inter, inter, limit, h, 0, ops, m, 2 * inter, 2 * inter)
    return { x: h, m }
  })
  const downs = ops.down(ids, activated)
  const routed = new Float32Array(n * hidden)
  active.forEach(({ rows, wts }, i) => {
    const y = downs[i]
    ops.round(y)
    const m = rows.length
    for (let r = 0; r < m; r++) {
      const wr = wts[r]
      for (let c = 0; c < hidden; c++) y[r * hidden + c] = fround(y[r * hidden + c] * wr)
    }
    ops.round(y)
    for (let r = 0; r < m; r++) {
      const o = rows[r] * hidden
      for (let c = 0; c < hidden; c++) routed[o + c] = fround(routed[o + c] + y[r * hidden + c])
    }
  })
  return routed
}

/** Options of moeExperts: bf16 rounding points (bf16 activations) or none, and the matmuls' order. */
export interface MoeExpertsOptions {
  roundBf16?: boolean
  order?: AccumulationOrder
}

/** Checked moeExperts arguments. */
export interface CheckedMoeExperts {
  x: Float32Array, n: number, hidden: number, inter: number, gateUps: Uint16Array[], downs: Uint16Array[]
  picks: Int32Array, weights: Float32Array, topk: number, limit: number, roundBf16: boolean, order: AccumulationOrder
}

export function checkMoeExperts (kernel: string, x: unknown, n: unknown, hidden: unknown, inter: unknown, gateUps: unknown, downs: unknown,
  picks: unknown, weights: unknown, topk: unknown, limit: unknown, opts: unknown): CheckedMoeExperts {
  const [nn, h, i, k] = checkIntegers(kernel, [['n', n, 0], ['hidden', hidden, 1], ['inter', inter, 1], ['topk', topk, 1]])
  const xs = checkFloat32Shape(kernel, 'x', x, [nn, h], '[n, hidden]')
  if (!Array.isArray(gateUps) || !Array.isArray(downs)) throw new NumericsError(`${kernel}: gateUps and downs must be arrays of Uint16Array, got ${describe(gateUps)} and ${describe(downs)}`)
  if (gateUps.length === 0 || gateUps.length !== downs.length) {
    throw new NumericsError(`${kernel}: gateUps and downs must hold the same number of experts, at least one (got ${gateUps.length} and ${downs.length})`)
  }
  const gus = gateUps.map((w: unknown, e) => { const a = checkArray(kernel, `gateUps[${e}]`, w, 'Uint16Array'); checkShape(kernel, `gateUps[${e}]`, a, [2 * i, h], '[2 inter, hidden]'); return a })
  const ds = downs.map((w: unknown, e) => { const a = checkArray(kernel, `downs[${e}]`, w, 'Uint16Array'); checkShape(kernel, `downs[${e}]`, a, [h, i], '[hidden, inter]'); return a })
  const p = checkArray(kernel, 'picks', picks, 'Int32Array')
  checkShape(kernel, 'picks', p, [nn, k], '[n, topk]')
  const bad = p.findIndex((e) => e < 0 || e >= gus.length)
  if (bad >= 0) throw new NumericsError(`${kernel}: picks[${bad}] = ${p[bad]} is not an expert id below ${gus.length}`)
  const w = checkFloat32Shape(kernel, 'weights', weights, [nn, k], '[n, topk]')
  const lim = checkFinite(kernel, 'limit', limit)
  // The matmul's options bag (the same two keys), and nothing else in it.
  const { roundBf16, order } = checkMatmulOptions(kernel, opts)
  const extra = Object.keys(opts ?? {}).find((key) => key !== 'roundBf16' && key !== 'order')
  if (extra !== undefined) throw new NumericsError(`${kernel}: opts.${extra} is not an option (expected roundBf16, order)`)
  return { x: xs, n: nn, hidden: h, inter: i, gateUps: gus, downs: ds, picks: p, weights: w, topk: k, limit: lim, roundBf16, order }
}

/**
 * Reference: the routed experts' weighted sum [n, hidden] (before its cast) with experts whose
 * gate_up and down are bf16 codes, matmulBf16's reference in `order`, the bf16 rounding points
 * when roundBf16 (bf16 activations).
 */
export function moeExperts (x: Float32Array, n: number, hidden: number, inter: number, gateUps: readonly Uint16Array[], downs: readonly Uint16Array[],
  picks: Int32Array, weights: Float32Array, topk: number, limit: number, opts?: MoeExpertsOptions): Float32Array {
  const a = checkMoeExperts('reference.moeExperts', x, n, hidden, inter, gateUps, downs, picks, weights, topk, limit, opts)
  const mm = { order: a.order }
  return expertsStage(a.x, a.n, a.hidden, a.inter, a.gateUps.length, a.picks, a.weights, a.topk, a.limit, {
    round: (v) => { if (a.roundBf16) roundBf16InPlace(v) },
    silu: (v) => { fmathArrayRef('silu', v, v) },
    gateUp: (es, ins) => es.map((e, j) => matmulBf16(ins[j].x, ins[j].m, a.hidden, a.gateUps[e], 2 * a.inter, undefined, mm)),
    down: (es, ins) => es.map((e, j) => matmulBf16(ins[j].x, ins[j].m, a.inter, a.downs[e], a.hidden, undefined, mm)),
  })
}
