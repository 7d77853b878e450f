// The TypeScript references: every operation rounded to float32 with Math.fround, in exactly the
// order the native kernels use. They define the kernels' results; the native code must match bit for bit.
import { bf16ToF32 } from '../numerics/bf16.ts'
import { dotBlocks128, dotInKernelOrder, dotLanes8Fma, dotSequentialFma } from './order.ts'
import { bitsView, storeOutput } from './output.ts'
import { checkMatmul, checkRmsNorm } from './validate.ts'
import type { AccumulationOrder } from './validate.ts'

export type { AccumulationOrder } from './validate.ts'

const fround = Math.fround

/** Options of the matmul kernels. */
export interface MatmulOptions {
  /** Round every output element to the nearest bf16 value (RNE) after the dot product. */
  roundBf16?: boolean
  /**
   * The accumulation order of each dot product: 'lanes8' (default; dotInKernelOrder),
   * 'blocks128' (dotBlocks128: 128-long blocks in the lanes8 order, block sums added in order) or
   * 'lanes8-fma' (dotLanes8Fma: the lanes8 order with fused multiply-adds) or 'sequential-fma'
   * (dotSequentialFma: one fused multiply-add chain over k in order).
   */
  order?: AccumulationOrder
}

function dotFor (order: AccumulationOrder): typeof dotInKernelOrder {
  if (order === 'blocks128') return dotBlocks128
  if (order === 'sequential-fma') return dotSequentialFma
  return order === 'lanes8-fma' ? dotLanes8Fma : dotInKernelOrder
}

/**
 * Reference of y[m, n] = x[m, k] · W[n, k]^T with float32 weights: y[i, j] is the dot product
 * of x row i and W row j in opts.order, then optional bf16 rounding; NaN written canonical.
 */
export function matmulF32 (x: Float32Array, m: number, k: number, w: Float32Array, n: number, out?: Float32Array, opts?: MatmulOptions): Float32Array {
  const a = checkMatmul('reference.matmulF32', x, m, k, w, n, out, opts, 'Float32Array')
  const outBits = bitsView(a.out)
  const dot = dotFor(a.order)
  for (let i = 0; i < a.m; i++) {
    for (let j = 0; j < a.n; j++) {
      storeOutput(a.out, outBits, i * a.n + j, dot(a.x, i * a.k, a.w, j * a.k, a.k), a.roundBf16)
    }
  }
  return a.out
}

/**
 * Reference of the same product with W stored as bf16 codes: each code is widened exactly to
 * float32 (the code becomes the top 16 bits), then everything is as in matmulF32 (same opts.order).
 */
export function matmulBf16 (x: Float32Array, m: number, k: number, w: Uint16Array, n: number, out?: Float32Array, opts?: MatmulOptions): Float32Array {
  const a = checkMatmul('reference.matmulBf16', x, m, k, w, n, out, opts, 'Uint16Array')
  const outBits = bitsView(a.out)
  const dot = dotFor(a.order)
  const row = new Float32Array(a.k)
  for (let j = 0; j < a.n; j++) {
    for (let p = 0; p < a.k; p++) row[p] = bf16ToF32(a.w[j * a.k + p])
    for (let i = 0; i < a.m; i++) {
      storeOutput(a.out, outBits, i * a.n + j, dot(a.x, i * a.k, row, 0, a.k), a.roundBf16)
    }
  }
  return a.out
}

/**
 * Reference RMSNorm over `rows` rows of length d. Per row, all float32:
 * ss = dotInKernelOrder(row, row); mean = ss / d; r = 1 / sqrt(mean + eps);
 * y_i = (x_i * r) * weight_i. eps is first rounded to float32. NaN written canonical.
 */
export function rmsNorm (x: Float32Array, rows: number, d: number, weight: Float32Array, eps: number, out?: Float32Array): Float32Array {
  const a = checkRmsNorm('reference.rmsNorm', x, rows, d, weight, eps, out)
  const outBits = bitsView(a.out)
  const eps32 = fround(a.eps)
  const d32 = fround(a.d)
  for (let r = 0; r < a.rows; r++) {
    const off = r * a.d
    const ss = dotInKernelOrder(a.x, off, a.x, off, a.d)
    const mean = fround(ss / d32)
    const inv = fround(1 / fround(Math.sqrt(fround(mean + eps32))))
    for (let i = 0; i < a.d; i++) {
      storeOutput(a.out, outBits, off + i, fround(fround(a.x[off + i] * inv) * a.weight[i]), false)
    }
  }
  return a.out
}

/**
 * Reference of roundBf16Array: a[from, to) rounded to bf16 in place, on the bits (int32 arithmetic):
 * add 0x7fff plus the lowest kept bit (ties to even), drop the low half; a NaN keeps its sign and
 * becomes quiet, as f32ToBf16 does. Returns a.
 */
export function roundBf16InPlace (a: Float32Array, from = 0, to = a.length): Float32Array {
  const bits = new Int32Array(a.buffer, a.byteOffset, a.length)
  for (let i = from; i < to; i++) {
    const b = bits[i]
    bits[i] = (b & 0x7f800000) === 0x7f800000 && (b & 0x007fffff) !== 0
      ? (b & -0x80000000) | 0x7fc00000
      : ((b + 0x7fff + ((b >>> 16) & 1)) | 0) & -0x10000
  }
  return a
}
