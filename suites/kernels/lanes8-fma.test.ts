// The lanes8-fma order (docs/kernels.md, "The FMA order") and the 512-bit tiles (matmul_zmm.h, the
// avx512 variant's matmul for lanes8 and lanes8-fma at m >= 8, k >= 64): native equals the
// Math.fround/fmaF32 reference bit for bit on shapes that cross every tile edge; a row of a batch
// equals the one-row call (which runs the 8-lane tiles), whatever the thread count; and the FMA order
// meets its own error bound, one rounding per product fewer than lanes8.
import fc from 'fast-check'
import { afterAll, describe, expect, it } from 'vitest'
import { getKernelThreads, matmulBf16, matmulF32, reference, setKernelThreads } from '../../src/kernels/index.ts'
import type { AccumulationOrder } from '../../src/kernels/index.ts'
import { bf16ToF32 } from '../../src/numerics/bf16.ts'
import { bitReport, bf16Codes, makeRng, mixedF32, uniformF32, wideF32 } from './fixtures.ts'
import { expectNativeEqualsReferenceOnShapes } from './invariance.ts'
import { expectBatchAndThreadInvariance } from './invariance.ts'

const defaultThreads = getKernelThreads()
afterAll(() => setKernelThreads(defaultThreads))

const ORDERS: AccumulationOrder[] = ['lanes8', 'lanes8-fma']

describe('matmul at m >= 8: native equals the reference across tile edges', () => {
  // m: odd (a padded pair), 8 (one tile), 9, 31 (row-pair remainders); k: the 64 threshold, a k % 8
  // tail, several 512-long copies; n: under one 6-row tile, off the 8-column grain, several panels.
  const shapes: Array<[number, number, number]> = [
    [8, 64, 6], [9, 65, 7], [31, 200, 13], [16, 513, 97], [11, 1031, 50], [40, 96, 200], [8, 63, 5], [64, 1100, 9],
  ]
  it.each(ORDERS)('%s: f32 and bf16 weights, with and without bf16 output', (order) => {
    const rng = makeRng(order === 'lanes8' ? 51 : 52)
    const compared = expectNativeEqualsReferenceOnShapes(order, shapes, rng, (size, r) => uniformF32(size, r, 0.5))
    expect(compared).toBeGreaterThan(40000)
  })

  it.each(ORDERS)('%s: random shapes, seeds and special values (property)', (order) => {
    fc.assert(fc.property(
      fc.integer({ min: 8, max: 24 }), fc.integer({ min: 1, max: 30 }), fc.integer({ min: 60, max: 700 }),
      fc.integer({ min: 0, max: 2 ** 31 - 1 }), fc.constantFrom(0, 0.02, 0.2), fc.boolean(),
      (m, n, k, seed, specialRate, roundBf16) => {
        const rng = makeRng(seed)
        const x = mixedF32(m * k, rng, specialRate)
        const w = mixedF32(n * k, rng, specialRate)
        const wb = bf16Codes(n * k, rng, 4)
        const opts = { order, roundBf16 }
        return bitReport(matmulF32(x, m, k, w, n, undefined, opts), reference.matmulF32(x, m, k, w, n, undefined, opts)) === 'identical' &&
          bitReport(matmulBf16(x, m, k, wb, n, undefined, opts), reference.matmulBf16(x, m, k, wb, n, undefined, opts)) === 'identical'
      }), { numRuns: 60 })
  })
})

describe('matmul at m >= 8: batch and thread invariance', () => {
  it.each(ORDERS)('%s: every row of an m=33 call equals the one-row call, on 1, 2, 3 and 7 threads', (order) => {
    expectBatchAndThreadInvariance(order, 53)
  })
})

describe('lanes8-fma: what changes and what does not', () => {
  it('differs from lanes8 (the products are no longer rounded) yet stays within its error bound', () => {
    // Each product meets at most L = floor(k/8) + 3 + k % 8 roundings (no rounding of its own):
    // |y - exact| <= gamma_L * sum |x_i w_i|.
    const rng = makeRng(54)
    const m = 12
    const k = 999
    const n = 40
    const x = wideF32(m * k, rng)
    const wb = bf16Codes(n * k, rng, 1)
    const fused = matmulBf16(x, m, k, wb, n, undefined, { order: 'lanes8-fma' })
    const plain = matmulBf16(x, m, k, wb, n, undefined, { order: 'lanes8' })
    let differ = 0
    const u = 2 ** -24
    const L = Math.floor(k / 8) + 3 + (k % 8)
    const gamma = (L * u) / (1 - L * u)
    let worst = 0
    for (let i = 0; i < m; i++) {
      for (let j = 0; j < n; j++) {
        let exact = 0
        let abs = 0
        for (let p = 0; p < k; p++) {
          const t = x[i * k + p] * bf16ToF32(wb[j * k + p])
          exact += t
          abs += Math.abs(t)
        }
        const y = fused[i * n + j]
        if (y !== plain[i * n + j]) differ++
        const err = Math.abs(y - exact)
        worst = Math.max(worst, err / (gamma * abs))
        expect(err, `y[${i}, ${j}]`).toBeLessThanOrEqual(gamma * abs * (1 + 1e-6) + 1e-300)
      }
    }
    // f32 x times bf16 w is not exact in float32, so most outputs move.
    expect(differ).toBeGreaterThan((m * n) / 2)
    console.log(`lanes8-fma: ${differ}/${m * n} outputs differ from lanes8; worst error ${worst.toFixed(4)} of the gamma_L bound`)
  })

  it('equals lanes8 when every product is exact in float32 (bf16 x times bf16 w)', () => {
    // A product of two bf16 values has at most 16 significant bits, so fma(x, w, l) = l + x * w with
    // one rounding either way: the orders can differ only through rounding the products.
    const rng = makeRng(55)
    const m = 16
    const k = 777
    const n = 30
    const x = Float32Array.from(bf16Codes(m * k, rng, 2), bf16ToF32)
    const wb = bf16Codes(n * k, rng, 1)
    expect(bitReport(matmulBf16(x, m, k, wb, n, undefined, { order: 'lanes8-fma' }), matmulBf16(x, m, k, wb, n, undefined, { order: 'lanes8' }))).toBe('identical')
  })
})
