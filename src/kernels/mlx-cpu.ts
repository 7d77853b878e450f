// The native versions of the two quantized matmuls (native/src/mlx_cpu.cc, mlx_cpu_isa.cc) and of
// the Compressor's pooling (mlx_cpu_pool.cc), bit for bit the TypeScript references in
// src/numerics/mlx-cpu/quantized-matmul.ts and pooling.ts at any thread count and on every ISA
// variant (suites/mlx/native-kernels.test.ts): each output is one sequential chain, and a thread
// or a vector lane computes whole outputs.
import { PdBridgeError } from '../errors.ts'
import { loadNativeKernels } from './native.ts'
import { affineDequantized, MLX_E4M3_VALUES, mxScale, type AffineWeight, type Mxfp8Weight } from '../numerics/mlx-cpu/quantized-matmul.ts'
import { MLX_CPU, type RoundingPoints } from '../numerics/mlx-cpu/rounding-points.ts'
import type { KernelIsa } from './native.ts'

interface MlxNativeKernels {
  mlxScanWeights: (wt: Float32Array, st?: Float32Array) => Int32Array
  mlxMxfp8Matmul: (x: Float32Array, m: number, k: number, wt: Float32Array, st: Float32Array, n: number, scan: Int32Array, rounding: number, out: Float32Array) => Float32Array
  mlxAffineMatmul: (x: Float32Array, m: number, k: number, wt: Float32Array, n: number, scan: Int32Array, rounding: number, out: Float32Array) => Float32Array
  mlxPool: (kv: Float32Array, gate: Float32Array, ape: Float32Array, windows: number, ratio: number, dim: number, overlap: boolean, rounding: number, out: Float32Array) => Float32Array
  mlxRopeRows: (x: Float32Array, rows: number, d: number, inv: Float32Array, first: number, rounding: number) => Float32Array
  /** The path the last matmul call took (native/src/mlx_cpu.h, mlx_cpu_last_path); absent in builds from before it. */
  mlxCpuLastPath?: () => string
  /** The ISA variant the matmuls run; with a name, choose it first (every variant gives the same bits). */
  mlxCpuIsa: (isa?: string) => string
}

let cached: MlxNativeKernels | undefined

function kernels (): MlxNativeKernels {
  if (cached !== undefined) return cached
  const k = loadNativeKernels() as unknown as Partial<MlxNativeKernels>
  if (typeof k.mlxScanWeights !== 'function' || typeof k.mlxMxfp8Matmul !== 'function' || typeof k.mlxAffineMatmul !== 'function' || typeof k.mlxPool !== 'function' || typeof k.mlxRopeRows !== 'function' || typeof k.mlxCpuIsa !== 'function') {
    throw new PdBridgeError('the native addon has no mlx-cpu kernels, or none that take a weight scan (a build from before them): run `npm run build:native`')
  }
  cached = k as MlxNativeKernels
  return cached
}

/** The quantizedMatmul rounding points as the kernels' bit mask: product 1, sum 2, scaled 4 (set = bf16). */
export function quantizedRoundingMask (points: RoundingPoints): number {
  const q = points.quantizedMatmul
  return (q.product === 'bf16' ? 1 : 0) | (q.sum === 'bf16' ? 2 : 0) | (q.scaled === 'bf16' ? 4 : 0)
}

/** Columns per strip of a prepared weight: the native kernels' unit width (native/src/mlx_cpu_isa.h, kMlxUnitColumns). */
export const MLX_STRIP_COLUMNS = 64

/**
 * A prepared weight's one scan (native/src/mlx_cpu.h, MlxWeightScan), made when it is prepared and
 * passed with every call, so that a call scans only its x: [1 when no value is a NaN whose bf16
 * rounding could carry, else 0; log2 of the weights' smallest nonzero magnitude; the scales' (1000
 * for none)]. It picks the call's path (mlxCpuLastMatmulPath), never its bits. The prepared arrays
 * must not change after it.
 */
export type MlxWeightScan = Int32Array
/** An mxfp8 weight as the native kernel reads it: decoded values and scales, in column strips (stripMajor), and their scan. */
export interface PreparedMxfp8 { readonly wt: Float32Array, readonly st: Float32Array, readonly n: number, readonly k: number, readonly scan: MlxWeightScan }
/** An affine weight dequantized (in its rounding points) and laid in column strips (stripMajor), and its scan. */
export interface PreparedAffine { readonly wt: Float32Array, readonly n: number, readonly k: number, readonly scan: MlxWeightScan }

/**
 * An [n, k] array in strips of MLX_STRIP_COLUMNS columns: strip s (columns 64s … 64s + w − 1, w = 64
 * but for the last) at offset 64s·k holds [k, w], so the kernels read each strip's rows contiguously.
 * Formed once per weight.
 */
