// The last step of every kernel output element, shared by all TypeScript references.
import { roundBf16 } from '../numerics/bf16.ts'

/** The bit pattern every kernel writes for NaN (sign and payload of a NaN are not mirrored). */
export const CANONICAL_NAN_BITS = 0x7fc00000

/**
 * Store `value` (a float32 value) at out[index]: optionally rounded to bf16 (RNE),
 * and written as the canonical quiet NaN when it is NaN. `outBits` views the same memory as `out`.
 */
export function storeOutput (out: Float32Array, outBits: Uint32Array, index: number, value: number, toBf16: boolean): void {
  if (Number.isNaN(value)) outBits[index] = CANONICAL_NAN_BITS
  else out[index] = toBf16 ? roundBf16(value) : value
}

/** A Uint32Array over the same memory as `out`, for writing exact bit patterns. */
export function bitsView (out: Float32Array): Uint32Array {
  return new Uint32Array(out.buffer, out.byteOffset, out.length)
}
