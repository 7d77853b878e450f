// bfloat16: the top 16 bits of a float32. Decoding is exact; encoding rounds to nearest, ties to even.
import { bitsToF32, f32ToBits } from './bits.ts'

/** Canonical quiet NaN written for any NaN input (sign kept). */
export const BF16_QUIET_NAN = 0x7fc0

/** The float32 value of a bf16 code (0..65535). Exact. */
export function bf16ToF32 (code: number): number {
  return bitsToF32((code & 0xffff) << 16)
}

/**
 * The bf16 code nearest to `x` (first rounded to float32, as every kernel input is),
 * ties to even; NaN becomes a quiet NaN with the input's sign, overflow becomes ±Inf.
 */
export function f32ToBf16 (x: number): number {
  const bits = f32ToBits(x)
  if ((bits & 0x7f800000) === 0x7f800000 && (bits & 0x007fffff) !== 0) {
    return ((bits >>> 16) & 0x8000) | BF16_QUIET_NAN
  }
  // Adding 0x7fff plus the lowest kept bit rounds to nearest with ties to even;
  // a carry out of the mantissa bumps the exponent, which is the right answer (up to Inf).
  const rounded = bits + 0x7fff + ((bits >>> 16) & 1)
  return (rounded >>> 16) & 0xffff
}

/** `x` rounded to the nearest bf16 value, returned as a number (the rounding point of a bf16 cast). */
export function roundBf16 (x: number): number {
  return bf16ToF32(f32ToBf16(x))
}

/** Decode a whole bf16 buffer into float32. */
export function decodeBf16 (codes: Uint16Array, out: Float32Array = new Float32Array(codes.length)): Float32Array {
  const outBits = new Uint32Array(out.buffer, out.byteOffset, out.length)
  for (let i = 0; i < codes.length; i++) outBits[i] = codes[i] << 16
  return out
}

/**
 * The bf16 codes of `values` if every value is exactly a bf16 value (low 16 bits zero: the code
 * is the top half; any other NaN counts too: it becomes the quiet bf16 NaN of its sign), else null.
 */
export function exactBf16Codes (values: Float32Array): Uint16Array | null {
  const bits = new Uint32Array(values.buffer, values.byteOffset, values.length)
  const codes = new Uint16Array(values.length)
  for (let i = 0; i < bits.length; i++) {
    const b = bits[i]
    if ((b & 0xffff) === 0) codes[i] = b >>> 16
    else if ((b & 0x7fffffff) > 0x7f800000) codes[i] = ((b >>> 16) & 0x8000) | BF16_QUIET_NAN
    else return null
  }
  return codes
}

/** Encode a float32 buffer into bf16 codes (round to nearest even). */
export function encodeBf16 (values: Float32Array, out = new Uint16Array(values.length)): Uint16Array {
  for (let i = 0; i < values.length; i++) out[i] = f32ToBf16(values[i])
  return out
}
