// Several bf16 matmuls of one shape in one call (a MoE layer's experts, each on the rows routed to
// it): argument checks and the reference, which is matmulBf16's reference once per group. The
// native matmulBf16Grouped (native/src/matmul_grouped.cc) hands the threads the groups' output
// columns once for the whole call; each output is the same dot product, so the same bits.
import { NumericsError } from '../errors.ts'
import { matmulBf16 } from './reference.ts'
import type { MatmulOptions } from './reference.ts'
import { checkMatmul, checkNoOverlap, checkSize, describe, type AccumulationOrder } from './validate.ts'

/** One group: y [m, n] = x [m, k] · w [n, k]^T; `out` is allocated when absent. */
export interface MatmulGroup {
  x: Float32Array
  m: number
  w: Uint16Array
  out?: Float32Array
}

/** Checked grouped-matmul arguments: every group's arrays (outputs allocated) and the options. */
export interface CheckedGroups {
  xs: Float32Array[]
  ms: number[]
  ws: Uint16Array[]
  outs: Float32Array[]
  k: number
  n: number
  roundBf16: boolean
  order: AccumulationOrder
}

/** Each group checked as matmulBf16's arguments are; no output may overlap any group's input or another output. */
export function checkMatmulGrouped (kernel: string, groups: unknown, k: number, n: number, opts: MatmulOptions | undefined): CheckedGroups {
  if (!Array.isArray(groups)) throw new NumericsError(`${kernel}: groups must be an array, got ${describe(groups)}`)
  const c: CheckedGroups = { xs: [], ms: [], ws: [], outs: [], k: checkSize(kernel, 'k', k), n: checkSize(kernel, 'n', n), roundBf16: false, order: 'lanes8' }
  groups.forEach((g: unknown, i) => {
    if (g === null || typeof g !== 'object') throw new NumericsError(`${kernel}: groups[${i}] must be an object, got ${describe(g)}`)
    const { x, m, w, out } = g as MatmulGroup
    const a = checkMatmul(`${kernel}: groups[${i}]`, x, m, k, w, n, out, opts, 'Uint16Array')
    c.xs.push(a.x); c.ms.push(a.m); c.ws.push(a.w); c.outs.push(a.out)
    c.k = a.k; c.n = a.n; c.roundBf16 = a.roundBf16; c.order = a.order
  })
  c.outs.forEach((o, i) => {
    c.xs.forEach((x, j) => checkNoOverlap(`${kernel}: groups[${i}]`, 'out', o, `groups[${j}].x`, x))
    c.ws.forEach((w, j) => checkNoOverlap(`${kernel}: groups[${i}]`, 'out', o, `groups[${j}].w`, w))
    for (let j = 0; j < i; j++) checkNoOverlap(`${kernel}: groups[${i}]`, 'out', o, `groups[${j}].out`, c.outs[j])
  })
  return c
}

/** Reference: each group's matmulBf16 reference, in order; returns the outputs. */
export function matmulBf16Grouped (groups: readonly MatmulGroup[], k: number, n: number, opts?: MatmulOptions): Float32Array[] {
  const a = checkMatmulGrouped('reference.matmulBf16Grouped', groups, k, n, opts)
  return a.xs.map((x, i) => matmulBf16(x, a.ms[i], a.k, a.ws[i], a.n, a.outs[i], { roundBf16: a.roundBf16, order: a.order }))
}
