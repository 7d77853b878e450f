// The kernels' public API: native fast paths (native/) with their bit-exact TypeScript references.
import { NumericsError } from '../errors.ts'
import { loadNativeKernels } from './native.ts'
import * as ref from './reference.ts'
import type { MatmulOptions } from './reference.ts'
import { checkMatmul, checkRmsNorm } from './validate.ts'

export type { MatmulOptions } from './reference.ts'
export { dotInKernelOrder, KERNEL_LANES } from './order.ts'
export { CANONICAL_NAN_BITS } from './output.ts'
export { loadNativeKernels, DEFAULT_ADDON_PATH } from './native.ts'

/**
 * y[m, n] = x[m, k] · W[n, k]^T (W an nn.Linear weight, row-major [out, in], float32), native.
 * Bit-identical to reference.matmulF32 for every input, whatever m, n or the thread count.
 * Writes into `out` when given (length m * n, not overlapping x or w) and returns it.
 */
export function matmulF32 (x: Float32Array, m: number, k: number, w: Float32Array, n: number, out?: Float32Array, opts?: MatmulOptions): Float32Array {
  const a = checkMatmul('matmulF32', x, m, k, w, n, out, opts, 'Float32Array')
  return loadNativeKernels().matmulF32(a.x, a.m, a.k, a.w, a.n, a.out, a.roundBf16)
}

/**
 * The same product with W as bf16 codes (Uint16Array), widened exactly to float32, native.
 * Bit-identical to reference.matmulBf16, and to matmulF32 on the widened weights.
 */
export function matmulBf16 (x: Float32Array, m: number, k: number, w: Uint16Array, n: number, out?: Float32Array, opts?: MatmulOptions): Float32Array {
  const a = checkMatmul('matmulBf16', x, m, k, w, n, out, opts, 'Uint16Array')
  return loadNativeKernels().matmulBf16(a.x, a.m, a.k, a.w, a.n, a.out, a.roundBf16)
}

/**
 * RMSNorm of each of `rows` rows of length d (float32 weight of length d), native.
 * Bit-identical to reference.rmsNorm. Writes into `out` when given (not overlapping x or weight).
 */
export function rmsNorm (x: Float32Array, rows: number, d: number, weight: Float32Array, eps: number, out?: Float32Array): Float32Array {
  const a = checkRmsNorm('rmsNorm', x, rows, d, weight, eps, out)
  return loadNativeKernels().rmsNorm(a.x, a.rows, a.d, a.weight, a.eps, a.out)
}

/** The Math.fround references: same signatures, same bits, no addon needed. */
export const reference = {
  matmulF32: ref.matmulF32,
  matmulBf16: ref.matmulBf16,
  rmsNorm: ref.rmsNorm,
}

/** Maximum thread count accepted by setKernelThreads. */
export const MAX_KERNEL_THREADS = 1024

/**
 * How many threads later native calls may use (1..1024; default: the machine's core count).
 * Threads split output columns (matmul) or rows (RMSNorm), never a sum, so results do not change.
 * Calls smaller than kernelParallelThreshold() multiply-adds always run on the calling thread.
 */
export function setKernelThreads (n: number): void {
  if (typeof n !== 'number' || !Number.isInteger(n) || n < 1 || n > MAX_KERNEL_THREADS) {
    throw new NumericsError(`setKernelThreads: n must be an integer from 1 to ${MAX_KERNEL_THREADS}, got ${String(n)}`)
  }
  loadNativeKernels().setThreads(n)
}

/** The thread count native calls currently may use. */
export function getKernelThreads (): number {
  return loadNativeKernels().getThreads()
}

/** The work size (m * n * k multiply-adds, or rows * d elements) from which native calls use threads. */
export function kernelParallelThreshold (): number {
  return loadNativeKernels().minParallelWork
}

/**
 * This machine's AVX2 float32 peak for the kernels' instruction mix (separate mul and add, no FMA),
 * in GFLOP/s, measured on `threads` threads for about `millis` ms.
 */
export function measurePeakGflops (threads: number, millis = 200): number {
  return loadNativeKernels().measurePeakGflops(threads, millis)
}

/** Streaming copy bandwidth (bytes read + written) in GB/s over `bytes` bytes, `repeats` times. */
export function measureStreamGbps (threads: number, bytes = 256 << 20, repeats = 4): number {
  return loadNativeKernels().measureStreamGbps(threads, bytes, repeats)
}
