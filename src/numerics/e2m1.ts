// fp4 e2m1 (the MXFP4 element): 1 sign, 2 exponent (bias 1), 1 mantissa; no Inf, no NaN.
// Magnitudes by code 0..7: 0, 0.5, 1, 1.5, 2, 3, 4, 6; code | 8 is the negative.
import { NumericsError } from '../errors.ts'
import { f32ToBits } from './bits.ts'
import { checkCode } from './codes.ts'
import { minifloatMagnitude, roundToMinifloatCode } from './minifloat.ts'

/** Largest e2m1 magnitude. */
export const E2M1_MAX = 6

const MAN_BITS = 1
const MIN_EXP = 0
const MAX_CODE = 7

/** Value of every e2m1 code, index = code 0..15 (read-only by convention). */
export const E2M1_VALUES: Float32Array = (() => {
  const table = new Float32Array(16)
  for (let code = 0; code < 16; code++) {
    const value = minifloatMagnitude(code & 7, MAN_BITS, MIN_EXP)
    table[code] = code & 8 ? -value : value
  }
  return table
})()

/** The value of an e2m1 code (integer 0..15). Exact. */
export function e2m1ToF32 (code: number): number {
  checkCode(code, 0xf, 'e2m1')
  return E2M1_VALUES[code]
}

/**
 * The e2m1 code nearest to `x` (first rounded to float32), ties to even code, SATURATING:
 * |x| beyond 6 (±Inf included) becomes ±6. The sign is kept, so small negatives give -0 (code 8).
 * Ties: 0.25 -> 0, 0.75 -> 1, 1.25 -> 1, 1.75 -> 2, 2.5 -> 2, 3.5 -> 4, 5 -> 4.
 * e2m1 has no NaN, so NaN input throws a NumericsError.
 */
export function f32ToE2m1 (x: number): number {
  const bits = f32ToBits(x)
  const abs = bits & 0x7fffffff
  if (abs > 0x7f800000) throw new NumericsError('e2m1: NaN has no e2m1 code')
  const sign = (bits >>> 28) & 8
  if (abs === 0x7f800000) return sign | MAX_CODE
  const code = roundToMinifloatCode(abs, MAN_BITS, MIN_EXP)
  return sign | (code > MAX_CODE ? MAX_CODE : code)
}

/** `x` after the saturating e2m1 cast, as a number. */
export function roundE2m1 (x: number): number {
  return E2M1_VALUES[f32ToE2m1(x)]
}
