// Native matmul == Math.fround reference, bit for bit, over odd shapes and random values.
import { describe, it, expect } from 'vitest'
import fc from 'fast-check'
import { matmulF32, matmulBf16, reference } from '../../src/kernels/index.ts'
import { bitReport, bf16Codes, makeRng, mixedF32, uniformF32, wideF32 } from './fixtures.ts'

const KS = [0, 1, 3, 7, 8, 9, 16, 31, 33, 257]
const MS = [1, 2, 5]
const NS = [1, 3, 17]

describe('matmulF32: native equals the reference on the shape grid', () => {
  it('matches for every m, n, k of the grid, with and without bf16 output rounding', () => {
    const rng = makeRng(1)
    let compared = 0
    for (const m of MS) {
      for (const n of NS) {
        for (const k of KS) {
          const x = wideF32(m * k, rng)
          const w = uniformF32(n * k, rng)
          for (const roundBf16 of [false, true]) {
            const got = matmulF32(x, m, k, w, n, undefined, { roundBf16 })
            const want = reference.matmulF32(x, m, k, w, n, undefined, { roundBf16 })
            expect(bitReport(got, want), `m=${m} n=${n} k=${k} bf16=${roundBf16}`).toBe('identical')
            compared += got.length
          }
        }
      }
    }
    expect(compared).toBeGreaterThan(1000)
  })
})

describe('matmulBf16: native equals the reference on the shape grid', () => {
  it('matches for every m, n, k of the grid, with and without bf16 output rounding', () => {
    const rng = makeRng(2)
    for (const m of MS) {
      for (const n of NS) {
        for (const k of KS) {
          const x = wideF32(m * k, rng)
          const w = bf16Codes(n * k, rng, 3)
          for (const roundBf16 of [false, true]) {
            const got = matmulBf16(x, m, k, w, n, undefined, { roundBf16 })
            const want = reference.matmulBf16(x, m, k, w, n, undefined, { roundBf16 })
            expect(bitReport(got, want), `m=${m} n=${n} k=${k} bf16=${roundBf16}`).toBe('identical')
          }
        }
      }
    }
  })
})

describe('matmul: native equals the reference at model-sized k (register tiles and L2 panels split)', () => {
  it('matches for m=3, n=41, k=4096 and k=2053 in both weight formats', () => {
    const rng = makeRng(3)
    for (const k of [4096, 2053]) {
      const m = 3
      const n = 41
      const x = uniformF32(m * k, rng, 2)
      const w = uniformF32(n * k, rng, 0.05)
      expect(bitReport(matmulF32(x, m, k, w, n), reference.matmulF32(x, m, k, w, n)), `f32 k=${k}`).toBe('identical')
      const wb = bf16Codes(n * k, rng, 0.05)
      expect(bitReport(matmulBf16(x, m, k, wb, n), reference.matmulBf16(x, m, k, wb, n)), `bf16 k=${k}`).toBe('identical')
    }
  })
})

describe('matmul: native equals the reference on random shapes and values (property)', () => {
  it('holds for random m, n, k, seeds and special-value rates', () => {
    fc.assert(fc.property(
      fc.integer({ min: 1, max: 6 }), fc.integer({ min: 1, max: 20 }), fc.integer({ min: 0, max: 80 }),
      fc.integer({ min: 0, max: 2 ** 31 - 1 }), fc.constantFrom(0, 0.05, 0.3), fc.boolean(),
      (m, n, k, seed, specialRate, roundBf16) => {
        const rng = makeRng(seed)
        const x = mixedF32(m * k, rng, specialRate)
        const w = mixedF32(n * k, rng, specialRate)
        const wb = bf16Codes(n * k, rng, 4)
        const opts = { roundBf16 }
        return bitReport(matmulF32(x, m, k, w, n, undefined, opts), reference.matmulF32(x, m, k, w, n, undefined, opts)) === 'identical' &&
          bitReport(matmulBf16(x, m, k, wb, n, undefined, opts), reference.matmulBf16(x, m, k, wb, n, undefined, opts)) === 'identical'
      }), { numRuns: 300 })
  })
})

describe('matmul: a caller-supplied output buffer', () => {
  it('is written in place and returned, with every stale value overwritten', () => {
    const rng = makeRng(4)
    const x = uniformF32(2 * 9, rng)
    const w = uniformF32(3 * 9, rng)
    const out = new Float32Array(6).fill(NaN)
    const returned = matmulF32(x, 2, 9, w, 3, out)
    expect(returned).toBe(out)
    expect(bitReport(out, reference.matmulF32(x, 2, 9, w, 3))).toBe('identical')
  })
})
