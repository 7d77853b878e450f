// The accumulation orders of the kernel dot products, written out with Math.fround, and their FMA
// forms. native/src/kernel_order.h and dot_tile.h implement the same steps; docs/kernels.md draws them.
import { fmaF32 } from './fma.ts'

/** Number of partial sums (lanes) a dot product keeps: one AVX2 register of float32. */
export const KERNEL_LANES = 8

const fround = Math.fround

/**
 * sum_i x[xOff + i] * w[wOff + i] for i < k, in the kernel order:
 * 1. lane l (0..7), starting at +0, adds fround(x*w) for i = l, l+8, ... below k8 = k - k % 8, in order;
 * 2. the lanes meet as ((l0 + l4) + (l2 + l6)) + ((l1 + l5) + (l3 + l7));
 * 3. the k % 8 leftover products are added one by one, in order.
 * Every product and every sum is rounded to float32. Inputs must already be float32 values.
 */
export function dotInKernelOrder (x: ArrayLike<number>, xOff: number, w: ArrayLike<number>, wOff: number, k: number): number {
  const k8 = k - (k % KERNEL_LANES)
  let l0 = 0; let l1 = 0; let l2 = 0; let l3 = 0; let l4 = 0; let l5 = 0; let l6 = 0; let l7 = 0
  for (let i = 0; i < k8; i += KERNEL_LANES) {
    const xi = xOff + i
    const wi = wOff + i
    l0 = fround(l0 + fround(x[xi] * w[wi]))
    l1 = fround(l1 + fround(x[xi + 1] * w[wi + 1]))
    l2 = fround(l2 + fround(x[xi + 2] * w[wi + 2]))
    l3 = fround(l3 + fround(x[xi + 3] * w[wi + 3]))
    l4 = fround(l4 + fround(x[xi + 4] * w[wi + 4]))
    l5 = fround(l5 + fround(x[xi + 5] * w[wi + 5]))
    l6 = fround(l6 + fround(x[xi + 6] * w[wi + 6]))
    l7 = fround(l7 + fround(x[xi + 7] * w[wi + 7]))
  }
  let s = fround(fround(fround(l0 + l4) + fround(l2 + l6)) + fround(fround(l1 + l5) + fround(l3 + l7)))
  for (let i = k8; i < k; i++) s = fround(s + fround(x[xOff + i] * w[wOff + i]))
  return s
}

/** Length of one block of the 'blocks128' order. */
export const ORDER_BLOCK = 128

/**
 * The same dot product in the 'blocks128' order (the prefill engine's): each block of 128 indices,
 * and the last, shorter block, is reduced with dotInKernelOrder to a partial; the partials are then
 * added one by one, in block order, to a sum that starts at +0. For k <= 128 this equals
 * dotInKernelOrder bit for bit.
 */
export function dotBlocks128 (x: ArrayLike<number>, xOff: number, w: ArrayLike<number>, wOff: number, k: number): number {
  let s = 0
  for (let b0 = 0; b0 < k; b0 += ORDER_BLOCK) {
    s = fround(s + dotInKernelOrder(x, xOff + b0, w, wOff + b0, Math.min(ORDER_BLOCK, k - b0)))
  }
  return s
}

/**
 * The same dot product in the 'lanes8-fma' order: the lanes8 order with every lane step and every
 * tail step one fused multiply-add, l = fma(x[i], w[i], l), rounded once (fmaF32); the lane tree
 * is the same seven rounded adds.
 */
export function dotLanes8Fma (x: ArrayLike<number>, xOff: number, w: ArrayLike<number>, wOff: number, k: number): number {
  const k8 = k - (k % KERNEL_LANES)
  let l0 = 0; let l1 = 0; let l2 = 0; let l3 = 0; let l4 = 0; let l5 = 0; let l6 = 0; let l7 = 0
  for (let i = 0; i < k8; i += KERNEL_LANES) {
    const xi = xOff + i
    const wi = wOff + i
    l0 = fmaF32(x[xi], w[wi], l0)
    l1 = fmaF32(x[xi + 1], w[wi + 1], l1)
    l2 = fmaF32(x[xi + 2], w[wi + 2], l2)
    l3 = fmaF32(x[xi + 3], w[wi + 3], l3)
    l4 = fmaF32(x[xi + 4], w[wi + 4], l4)
    l5 = fmaF32(x[xi + 5], w[wi + 5], l5)
    l6 = fmaF32(x[xi + 6], w[wi + 6], l6)
    l7 = fmaF32(x[xi + 7], w[wi + 7], l7)
  }
  let s = fround(fround(fround(l0 + l4) + fround(l2 + l6)) + fround(fround(l1 + l5) + fround(l3 + l7)))
  for (let i = k8; i < k; i++) s = fmaF32(x[xOff + i], w[wOff + i], s)
  return s
}

/**
 * The same dot product in the 'sequential-fma' order: one chain from s = +0 over i = 0 .. k-1 in
 * increasing order, s = fma(x[i], w[i], s), each step rounded once (fmaF32). No lanes, no tree:
 * the native kernel vectorizes across outputs instead (native/src/matmul_seq.h).
 */
export function dotSequentialFma (x: ArrayLike<number>, xOff: number, w: ArrayLike<number>, wOff: number, k: number): number {
  let s = 0
  for (let i = 0; i < k; i++) s = fmaF32(x[xOff + i], w[wOff + i], s)
  return s
}