export function stripMajor (v: ArrayLike<number>, n: number, k: number): Float32Array {
  const t = new Float32Array(n * k)
  for (let j0 = 0; j0 < n; j0 += MLX_STRIP_COLUMNS) {
    const w = Math.min(MLX_STRIP_COLUMNS, n - j0)
    for (let j = 0; j < w; j++) for (let i = 0; i < k; i++) t[j0 * k + i * w + j] = v[(j0 + j) * k + i]
  }
  return t
}

/**
 * A prepared mxfp8 weight from arrays already in strips (wt [k, n], st [k/32, n]), scanned once
 * here. prepareMxfp8 forms them from a weight's codes; a test forms them by hand to hold values
 * (a NaN of any payload) that the codes cannot give.
 */
export function mxfp8FromStrips (wt: Float32Array, st: Float32Array, n: number, k: number): PreparedMxfp8 {
  if (!Number.isSafeInteger(n) || n < 0 || !Number.isSafeInteger(k) || k < 0 || k % 32 !== 0) throw new PdBridgeError(`mxfp8 matmul: a weight of ${n} x ${k} is not one (k a multiple of the group, 32)`)
  if (wt.length !== n * k || st.length !== n * (k / 32)) throw new PdBridgeError(`mxfp8 matmul: the prepared weight holds ${wt.length} values and ${st.length} scales, not ${n} x ${k} and ${n} x ${k / 32}`)
  return { wt, st, n, k, scan: kernels().mlxScanWeights(wt, st) }
}

/** A prepared affine weight from a dequantized array already in strips (wt [k, n]), scanned once here. */
export function affineFromStrips (wt: Float32Array, n: number, k: number): PreparedAffine {
  if (!Number.isSafeInteger(n) || n < 0 || !Number.isSafeInteger(k) || k < 0) throw new PdBridgeError(`affine matmul: a weight of ${n} x ${k} is not one`)
  if (wt.length !== n * k) throw new PdBridgeError(`affine matmul: the prepared weight holds ${wt.length} values, not ${n} x ${k}`)
  return { wt, n, k, scan: kernels().mlxScanWeights(wt) }
}

/** Decode an mxfp8 weight as the reference does (MLX's e4m3 values, 2^(s-127) scales), in strips, and scan it once. */
export function prepareMxfp8 (w: Mxfp8Weight): PreparedMxfp8 {
  const { n, k } = w
  const groups = k / 32
  const values = new Float32Array(n * k)
  for (let i = 0; i < n * k; i++) values[i] = MLX_E4M3_VALUES[w.codes[i]]
  const scales = Float32Array.from(w.scales, mxScale)
  return mxfp8FromStrips(stripMajor(values, n, k), stripMajor(scales, n, groups), n, k)
}

/** Dequantize an affine weight (affineDequantized, in `points`), lay it in strips and scan it once. */
export function prepareAffine (w: AffineWeight, points: RoundingPoints = MLX_CPU, dequantized = affineDequantized(w, points)): PreparedAffine {
  if (dequantized.length !== w.n * w.k) throw new PdBridgeError(`affine matmul: the dequantized weight holds ${dequantized.length} values, not ${w.n} x ${w.k}`)
  return affineFromStrips(stripMajor(dequantized, w.n, w.k), w.n, w.k)
}

function checkX (what: string, x: Float32Array, m: number, k: number): Float32Array {
  if (!Number.isSafeInteger(m) || m < 0 || x.length < m * k) throw new PdBridgeError(`${what}: x holds ${x.length} values, fewer than ${m} x ${k}`)
  return x.length === m * k ? x : x.subarray(0, m * k)
}

/** mxfp8Matmul (quantized-matmul.ts) in native code over a prepared weight: x [m, k] bf16 values; returns [m, n]. */
export function mxfp8MatmulNative (x: Float32Array, m: number, w: PreparedMxfp8, points: RoundingPoints = MLX_CPU): Float32Array {
  const xs = checkX('mxfp8 matmul', x, m, w.k)
  const out = new Float32Array(m * w.n)
  if (out.length === 0) return out
  return kernels().mlxMxfp8Matmul(xs, m, w.k, w.wt, w.st, w.n, w.scan, quantizedRoundingMask(points), out)
}

/** affineMatmul (quantized-matmul.ts) in native code over a prepared weight. */
export function affineMatmulNative (x: Float32Array, m: number, w: PreparedAffine, points: RoundingPoints = MLX_CPU): Float32Array {
  const xs = checkX('affine matmul', x, m, w.k)
  const out = new Float32Array(m * w.n)
  if (out.length === 0) return out
  // The affine kernel has no scaled group sum: only the product and sum bits apply.
  return kernels().mlxAffineMatmul(xs, m, w.k, w.wt, w.n, w.scan, quantizedRoundingMask(points) & 3, out)
}

