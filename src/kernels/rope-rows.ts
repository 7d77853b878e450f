// Interleaved RoPE over many rows and heads at once: argument checks and the reference, which is
// src/model/rope.ts applyRopeInterleaved per (row, head) with NaN made canonical.
import { NumericsError } from '../errors.ts'
import { applyRopeInterleaved } from '../numerics/rope-apply.ts'
import { CANONICAL_NAN_BITS } from './output.ts'
import { checkArray, checkShape, checkSize } from './validate.ts'

/** Which table row each row of x uses, and the direction. */
export interface RopeRowsOptions {
  /** Rotate by the conjugate (-sin), as V4 does to the attention output. */
  inverse?: boolean
  /** Row r of x uses table row tableRows[r] (Int32Array [rows]). */
  tableRows?: Int32Array
  /** Without tableRows: row r uses table row firstTableRow + r (default 0). */
  firstTableRow?: number
}

/** Checked ropeRows arguments. */
export interface RopeRowsArgs {
  x: Float32Array, rows: number, heads: number, headDim: number, offset: number, ropeDim: number
  cos: Float32Array, sin: Float32Array, tableRows: Int32Array, inverse: boolean
}

/**
 * Validate ropeRows arguments: x [rows, heads, headDim], ropeDim even >= 2, offset + ropeDim <=
 * headDim, cos and sin of equal length in whole rows of ropeDim / 2, every table row in range.
 * Builds tableRows from firstTableRow when it is not given.
 */
export function checkRopeRows (kernel: string, x: unknown, rows: unknown, heads: unknown, headDim: unknown, offset: unknown,
  ropeDim: unknown, cos: unknown, sin: unknown, opts: unknown): RopeRowsArgs {
  const xs = checkArray(kernel, 'x', x, 'Float32Array')
  const rs = checkSize(kernel, 'rows', rows)
  const hs = checkSize(kernel, 'heads', heads)
  const hd = checkSize(kernel, 'headDim', headDim)
  const off = checkSize(kernel, 'offset', offset)
  const rd = checkSize(kernel, 'ropeDim', ropeDim)
  if (rd < 2 || rd % 2 !== 0) throw new NumericsError(`${kernel}: ropeDim must be a positive even integer, got ${rd}`)
  if (off + rd > hd) throw new NumericsError(`${kernel}: offset + ropeDim = ${off + rd} exceeds headDim ${hd}`)
  checkShape(kernel, 'x', xs, [rs, hs, hd], '[rows, heads, headDim]')
  const cs = checkArray(kernel, 'cos', cos, 'Float32Array')
  const ss = checkArray(kernel, 'sin', sin, 'Float32Array')
  const half = rd / 2
  if (cs.length !== ss.length || cs.length % half !== 0) {
    throw new NumericsError(`${kernel}: cos (${cs.length}) and sin (${ss.length}) must be equal multiples of ropeDim / 2 = ${half}`)
  }
  const tableLength = cs.length / half
  if (opts !== undefined && (opts === null || typeof opts !== 'object')) throw new NumericsError(`${kernel}: opts must be an object`)
  const o = (opts ?? {}) as Record<string, unknown>
  for (const key of Object.keys(o)) {
    if (!['inverse', 'tableRows', 'firstTableRow'].includes(key)) {
      throw new NumericsError(`${kernel}: opts.${key} is not an option (expected inverse, tableRows, firstTableRow)`)
    }
  }
  if (o.inverse !== undefined && typeof o.inverse !== 'boolean') throw new NumericsError(`${kernel}: opts.inverse must be a boolean`)
  let tableRows: Int32Array
  if (o.tableRows !== undefined) {
    if (o.firstTableRow !== undefined) throw new NumericsError(`${kernel}: give opts.tableRows or opts.firstTableRow, not both`)
    tableRows = checkArray(kernel, 'opts.tableRows', o.tableRows, 'Int32Array')
    checkShape(kernel, 'opts.tableRows', tableRows, [rs], '[rows]')
    for (let r = 0; r < rs; r++) {
      if (tableRows[r] < 0 || tableRows[r] >= tableLength) {
        throw new NumericsError(`${kernel}: opts.tableRows[${r}] = ${tableRows[r]} is outside a table of ${tableLength} rows`)
      }
    }
  } else {
    const first = o.firstTableRow === undefined ? 0 : checkSize(kernel, 'opts.firstTableRow', o.firstTableRow)
    if (rs > 0 && first + rs > tableLength) {
      throw new NumericsError(`${kernel}: rows ${first} .. ${first + rs - 1} do not fit in a table of ${tableLength} rows`)
    }
    tableRows = Int32Array.from({ length: rs }, (_, r) => first + r)
  }
  return { x: xs, rows: rs, heads: hs, headDim: hd, offset: off, ropeDim: rd, cos: cs, sin: ss, tableRows, inverse: o.inverse === true }
}

/**
 * Reference of ropeRows: applyRopeInterleaved(x, (r * heads + h) * headDim + offset, ropeDim, cos,
 * sin, tableRow(r), inverse) for every row r and head h, then every NaN in the rotated slices
 * written as the canonical NaN. In place; returns x.
 */
export function ropeRows (x: Float32Array, rows: number, heads: number, headDim: number, offset: number, ropeDim: number,
  cos: Float32Array, sin: Float32Array, opts?: RopeRowsOptions): Float32Array {
  const a = checkRopeRows('reference.ropeRows', x, rows, heads, headDim, offset, ropeDim, cos, sin, opts)
  const bits = new Uint32Array(a.x.buffer, a.x.byteOffset, a.x.length)
  for (let r = 0; r < a.rows; r++) {
    for (let h = 0; h < a.heads; h++) {
      const start = (r * a.heads + h) * a.headDim + a.offset
      applyRopeInterleaved(a.x, start, a.ropeDim, a.cos, a.sin, a.tableRows[r], a.inverse)
      for (let i = start; i < start + a.ropeDim; i++) if (Number.isNaN(a.x[i])) bits[i] = CANONICAL_NAN_BITS
    }
  }
  return a.x
}
