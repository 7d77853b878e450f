// Reinterpreting float32 bits: the one place that owns the scratch views.
const f32 = new Float32Array(1)
const u32 = new Uint32Array(f32.buffer)

/** The IEEE-754 binary32 bit pattern of `x` after rounding it to float32. */
export function f32ToBits (x: number): number {
  f32[0] = x
  return u32[0]
}

/** The float32 value whose bit pattern is `bits` (taken as an unsigned 32-bit integer). */
export function bitsToF32 (bits: number): number {
  u32[0] = bits >>> 0
  return f32[0]
}
