// bf16 rounding for the hot loops: the rule of src/numerics/bf16.ts (float32 first, then round to
// nearest even on the upper 16 bits), inlined over one scratch word so a multiply-accumulate costs
// two typed-array round trips, not four. MLX writes NaN as 0x7FC0; every NaN stays NaN here.
import { roundBf16 } from '../bf16.ts'

const f = new Float32Array(1)
const u = new Uint32Array(f.buffer)

/** bf16(f32(x)), as a number. Same result as `roundBf16` (src/numerics/bf16.ts). */
export function bf16 (x: number): number {
  if (x !== x) return NaN
  f[0] = x
  const bits = u[0]
  u[0] = (bits + 0x7fff + ((bits >>> 16) & 1)) & 0xffff0000
  return f[0]
}

/** The slow, shared rule, for checks of `bf16`. */
export const bf16Reference = roundBf16

/** Every element rounded to bf16 (in place). */
export function bf16Array (v: Float32Array): Float32Array {
  for (let i = 0; i < v.length; i++) v[i] = bf16(v[i])
  return v
}
