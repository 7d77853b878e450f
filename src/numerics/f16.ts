// IEEE 754 binary16 (half): 1 sign, 5 exponent (bias 15), 10 mantissa bits; Inf and NaN.
// Decoding is exact; encoding rounds to nearest, ties to even, overflowing to ±Inf.
import { bitsToF32, f32ToBits } from './bits.ts'
import { checkCode, checkOutLength } from './codes.ts'
import { roundToMinifloatCode } from './minifloat.ts'

/** Canonical quiet NaN written for any NaN input (sign kept), as torch's half cast does. */
export const F16_QUIET_NAN = 0x7e00
/** Code of +Inf. */
export const F16_INF = 0x7c00
/** Largest finite half value, 65504. */
export const F16_MAX = 65504

const MAN_BITS = 10
const MIN_EXP = -14

/** The float32 bit pattern of half code `code` (0..65535); NaN payloads move to the top mantissa bits. */
function f16BitsToF32Bits (code: number): number {
  const sign = (code & 0x8000) << 16
  const field = (code >>> 10) & 0x1f
  const mantissa = code & 0x3ff
  if (field === 0x1f) return (sign | 0x7f800000 | (mantissa << 13)) >>> 0
  if (field !== 0) return (sign | ((field + 112) << 23) | (mantissa << 13)) >>> 0
  if (mantissa === 0) return sign >>> 0
  // Subnormal half: normalise it, since every half subnormal is a float32 normal.
  let exp = 113
  let m = mantissa
  while ((m & 0x400) === 0) { m <<= 1; exp-- }
  return (sign | (exp << 23) | ((m & 0x3ff) << 13)) >>> 0
}

/** The float32 value of a half code (integer 0..65535). Exact. */
export function f16ToF32 (code: number): number {
  checkCode(code, 0xffff, 'f16')
  return bitsToF32(f16BitsToF32Bits(code))
}

/**
 * The half code nearest to `x` (first rounded to float32, as every kernel input is), ties to
 * even; |x| >= 65520 (halfway past 65504) becomes ±Inf; NaN becomes 0x7e00 with the input's sign.
 */
export function f32ToF16 (x: number): number {
  const bits = f32ToBits(x)
  const sign = (bits >>> 16) & 0x8000
  const abs = bits & 0x7fffffff
  if (abs > 0x7f800000) return sign | F16_QUIET_NAN
  if (abs === 0x7f800000) return sign | F16_INF
  const code = roundToMinifloatCode(abs, MAN_BITS, MIN_EXP)
  return sign | (code >= F16_INF ? F16_INF : code)
}

/** `x` rounded to the nearest half value, returned as a number (the rounding point of a half cast). */
export function roundF16 (x: number): number {
  return f16ToF32(f32ToF16(x))
}

/** Decode a whole half buffer into float32. */
export function decodeF16 (codes: Uint16Array, out: Float32Array = new Float32Array(codes.length)): Float32Array {
  checkOutLength(out.length, codes.length, 'decodeF16')
  const outBits = new Uint32Array(out.buffer, out.byteOffset, out.length)
  for (let i = 0; i < codes.length; i++) outBits[i] = f16BitsToF32Bits(codes[i])
  return out
}

/** Encode a float32 buffer into half codes (round to nearest even, overflow to ±Inf). */
export function encodeF16 (values: Float32Array, out: Uint16Array = new Uint16Array(values.length)): Uint16Array {
  checkOutLength(out.length, values.length, 'encodeF16')
  for (let i = 0; i < values.length; i++) out[i] = f32ToF16(values[i])
  return out
}
