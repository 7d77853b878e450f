// The lanes8 orders' lane-major tiles (native/src/matmul_lanes.h, docs/kernels.md "Lane-major
// tiles"): native equals the reference bit for bit across the row-tile edges (6 rows in the avx2 and
// portable variants, 12 in avx512), the strip edges (16 or 32 columns) and the k % 8 tail; rows split
// between threads when there are fewer strips than threads give the 1-thread bits; and the earlier
// kernels the benchmarks keep (setLegacyMatmul) give the same bits as the new ones.
import { afterAll, describe, expect, it } from 'vitest'
import { getKernelThreads, loadNativeKernels, matmulBf16, matmulF32, setKernelThreads } from '../../src/kernels/index.ts'
import type { AccumulationOrder } from '../../src/kernels/index.ts'
import { bitReport, bf16Codes, makeRng, mixedF32, uniformF32 } from './fixtures.ts'
import { expectNativeEqualsReferenceOnShapes } from './invariance.ts'

const defaultThreads = getKernelThreads()
const addon = loadNativeKernels()
afterAll(() => {
  setKernelThreads(defaultThreads)
  addon.setLegacyMatmul?.(false)
})

const ORDERS: AccumulationOrder[] = ['lanes8', 'lanes8-fma']

describe('lane-major tiles: native equals the reference', () => {
  // m: the 8-row threshold, 6- and 12-row tile edges and remainders; n: under, at and past 16- and
  // 32-column strips; k: no lane steps (k < 8), a bare tail, exact steps, a tail after many steps.
  const shapes: Array<[number, number, number]> = [
    [8, 0, 5], [8, 7, 16], [11, 8, 17], [12, 9, 31], [13, 64, 32], [18, 71, 33], [24, 15, 47], [25, 130, 64], [37, 131, 40],
  ]
  it.each(ORDERS)('%s: f32 and bf16 weights, with and without bf16 output', (order) => {
    const rng = makeRng(order === 'lanes8' ? 61 : 62)
    const compared = expectNativeEqualsReferenceOnShapes(order, shapes, rng, (size, r) => mixedF32(size, r, 0.02))
    expect(compared).toBeGreaterThan(20000)
  })
})

describe('lane-major tiles: rows split between threads', () => {
  it.each(ORDERS)('%s: one or two strips on 2, 3 and 7 threads give the 1-thread bits', (order) => {
    const rng = makeRng(63)
    // m * k * n passes the 2^20 multiply-adds under which a call stays on one thread.
    for (const [m, k, n] of [[97, 1100, 20], [61, 900, 40]] as const) {
      const x = uniformF32(m * k, rng)
      const wb = bf16Codes(n * k, rng, 0.05)
      setKernelThreads(1)
      const one = matmulBf16(x, m, k, wb, n, undefined, { order })
      for (const threads of [2, 3, 7]) {
        setKernelThreads(threads)
        expect(bitReport(matmulBf16(x, m, k, wb, n, undefined, { order }), one), `${m}x${k}x${n} threads=${threads}`).toBe('identical')
      }
      setKernelThreads(defaultThreads)
    }
  })
})

describe('the earlier kernels the benchmarks keep', () => {
  it.each(ORDERS)('%s: setLegacyMatmul(true) gives the lane-major bits', (order) => {
    expect(addon.setLegacyMatmul).toBeTypeOf('function')
    const rng = makeRng(64)
    for (const [m, k, n] of [[8, 64, 6], [33, 515, 203], [128, 1024, 96]] as const) {
      const x = mixedF32(m * k, rng, 0.01)
      const w = uniformF32(n * k, rng, 0.05)
      const wb = bf16Codes(n * k, rng, 0.05)
      const now = [matmulF32(x, m, k, w, n, undefined, { order }), matmulBf16(x, m, k, wb, n, undefined, { order })]
      addon.setLegacyMatmul!(true)
      try {
        const before = [matmulF32(x, m, k, w, n, undefined, { order }), matmulBf16(x, m, k, wb, n, undefined, { order })]
        expect(bitReport(now[0], before[0]), `f32 ${m}x${k}x${n}`).toBe('identical')
        expect(bitReport(now[1], before[1]), `bf16 ${m}x${k}x${n}`).toBe('identical')
      } finally {
        addon.setLegacyMatmul!(false)
      }
    }
  })
})
