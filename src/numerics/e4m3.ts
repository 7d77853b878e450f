// fp8 e4m3fn (torch.float8_e4m3fn, safetensors F8_E4M3): 1 sign, 4 exponent (bias 7), 3 mantissa.
// No infinities; S.1111.111 is NaN, so the largest finite value is S.1111.110 = ±448.
// Subnormals are 2^-6 * m/8. Encoding rounds to nearest, ties to even, in one of two overflow modes.
import { f32ToBits } from './bits.ts'
import { checkCode, checkOutLength } from './codes.ts'
import { minifloatMagnitude, roundToMinifloatCode } from './minifloat.ts'

/** Largest finite e4m3fn value. */
export const E4M3_MAX = 448
/** The NaN code written for NaN input (0x7f, or 0xff with the sign bit). */
export const E4M3_NAN = 0x7f
/** Magnitude code of 448. */
const MAX_CODE = 0x7e

const MAN_BITS = 3
const MIN_EXP = -6

/** Value of every e4m3fn code, index = code; 0x7f and 0xff are NaN. */
export const E4M3_VALUES: Float32Array = (() => {
  const table = new Float32Array(256)
  for (let code = 0; code < 256; code++) {
    const magnitude = code & 0x7f
    const value = magnitude === E4M3_NAN ? NaN : minifloatMagnitude(magnitude, MAN_BITS, MIN_EXP)
    table[code] = code & 0x80 ? -value : value
  }
  // Write NaNs by bit pattern so the negative codes decode to a NaN that keeps its sign bit.
  const bits = new Uint32Array(table.buffer)
  for (let code = 0; code < 256; code++) {
    if (Number.isNaN(table[code])) bits[code] = code & 0x80 ? 0xffc00000 : 0x7fc00000
  }
  return table
})()

/** The float32 value of an e4m3fn code (integer 0..255). Exact. */
export function e4m3ToF32 (code: number): number {
  checkCode(code, 0xff, 'e4m3')
  return E4M3_VALUES[code]
}

/**
 * The e4m3fn code nearest to `x` (first rounded to float32), ties to even, SATURATING:
 * finite values whose rounding would exceed 448 become ±448, ±Inf becomes ±448, NaN stays NaN
 * (0x7f with the input's sign). This is the cast DeepSeek's quantisers perform: they scale into
 * range and clamp to ±448 before casting, which is the same thing. Use it for quantisation.
 */
export function f32ToE4m3 (x: number): number {
  const bits = f32ToBits(x)
  const sign = (bits >>> 24) & 0x80
  const abs = bits & 0x7fffffff
  if (abs > 0x7f800000) return sign | E4M3_NAN
  if (abs === 0x7f800000) return sign | MAX_CODE
  const code = roundToMinifloatCode(abs, MAN_BITS, MIN_EXP)
  return sign | (code > MAX_CODE ? MAX_CODE : code)
}

/**
 * The e4m3fn code nearest to `x` (first rounded to float32), ties to even, WITHOUT saturation:
 * a value that rounds past 448 (|x| > 464, halfway to the would-be next value 480), ±Inf and NaN
 * all become NaN (0x7f with the input's sign). This is torch's plain `.to(torch.float8_e4m3fn)`.
 * Use it only to reproduce such a cast; quantisers want `f32ToE4m3`.
 */
export function f32ToE4m3NoSat (x: number): number {
  const bits = f32ToBits(x)
  const sign = (bits >>> 24) & 0x80
  const abs = bits & 0x7fffffff
  if (abs >= 0x7f800000) return sign | E4M3_NAN
  const code = roundToMinifloatCode(abs, MAN_BITS, MIN_EXP)
  return sign | (code > MAX_CODE ? E4M3_NAN : code)
}

/** `x` after the saturating e4m3fn cast, as a number. */
export function roundE4m3 (x: number): number {
  return E4M3_VALUES[f32ToE4m3(x)]
}

/** Decode a whole e4m3fn buffer into float32. */
export function decodeE4m3 (codes: Uint8Array, out: Float32Array = new Float32Array(codes.length)): Float32Array {
  checkOutLength(out.length, codes.length, 'decodeE4m3')
  for (let i = 0; i < codes.length; i++) out[i] = E4M3_VALUES[codes[i]]
  return out
}

/** Encode a float32 buffer into e4m3fn codes with the saturating cast (`f32ToE4m3`). */
export function encodeE4m3 (values: Float32Array, out: Uint8Array = new Uint8Array(values.length)): Uint8Array {
  checkOutLength(out.length, values.length, 'encodeE4m3')
  for (let i = 0; i < values.length; i++) out[i] = f32ToE4m3(values[i])
  return out
}

/** Encode a float32 buffer into e4m3fn codes with torch's non-saturating cast (`f32ToE4m3NoSat`). */
export function encodeE4m3NoSat (values: Float32Array, out: Uint8Array = new Uint8Array(values.length)): Uint8Array {
  checkOutLength(out.length, values.length, 'encodeE4m3NoSat')
  for (let i = 0; i < values.length; i++) out[i] = f32ToE4m3NoSat(values[i])
  return out
}
