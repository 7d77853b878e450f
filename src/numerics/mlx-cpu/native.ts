// The native versions of the two quantized matmuls (native/src/mlx_cpu.cc), bit for bit the
// TypeScript references in quantized-matmul.ts at any thread count (suites/mlx/native-kernels.test.ts):
// each output is one sequential chain in k order and a thread computes whole outputs.
import { PdBridgeError } from '../../errors.ts'
import { loadNativeKernels } from '../../kernels/native.ts'
import { affineDequantized, MLX_E4M3_VALUES, type AffineWeight, type Mxfp8Weight } from './quantized-matmul.ts'
import { MLX_CPU, type RoundingPoints } from './rounding-points.ts'

interface MlxNativeKernels {
  mlxMxfp8Matmul: (x: Float32Array, m: number, k: number, codes: Uint8Array, scales: Uint8Array, n: number,
    e4m3: Float32Array, rounding: number, out: Float32Array) => Float32Array
  mlxAffineMatmul: (x: Float32Array, m: number, k: number, w: Float32Array, n: number, rounding: number, out: Float32Array) => Float32Array
}

let cached: MlxNativeKernels | undefined

function kernels (): MlxNativeKernels {
  if (cached !== undefined) return cached
  const k = loadNativeKernels() as unknown as Partial<MlxNativeKernels>
  if (typeof k.mlxMxfp8Matmul !== 'function' || typeof k.mlxAffineMatmul !== 'function') {
    throw new PdBridgeError('the native addon has no mlx-cpu kernels (a build from before them): run `npm run build:native`')
  }
  cached = k as MlxNativeKernels
  return cached
}

/** The quantizedMatmul rounding points as the kernels' bit mask: product 1, sum 2, scaled 4 (set = bf16). */
export function quantizedRoundingMask (points: RoundingPoints): number {
  const q = points.quantizedMatmul
  return (q.product === 'bf16' ? 1 : 0) | (q.sum === 'bf16' ? 2 : 0) | (q.scaled === 'bf16' ? 4 : 0)
}

function checkX (what: string, x: Float32Array, m: number, k: number): Float32Array {
  if (!Number.isSafeInteger(m) || m < 0 || x.length < m * k) throw new PdBridgeError(`${what}: x holds ${x.length} values, fewer than ${m} x ${k}`)
  return x.length === m * k ? x : x.subarray(0, m * k)
}

/** mxfp8Matmul (quantized-matmul.ts) in native code: x [m, k] bf16 values; returns [m, n]. */
export function mxfp8MatmulNative (x: Float32Array, m: number, w: Mxfp8Weight, points: RoundingPoints = MLX_CPU): Float32Array {
  const xs = checkX('mxfp8 matmul', x, m, w.k)
  const out = new Float32Array(m * w.n)
  if (out.length === 0) return out
  return kernels().mlxMxfp8Matmul(xs, m, w.k, w.codes, w.scales, w.n, MLX_E4M3_VALUES, quantizedRoundingMask(points), out)
}

/** affineMatmul (quantized-matmul.ts) in native code, over the weight dequantized once (affineDequantized). */
export function affineMatmulNative (x: Float32Array, m: number, w: AffineWeight, points: RoundingPoints = MLX_CPU,
  dequantized = affineDequantized(w, points)): Float32Array {
  const xs = checkX('affine matmul', x, m, w.k)
  if (dequantized.length !== w.n * w.k) throw new PdBridgeError(`affine matmul: the dequantized weight holds ${dequantized.length} values, not ${w.n} x ${w.k}`)
  const out = new Float32Array(m * w.n)
  if (out.length === 0) return out
  // The affine kernel has no scaled group sum: only the product and sum bits apply.
  return kernels().mlxAffineMatmul(xs, m, w.k, dequantized, w.n, quantizedRoundingMask(points) & 3, out)
}