/** The pooling rounding points as mlxPool's bit mask: gate + ape 1 (overlapGate or simpleGate), weights 2, product 4, sum 8. */
export function poolRoundingMask (points: RoundingPoints, overlap: boolean): number {
  const p = points.pooling
  const gate = overlap ? p.overlapGate : p.simpleGate
  return (gate === 'bf16' ? 1 : 0) | (p.weights === 'bf16' ? 2 : 0) | (p.product === 'bf16' ? 4 : 0) | (p.sum === 'bf16' ? 8 : 0)
}

/**
 * overlapCompress (ratio 4, `overlap`) or simpleCompress (pooling.ts) in native code: kv, gate
 * [windows·ratio, width] (width 2·dim with overlap, else dim), ape [ratio, width]; returns [windows, dim].
 */
export function mlxPoolNative (kv: Float32Array, gate: Float32Array, ape: Float32Array, windows: number, ratio: number, dim: number,
  overlap: boolean, points: RoundingPoints = MLX_CPU): Float32Array {
  const width = overlap ? 2 * dim : dim
  const rows = windows * ratio
  const what = overlap ? 'overlap pooling' : 'simple pooling'
  if (!Number.isSafeInteger(rows) || windows < 0 || ratio < 1 || !Number.isSafeInteger(dim) || dim < 1) throw new PdBridgeError(`${what}: ${windows} windows of ratio ${ratio}, dim ${dim} is not a pooling`)
  if (kv.length < rows * width || gate.length < rows * width) throw new PdBridgeError(`${what}: kv and gate hold ${kv.length} and ${gate.length} values, fewer than ${rows} x ${width}`)
  if (ape.length !== ratio * width) throw new PdBridgeError(`${what}: ape holds ${ape.length} values, not ${ratio} x ${width}`)
  const out = new Float32Array(windows * dim)
  if (out.length === 0) return out
  return kernels().mlxPool(kv.subarray(0, rows * width), gate.subarray(0, rows * width), ape, windows, ratio, dim, overlap, poolRoundingMask(points, overlap), out)
}

/** The rope rounding points as mlxRopeRows' bit mask: tables 1, product 2, result 4 (set = bf16). */
export function ropeRoundingMask (points: RoundingPoints): number {
  const p = points.rope
  return (p.tables === 'bf16' ? 1 : 0) | (p.product === 'bf16' ? 2 : 0) | (p.result === 'bf16' ? 4 : 0)
}

/**
 * mlxRopeRow (rope.ts) over `rows` rows of x [rows, d] in place, row r at position first + r; inv
 * the rope's inverse frequencies (at most d/2). An angle past 2^23 is refused before any row changes.
 */
export function mlxRopeRowsNative (x: Float32Array, rows: number, d: number, inv: Float32Array, first: number, points: RoundingPoints = MLX_CPU): Float32Array {
  if (!Number.isSafeInteger(rows) || rows < 0 || !Number.isSafeInteger(d) || x.length < rows * d) throw new PdBridgeError(`mlx-cpu rope: x holds ${x.length} values, fewer than ${rows} x ${d}`)
  if (!Number.isSafeInteger(first) || first < 0) throw new PdBridgeError(`mlx-cpu rope: the first position ${first} is not a non-negative integer`)
  if (rows === 0) return x
  kernels().mlxRopeRows(x.subarray(0, rows * d), rows, d, inv, first, ropeRoundingMask(points))
  return x
}

/**
 * The path the last mxfp8/affine matmul call took (native/src/mlx_cpu_isa.h): `checked` (an
 * operand, x or the weight by its scan, holds a NaN whose bf16 rounding could carry into the sign), `unchecked` (no
 * per-rounding NaN check) or `avx512-bf16` (vcvtne2ps2bf16 roundings: every rounding point bf16, an
 * AVX512_BF16 CPU, and operand magnitudes that rule out a denormal product or sum). The bits are
 * the same on every path; the tests use this to show which of their inputs take which.
 */
export type MlxMatmulPath = 'checked' | 'unchecked' | 'avx512-bf16'
export function mlxCpuLastMatmulPath (): MlxMatmulPath {
  const last = kernels().mlxCpuLastPath
  if (last === undefined) throw new PdBridgeError('the native addon has no mlxCpuLastPath (a build from before the matmul paths): run `npm run build:native`')
  return last() as MlxMatmulPath
}

/** The ISA variant the mlx-cpu kernels run (the addon's unless chosen); with `isa`, choose it first. */
export function mlxCpuKernelIsa (isa?: KernelIsa): KernelIsa {
  return kernels().mlxCpuIsa(isa) as KernelIsa
}
