// quantized_matmul(x, w, transpose=True) on MLX's CPU with bf16 x (backend/cpu/quantized.cpp).
// simd::max_size<bf16> is 1, so neither SIMD kernel is taken and both plain loops run with T = bf16:
// there is no float accumulator at all, every product and every partial sum is rounded to bf16.
// A plain reference loop; a native kernel would be wanted for real model widths.
import { E4M3_VALUES } from '../e4m3.ts'
import { MLX_CPU, rounder, type RoundingPoints } from './rounding-points.ts'

/**
 * MLX's e4m3 decode (unary_ops.h:154, FromFP8): fp16 bits (c & 127) << 7 times 256. It equals
 * e4m3fn everywhere except the NaN codes: 0x7F decodes to 480 and 0xFF to −480.
 */
export const MLX_E4M3_VALUES: Float32Array = (() => {
  const t = Float32Array.from(E4M3_VALUES)
  t[0x7f] = 480
  t[0xff] = -480
  return t
})()

/**
 * The bf16 scale of an e8m0 byte, group 32 (quantized.cpp:49-61): the bf16 bits s << 7, i.e.
 * 2^(s−127); s = 0 is 2^-127 (bits 0x40), not 0, and s = 255 is +inf.
 */
export function mxScale (s: number): number {
  return s === 255 ? Infinity : 2 ** (s - 127)
}

/** mxfp8 weights as the kernel reads them: one e4m3 code per byte in k order, one scale per 32. */
export interface Mxfp8Weight {
  /** [n, k] codes (the uint32 words' little-endian bytes). */
  codes: Uint8Array
  /** [n, k/32] e8m0 bytes. */
  scales: Uint8Array
  n: number
  k: number
}

/** affine weights: one uint8 code per byte in k order, bf16 scale and bias per group. */
export interface AffineWeight {
  codes: Uint8Array
  /** [n, k/groupSize] bf16 values. */
  scales: Float32Array
  biases: Float32Array
  n: number
  k: number
  groupSize: number
}

/**
 * fp_qmm_t (quantized.cpp:491-532), group 32: per output, per group in order,
 * gsum = bf16(gsum + bf16(x·w)) over the 32 k; sum = bf16(sum + bf16(scale·gsum)).
 * x: [m, k] bf16 values; returns [m, n] bf16 values.
 */
export function mxfp8Matmul (x: Float32Array, m: number, w: Mxfp8Weight, points: RoundingPoints = MLX_CPU): Float32Array {
  const { n, k, codes, scales } = w
  const product = rounder(points.quantizedMatmul.product)
  const add = rounder(points.quantizedMatmul.sum)
  const scaled = rounder(points.quantizedMatmul.scaled)
  const groups = k / 32
  const out = new Float32Array(m * n)
  for (let r = 0; r < m; r++) {
    const xo = r * k
    for (let j = 0; j < n; j++) {
      const wo = j * k
      let sum = 0
      for (let g = 0; g < groups; g++) {
        let gsum = 0
        for (let i = g * 32; i < g * 32 + 32; i++) gsum = add(gsum + product(x[xo + i] * MLX_E4M3_VALUES[codes[wo + i]]))
        sum = add(sum + scaled(mxScale(scales[j * groups + g]) * gsum))
      }
      // A NaN output is the positive quiet NaN: which NaN `a + b` of two NaNs gives depends on
      // operand order, which the JIT does not promise (the native kernels store the same).
      out[r * n + j] = sum === sum ? sum : NaN
    }
  }
  return out
}

/**
 * The affine weight as `_qmm_t` forms it before the product: bf16(bf16(scale·q) + bias), [n, k].
 * It does not depend on x, so it is formed once.
 */
export function affineDequantized (w: AffineWeight, points: RoundingPoints = MLX_CPU): Float32Array {
  const { n, k, groupSize, codes, scales, biases } = w
  const round = rounder(points.quantizedMatmul.dequantized)
  const groups = k / groupSize
  const out = new Float32Array(n * k)
  for (let j = 0; j < n; j++) {
    for (let i = 0; i < k; i++) {
      const g = j * groups + Math.floor(i / groupSize)
      out[j * k + i] = round(round(scales[g] * codes[j * k + i]) + biases[g])
    }
  }
  return out
}

/**
 * _qmm_t (quantized.cpp:153-206), affine: per output, sum = bf16(sum + bf16(x·w)) over every k in
 * order (one running bf16 sum, no group sums), w = bf16(bf16(scale·q) + bias).
 * x: [m, k] bf16 values; returns [m, n] bf16 values.
 */
export function affineMatmul (x: Float32Array, m: number, w: AffineWeight, points: RoundingPoints = MLX_CPU, dequantized = affineDequantized(w, points)): Float32Array {
  const { n, k } = w
  const product = rounder(points.quantizedMatmul.product)
  const add = rounder(points.quantizedMatmul.sum)
  const out = new Float32Array(m * n)
  for (let r = 0; r < m; r++) {
    const xo = r * k
    for (let j = 0; j < n; j++) {
      const wo = j * k
      let sum = 0
      for (let i = 0; i < k; i++) sum = add(sum + product(x[xo + i] * dequantized[wo + i]))
      // A NaN output is the positive quiet NaN: which NaN `a + b` of two NaNs gives depends on
      // operand order, which the JIT does not promise (the native kernels store the same).
      out[r * n + j] = sum === sum ? sum : NaN
    }
  }
  return out
}
