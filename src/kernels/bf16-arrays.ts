// Whole-buffer bf16 conversions of weight loading: argument checks and the references of the
// native decodeBf16Array and exactBf16Codes (native/src/bf16_arrays.cc), which are
// src/numerics/bf16.ts decodeBf16 and exactBf16Codes.
import { decodeBf16, exactBf16Codes as exactCodes } from '../numerics/bf16.ts'
import { checkArray, checkFloat32Shape, checkNoOverlap, checkShape } from './validate.ts'

/** Checked decodeBf16Array arguments, with the output allocated when absent. */
export function checkDecodeBf16Array (kernel: string, codes: unknown, out: unknown): { codes: Uint16Array, out: Float32Array } {
  const c = checkArray(kernel, 'codes', codes, 'Uint16Array')
  if (out === undefined) return { codes: c, out: new Float32Array(c.length) }
  const o = checkFloat32Shape(kernel, 'out', out, [c.length], '[length of codes]')
  checkNoOverlap(kernel, 'out', o, 'codes', c)
  return { codes: c, out: o }
}

/** Reference: out[i] = the float32 of bf16 code codes[i] (exact); returns out. */
export function decodeBf16Array (codes: Uint16Array, out?: Float32Array): Float32Array {
  const a = checkDecodeBf16Array('reference.decodeBf16Array', codes, out)
  return decodeBf16(a.codes, a.out)
}

/** Checked exactBf16Codes arguments, with the output allocated when absent. */
export function checkExactBf16Codes (kernel: string, values: unknown, out: unknown): { values: Float32Array, out: Uint16Array } {
  const v = checkArray(kernel, 'values', values, 'Float32Array')
  if (out === undefined) return { values: v, out: new Uint16Array(v.length) }
  const o = checkArray(kernel, 'out', out, 'Uint16Array')
  checkShape(kernel, 'out', o, [v.length], '[length of values]')
  checkNoOverlap(kernel, 'out', o, 'values', v)
  return { values: v, out: o }
}

/**
 * Reference: the bf16 codes of `values` (in `out` when given) when every one is exactly bf16 (a
 * NaN with low bits set: the quiet NaN of its sign), else null (out then holds no result).
 */
export function exactBf16Codes (values: Float32Array, out?: Uint16Array): Uint16Array | null {
  const a = checkExactBf16Codes('reference.exactBf16Codes', values, out)
  const codes = exactCodes(a.values)
  if (codes === null) return null
  a.out.set(codes)
  return a.out
}
