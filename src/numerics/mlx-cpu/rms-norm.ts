// mx.fast.rms_norm / nn.RMSNorm on MLX's CPU: the fused op does not exist there, so its fallback
// graph of ordinary ops runs (fast.cpp:90-120) and every intermediate is rounded to its dtype.
import { MLX_CPU, rounder, type RoundingPoints } from './rounding-points.ts'

const fround = Math.fround

/**
 * One row of D bf16 values (x[xo .. xo+D)) normalised into out[oo ..): x32 = f32(x);
 * ss = sequential f32 sum of f32(x²); mean = f32(ss · f32(1/D)); r = f32(1 / f32(sqrt(f32(mean + f32(eps)))));
 * y = bf16(x·r); with a weight, out = bf16(y · w) (both bf16).
 */
export function mlxRmsNormRow (x: ArrayLike<number>, xo: number, d: number, weight: ArrayLike<number> | null,
  eps: number, out: Float32Array, oo: number, points: RoundingPoints = MLX_CPU): void {
  const scaled = rounder(points.rmsNorm.scaled)
  const weighted = rounder(points.rmsNorm.weighted)
  let ss = 0
  for (let i = 0; i < d; i++) ss = fround(ss + fround(x[xo + i] * x[xo + i]))
  // mean() multiplies by the reciprocal of the count (ops.cpp:2335), it does not divide.
  const mean = fround(ss * fround(1 / d))
  // rsqrt is Sqrt with recip: 1/sqrt(x), two roundings (base_simd.h:70).
  const r = fround(1 / fround(Math.sqrt(fround(mean + fround(eps)))))
  for (let i = 0; i < d; i++) {
    const y = scaled(x[xo + i] * r)
    out[oo + i] = weight === null ? y : weighted(y * weight[i])
  }
}

/** Every row of a [rows, d] bf16 matrix, into a new array. */
export function mlxRmsNormRows (x: Float32Array, d: number, weight: ArrayLike<number> | null, eps: number, points: RoundingPoints = MLX_CPU): Float32Array {
  const out = new Float32Array(x.length)
  for (let o = 0; o < x.length; o += d) mlxRmsNormRow(x, o, d, weight, eps, out, o, points)
  return out
}
