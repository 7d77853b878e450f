// Top-k per row, batched (the indexer's picks): argument checks and the reference of the native
// topkRows (native/src/topk_rows.cc), which is topkIndices with order 'index' per row. Row r
// considers scores[r * stride, r * stride + lengths[r]) and keeps the min(k, lengths[r]) best:
// higher score first, the same score (+0 == -0) to the lower index, -Inf and NaN never kept.
import { NumericsError } from '../errors.ts'
import { topkIndices } from './topk.ts'
import { checkArray, checkFloat32Shape, checkShape, checkSize } from './validate.ts'

/** The picks of every row: row r's ascending indices are indices[r * k, r * k + counts[r]), the rest -1. */
export interface TopkRows { indices: Int32Array, counts: Int32Array, k: number }

/** Checked topkRows arguments. */
export interface TopkRowsArgs { scores: Float32Array, rows: number, stride: number, lengths: Int32Array, k: number }

export function checkTopkRows (kernel: string, scores: unknown, rows: unknown, stride: unknown, lengths: unknown, k: unknown): TopkRowsArgs {
  const r = checkSize(kernel, 'rows', rows)
  const st = checkSize(kernel, 'stride', stride)
  const kk = checkSize(kernel, 'k', k)
  if (st > 0x7fffffff) throw new NumericsError(`${kernel}: stride must fit an Int32Array index, got ${st}`)
  const s = checkFloat32Shape(kernel, 'scores', scores, [r, st], '[rows * stride]')
  const ls = checkArray(kernel, 'lengths', lengths, 'Int32Array')
  checkShape(kernel, 'lengths', ls, [r], '[rows]')
  for (let i = 0; i < r; i++) {
    if (ls[i] < 0 || ls[i] > st) throw new NumericsError(`${kernel}: lengths[${i}] = ${ls[i]} is not within [0, stride = ${st}]`)
  }
  return { scores: s, rows: r, stride: st, lengths: ls, k: kk }
}

/** Reference: topkIndices(row, min(k, length), { order: 'index' }) per row. */
export function topkRows (scores: Float32Array, rows: number, stride: number, lengths: Int32Array, k: number): TopkRows {
  const a = checkTopkRows('reference.topkRows', scores, rows, stride, lengths, k)
  const indices = new Int32Array(rows * a.k).fill(-1)
  const counts = new Int32Array(rows)
  for (let r = 0; r < rows; r++) {
    const picked = topkIndices(a.scores.subarray(r * stride, r * stride + a.lengths[r]), Math.min(a.k, a.lengths[r]), { order: 'index' })
    indices.set(picked, r * a.k)
    counts[r] = picked.length
  }
  return { indices, counts, k: a.k }
}

/** Row r's picks as a view into `t.indices`. */
export function topkRow (t: TopkRows, r: number): Int32Array {
  return t.indices.subarray(r * t.k, r * t.k + t.counts[r])
}
