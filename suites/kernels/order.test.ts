// The accumulation order is pinned: known values only this order produces, and proof that the
// bit-exact tests can tell orders apart.
import { describe, it, expect } from 'vitest'
import { dotInKernelOrder, matmulF32, reference, rmsNorm } from '../../src/kernels/index.ts'
import { bitReport, makeRng, uniformF32, wideF32 } from './fixtures.ts'

const fround = Math.fround
const ones = (k: number) => new Float32Array(k).fill(1)

/** A plain sequential float32 dot product: a different order. */
function sequentialDot (x: Float32Array, w: Float32Array): number {
  let s = 0
  for (let i = 0; i < x.length; i++) s = fround(s + fround(x[i] * w[i]))
  return s
}

/** 8 lanes like the kernel but meeting in the adjacent-pairs tree ((l0+l1)+(l2+l3))+((l4+l5)+(l6+l7)). */
function adjacentTreeDot (x: Float32Array, w: Float32Array): number {
  const lanes = new Array<number>(8).fill(0)
  const k8 = x.length - (x.length % 8)
  for (let i = 0; i < k8; i++) lanes[i % 8] = fround(lanes[i % 8] + fround(x[i] * w[i]))
  const [l0, l1, l2, l3, l4, l5, l6, l7] = lanes
  let s = fround(fround(fround(l0 + l1) + fround(l2 + l3)) + fround(fround(l4 + l5) + fround(l6 + l7)))
  for (let i = k8; i < x.length; i++) s = fround(s + fround(x[i] * w[i]))
  return s
}

describe('kernel order: hand-computed values that only this order gives', () => {
  it('k = 9, products [2^24, 1 x 8]: lanes, tree and tail give 2^24 + 8; sequential gives 2^24', () => {
    // Tree: (2^24 + 1 -> 2^24) + (1 + 1) = 2^24 + 2; + ((1 + 1) + (1 + 1)) = 2^24 + 6;
    // tail: 2^24 + 6 + 1 = 2^24 + 7, a tie, to even: 2^24 + 8.
    const x = Float32Array.of(2 ** 24, 1, 1, 1, 1, 1, 1, 1, 1)
    expect(dotInKernelOrder(x, 0, ones(9), 0, 9)).toBe(2 ** 24 + 8)
    expect(matmulF32(x, 1, 9, ones(9), 1)[0]).toBe(2 ** 24 + 8)
    expect(sequentialDot(x, ones(9))).toBe(2 ** 24)
  })

  it('k = 8, products [2^24, 1, 0, 0, 0, 1, 0, 0]: the kernel tree gives 2^24 + 2; adjacent pairs give 2^24', () => {
    // Kernel: (l0 + l4) = 2^24, (l1 + l5) = 2, so 2^24 + 2. Adjacent: (l0 + l1) = 2^24 + 1 -> 2^24, then + 1 -> 2^24.
    const x = Float32Array.of(2 ** 24, 1, 0, 0, 0, 1, 0, 0)
    expect(dotInKernelOrder(x, 0, ones(8), 0, 8)).toBe(2 ** 24 + 2)
    expect(matmulF32(x, 1, 8, ones(8), 1)[0]).toBe(2 ** 24 + 2)
    expect(adjacentTreeDot(x, ones(8))).toBe(2 ** 24)
    expect(sequentialDot(x, ones(8))).toBe(2 ** 24)
  })

  it('k = 8, products [2^24, 1, 0, 1, 0, 0, 0, 0]: the second tree level pairs (l0+l4) with (l2+l6), giving 2^24 + 2', () => {
    // Kernel: (2^24 + 0) + (0 + 0) = 2^24 and (1 + 0) + (1 + 0) = 2, so 2^24 + 2. Pairing (l0+l4) with
    // (l1+l5) instead gives 2^24 + 1 -> 2^24 first, then + 1 -> 2^24.
    const x = Float32Array.of(2 ** 24, 1, 0, 1, 0, 0, 0, 0)
    expect(dotInKernelOrder(x, 0, ones(8), 0, 8)).toBe(2 ** 24 + 2)
    expect(matmulF32(x, 1, 8, ones(8), 1)[0]).toBe(2 ** 24 + 2)
    expect(adjacentTreeDot(x, ones(8))).toBe(2 ** 24)
  })
})

describe('kernel order: other orders give different bits on ordinary inputs', () => {
  it('the sequential sum and the adjacent-pairs tree each differ from the native kernel on some of 200 random dot products', () => {
    const rng = makeRng(41)
    let sequentialDiffers = 0
    let adjacentDiffers = 0
    for (let t = 0; t < 200; t++) {
      const k = 257
      const x = wideF32(k, rng)
      const w = uniformF32(k, rng)
      const native = matmulF32(x, 1, k, w, 1)[0]
      if (!Object.is(native, sequentialDot(x, w))) sequentialDiffers++
      if (!Object.is(native, adjacentTreeDot(x, w))) adjacentDiffers++
    }
    expect(sequentialDiffers).toBeGreaterThan(0)
    expect(adjacentDiffers).toBeGreaterThan(0)
  })
})

describe('rmsNorm order: the weight is applied after rounding x * r', () => {
  it('differs from x * (r * w) on some inputs, and the kernel follows (x * r) * w', () => {
    const rng = makeRng(42)
    const d = 64
    const rows = 50
    const x = uniformF32(rows * d, rng, 3)
    const weight = uniformF32(d, rng, 2)
    const y = rmsNorm(x, rows, d, weight, 1e-6)
    let differs = 0
    for (let r = 0; r < rows; r++) {
      const off = r * d
      const ss = dotInKernelOrder(x, off, x, off, d)
      const inv = fround(1 / fround(Math.sqrt(fround(fround(ss / d) + fround(1e-6)))))
      for (let i = 0; i < d; i++) {
        const kernelOrder = fround(fround(x[off + i] * inv) * weight[i])
        const otherOrder = fround(x[off + i] * fround(inv * weight[i]))
        expect(y[off + i]).toBe(kernelOrder)
        if (!Object.is(kernelOrder, otherOrder)) differs++
      }
    }
    expect(differs).toBeGreaterThan(0)
    expect(bitReport(reference.rmsNorm(x, rows, d, weight, 1e-6), y)).toBe('identical')
  })
})
