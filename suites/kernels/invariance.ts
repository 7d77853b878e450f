// The batch and thread invariance check the matmul orders share: every row of an m=33 call equals
// the one-row call (which takes other tiles), and 2, 3 and 7 threads give the 1-thread bits.
import { expect } from 'vitest'
import { getKernelThreads, matmulBf16, matmulF32, reference, setKernelThreads } from '../../src/kernels/index.ts'
import type { AccumulationOrder } from '../../src/kernels/index.ts'
import { bitReport, bf16Codes, makeRng, uniformF32, wideF32 } from './fixtures.ts'

export function expectBatchAndThreadInvariance (order: AccumulationOrder, seed: number): void {
  const before = getKernelThreads()
  const rng = makeRng(seed)
  const m = 33
  const k = 1100
  const n = 203
  const x = uniformF32(m * k, rng)
  const w = uniformF32(n * k, rng, 0.05)
  const wb = bf16Codes(n * k, rng, 0.05)
  try {
    setKernelThreads(1)
    const one = matmulF32(x, m, k, w, n, undefined, { order })
    const oneB = matmulBf16(x, m, k, wb, n, undefined, { order })
    for (let i = 0; i < m; i++) {
      const row = x.subarray(i * k, (i + 1) * k)
      expect(bitReport(matmulF32(row, 1, k, w, n, undefined, { order }), one.subarray(i * n, (i + 1) * n)), `f32 row ${i}`).toBe('identical')
      expect(bitReport(matmulBf16(row, 1, k, wb, n, undefined, { order }), oneB.subarray(i * n, (i + 1) * n)), `bf16 row ${i}`).toBe('identical')
    }
    for (const threads of [2, 3, 7]) {
      setKernelThreads(threads)
      expect(bitReport(matmulF32(x, m, k, w, n, undefined, { order }), one), `f32 threads=${threads}`).toBe('identical')
      expect(bitReport(matmulBf16(x, m, k, wb, n, undefined, { order }), oneB), `bf16 threads=${threads}`).toBe('identical')
    }
  }
  finally {
    setKernelThreads(before)
  }
}

/**
 * Native against the reference, every bit, on each [m, k, n] of `shapes` for one order: f32 weights from
 * `f32Weights`, bf16 weights, each with and without bf16 output. Returns the outputs compared.
 */
export function expectNativeEqualsReferenceOnShapes (order: AccumulationOrder, shapes: ReadonlyArray<[number, number, number]>, rng: () => number, f32Weights: (n: number, rng: () => number) => Float32Array): number {
  let compared = 0
  for (const [m, k, n] of shapes) {
    const x = wideF32(m * k, rng)
    const w = f32Weights(n * k, rng)
    const wb = bf16Codes(n * k, rng, 0.5)
    for (const roundBf16 of [false, true]) {
      const opts = { order, roundBf16 }
      expect(bitReport(matmulF32(x, m, k, w, n, undefined, opts), reference.matmulF32(x, m, k, w, n, undefined, opts)), `f32 ${m}x${k}x${n} ${roundBf16}`).toBe('identical')
      expect(bitReport(matmulBf16(x, m, k, wb, n, undefined, opts), reference.matmulBf16(x, m, k, wb, n, undefined, opts)), `bf16 ${m}x${k}x${n} ${roundBf16}`).toBe('identical')
      compared += 2 * m * n
    }
  }
  return compared
}
