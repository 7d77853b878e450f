// e8m0 (safetensors F8_E8M0, the MX / "ue8m0" scale): 8 exponent bits, no sign, no mantissa.
// Code c < 255 is 2^(c - 127), from 2^-127 (a float32 subnormal) to 2^127; 255 is NaN.
import { NumericsError } from '../errors.ts'
import { f32ToBits } from './bits.ts'
import { checkCode, checkOutLength } from './codes.ts'

/** The NaN code. */
export const E8M0_NAN = 0xff
/** Exponent of the smallest scale, code 0. */
export const E8M0_MIN_EXPONENT = -127
/** Exponent of the largest scale, code 254. */
export const E8M0_MAX_EXPONENT = 127

/** Value of every e8m0 code, index = code (read-only by convention). */
export const E8M0_VALUES: Float32Array = (() => {
  const table = new Float32Array(256)
  for (let code = 0; code < 255; code++) table[code] = 2 ** (code - 127)
  table[E8M0_NAN] = NaN
  return table
})()

/** The scale 2^(code - 127) of an e8m0 code (integer 0..255); 255 gives NaN. Exact. */
export function e8m0ToF32 (code: number): number {
  checkCode(code, 0xff, 'e8m0')
  return E8M0_VALUES[code]
}

/** The e8m0 code of the scale 2^e, for an integer e in -127..127. */
export function e8m0FromExponent (e: number): number {
  if (!Number.isInteger(e) || e < E8M0_MIN_EXPONENT || e > E8M0_MAX_EXPONENT) {
    throw new NumericsError(`e8m0: exponent ${String(e)} is not an integer in -127..127`)
  }
  return e + 127
}

/**
 * The e8m0 code of the smallest scale >= `x` (x first rounded to float32): for a normal float32
 * that is 2^(exponent + (mantissa != 0 ? 1 : 0)), DeepSeek's "round the scale up to a power of
 * two" rule. Values at or below 2^-127 (0 and most float32 subnormals) give code 0, the smallest
 * scale. NaN, and values above 2^127 (no e8m0 scale covers them, +Inf included), give the NaN
 * code 255. A negative `x` is a caller error: scales are never negative.
 */
export function e8m0Ceil (x: number): number {
  const bits = f32ToBits(x)
  const abs = bits & 0x7fffffff
  if (abs > 0x7f800000) return E8M0_NAN
  if (bits !== abs && abs !== 0) {
    throw new NumericsError(`e8m0: cannot hold the negative scale ${String(x)}`)
  }
  if (abs <= 0x00400000) return 0 // 2^-127 is the float32 subnormal 0x00400000
  if (abs < 0x00800000) return 1 // subnormals above 2^-127 round up to 2^-126
  const exponent = (abs >>> 23) - 127 + ((abs & 0x7fffff) !== 0 ? 1 : 0)
  return exponent > E8M0_MAX_EXPONENT ? E8M0_NAN : exponent + 127
}

/** Decode a whole e8m0 buffer into float32 scales. */
export function decodeE8m0 (codes: Uint8Array, out: Float32Array = new Float32Array(codes.length)): Float32Array {
  checkOutLength(out.length, codes.length, 'decodeE8m0')
  for (let i = 0; i < codes.length; i++) out[i] = E8M0_VALUES[codes[i]]
  return out
}
