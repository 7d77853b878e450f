// fp8 e5m2 (torch.float8_e5m2, safetensors F8_E5M2): 1 sign, 5 exponent (bias 15), 2 mantissa.
// IEEE-like: S.11111.00 is ±Inf, S.11111.{01,10,11} are NaN; largest finite value ±57344.
// Encoding rounds to nearest, ties to even; |x| >= 61440 (halfway to 65536) overflows to ±Inf.
import { f32ToBits } from './bits.ts'
import { checkCode, checkOutLength } from './codes.ts'
import { minifloatMagnitude, roundToMinifloatCode } from './minifloat.ts'

/** Largest finite e5m2 value. */
export const E5M2_MAX = 57344
/** Code of +Inf. */
export const E5M2_INF = 0x7c
/** The NaN code written for NaN input (0x7f, or 0xff with the sign bit), as torch's cast writes. */
export const E5M2_NAN = 0x7f

const MAN_BITS = 2
const MIN_EXP = -14

/** Value of every e5m2 code, index = code. */
export const E5M2_VALUES: Float32Array = (() => {
  const table = new Float32Array(256)
  for (let code = 0; code < 256; code++) {
    const magnitude = code & 0x7f
    let value: number
    if (magnitude === E5M2_INF) value = Infinity
    else if (magnitude > E5M2_INF) value = NaN
    else value = minifloatMagnitude(magnitude, MAN_BITS, MIN_EXP)
    table[code] = code & 0x80 ? -value : value
  }
  // Write NaNs by bit pattern so the negative codes decode to a NaN that keeps its sign bit.
  const bits = new Uint32Array(table.buffer)
  for (let code = 0; code < 256; code++) {
    if (Number.isNaN(table[code])) bits[code] = code & 0x80 ? 0xffc00000 : 0x7fc00000
  }
  return table
})()

/** The float32 value of an e5m2 code (integer 0..255). Exact. */
export function e5m2ToF32 (code: number): number {
  checkCode(code, 0xff, 'e5m2')
  return E5M2_VALUES[code]
}

/**
 * The e5m2 code nearest to `x` (first rounded to float32), ties to even; overflow and ±Inf
 * become ±Inf; NaN becomes 0x7f with the input's sign.
 */
export function f32ToE5m2 (x: number): number {
  const bits = f32ToBits(x)
  const sign = (bits >>> 24) & 0x80
  const abs = bits & 0x7fffffff
  if (abs > 0x7f800000) return sign | E5M2_NAN
  if (abs === 0x7f800000) return sign | E5M2_INF
  const code = roundToMinifloatCode(abs, MAN_BITS, MIN_EXP)
  return sign | (code >= E5M2_INF ? E5M2_INF : code)
}

/** `x` after the e5m2 cast, as a number. */
export function roundE5m2 (x: number): number {
  return E5M2_VALUES[f32ToE5m2(x)]
}

/** Decode a whole e5m2 buffer into float32. */
export function decodeE5m2 (codes: Uint8Array, out: Float32Array = new Float32Array(codes.length)): Float32Array {
  checkOutLength(out.length, codes.length, 'decodeE5m2')
  for (let i = 0; i < codes.length; i++) out[i] = E5M2_VALUES[codes[i]]
  return out
}

/** Encode a float32 buffer into e5m2 codes. */
export function encodeE5m2 (values: Float32Array, out: Uint8Array = new Uint8Array(values.length)): Uint8Array {
  checkOutLength(out.length, values.length, 'encodeE5m2')
  for (let i = 0; i < values.length; i++) out[i] = f32ToE5m2(values[i])
  return out
}
