// The second accumulation order, 'blocks128' (the prefill engine's): every 128-long block in the
// lanes8 order, block partials added in order. Native equals the reference, k <= 128 changes
// nothing, a hand-built case shows the difference, and the error stays within its own bound.
import { describe, it, expect, afterAll } from 'vitest'
import fc from 'fast-check'
import { dotBlocks128, dotInKernelOrder, getKernelThreads, matmulBf16, matmulF32, reference, setKernelThreads } from '../../src/kernels/index.ts'
import { bf16Codes, bitReport, gamma, makeRng, mixedF32, uniformF32 } from './fixtures.ts'

const defaultThreads = getKernelThreads()
afterAll(() => setKernelThreads(defaultThreads))

const B128 = { order: 'blocks128' } as const

describe('matmul blocks128: native equals the reference bit for bit', () => {
  it('for k around the block edges (0, 1, 127, 128, 129, 255, 256, 257, 1000, 4096), f32 and bf16 weights, bf16 output', () => {
    const rng = makeRng(701)
    for (const k of [0, 1, 127, 128, 129, 255, 256, 257, 1000, 4096]) {
      const [m, n] = [3, 9]
      const x = uniformF32(m * k, rng, 2)
      const w = uniformF32(n * k, rng, 0.5)
      const wb = bf16Codes(n * k, rng, 0.5)
      for (const roundBf16 of [false, true]) {
        const o = { ...B128, roundBf16 }
        expect(bitReport(matmulF32(x, m, k, w, n, undefined, o), reference.matmulF32(x, m, k, w, n, undefined, o)), `f32 k=${k}`).toBe('identical')
        expect(bitReport(matmulBf16(x, m, k, wb, n, undefined, o), reference.matmulBf16(x, m, k, wb, n, undefined, o)), `bf16 k=${k}`).toBe('identical')
      }
    }
  })

  it('holds for random shapes and special values (property)', () => {
    fc.assert(fc.property(
      fc.integer({ min: 1, max: 4 }), fc.integer({ min: 1, max: 12 }), fc.integer({ min: 0, max: 600 }), fc.integer({ min: 0, max: 2 ** 31 - 1 }),
      (m, n, k, seed) => {
        const rng = makeRng(seed)
        const x = mixedF32(m * k, rng, 0.02)
        const w = mixedF32(n * k, rng, 0.02)
        return bitReport(matmulF32(x, m, k, w, n, undefined, B128), reference.matmulF32(x, m, k, w, n, undefined, B128)) === 'identical'
      }), { numRuns: 100 })
  })

  it('is batch and thread invariant', () => {
    const rng = makeRng(702)
    const [m, n, k] = [5, 70, 3000]
    const x = uniformF32(m * k, rng)
    const w = uniformF32(n * k, rng, 0.05)
    setKernelThreads(1)
    const one = matmulF32(x, m, k, w, n, undefined, B128)
    for (const threads of [2, 3, 7]) {
      setKernelThreads(threads)
      expect(bitReport(matmulF32(x, m, k, w, n, undefined, B128), one), `threads=${threads}`).toBe('identical')
    }
    for (let i = 0; i < m; i++) {
      expect(bitReport(matmulF32(x.subarray(i * k, (i + 1) * k), 1, k, w, n, undefined, B128), one.subarray(i * n, (i + 1) * n)), `row ${i}`).toBe('identical')
    }
  })
})

describe('matmul blocks128: how it relates to lanes8', () => {
  it('equals lanes8 bit for bit whenever k <= 128 (one block)', () => {
    const rng = makeRng(711)
    for (const k of [1, 8, 77, 128]) {
      const x = mixedF32(4 * k, rng, 0.05)
      const w = mixedF32(6 * k, rng, 0.05)
      expect(bitReport(matmulF32(x, 4, k, w, 6, undefined, B128), matmulF32(x, 4, k, w, 6)), `k=${k}`).toBe('identical')
    }
  })

  it('gives 2^24 + 2 where lanes8 gives 2^24 (products 2^24 at 0, 1 at 128 and 136)', () => {
    // lanes8: lane 0 holds 2^24, then + 1 (ties to even: 2^24), then + 1 again: 2^24.
    // blocks128: block 0 sums to 2^24, block 1's lane 0 to 1 + 1 = 2, and 2^24 + 2 is exact.
    const k = 256
    const x = new Float32Array(k)
    x[0] = 2 ** 24
    x[128] = 1
    x[136] = 1
    const w = new Float32Array(k).fill(1)
    expect(matmulF32(x, 1, k, w, 1)[0]).toBe(2 ** 24)
    expect(matmulF32(x, 1, k, w, 1, undefined, B128)[0]).toBe(2 ** 24 + 2)
    expect(dotInKernelOrder(x, 0, w, 0, k)).toBe(2 ** 24)
    expect(dotBlocks128(x, 0, w, 0, k)).toBe(2 ** 24 + 2)
  })

  it('differs from lanes8 on ordinary random data for k > 128', () => {
    const rng = makeRng(712)
    const k = 1024
    const x = uniformF32(8 * k, rng)
    const w = uniformF32(8 * k, rng)
    expect(bitReport(matmulF32(x, 8, k, w, 8, undefined, B128), matmulF32(x, 8, k, w, 8))).not.toBe('identical')
  })
})

describe('matmul blocks128: within its rounding-error bound of float64', () => {
  it('holds |y - exact| <= gamma_L sum |x w| with L = 1 + 16 + 3 + 7 + ceil(k / 128)', () => {
    // A product meets its own rounding, at most 16 lane adds, 3 tree adds and 7 tail adds inside its
    // block, then at most ceil(k/128) block-sum adds.
    const rng = makeRng(721)
    for (const k of [129, 1000, 4096]) {
      const x = uniformF32(2 * k, rng, 2)
      const w = uniformF32(3 * k, rng, 0.5)
      const y = matmulF32(x, 2, k, w, 3, undefined, B128)
      const L = 1 + 16 + 3 + 7 + Math.ceil(k / 128)
      for (let i = 0; i < 2; i++) {
        for (let j = 0; j < 3; j++) {
          let exact = 0
          let abs = 0
          for (let p = 0; p < k; p++) {
            exact += x[i * k + p] * w[j * k + p]
            abs += Math.abs(x[i * k + p] * w[j * k + p])
          }
          expect(Math.abs(y[i * 3 + j] - exact), `k=${k}`).toBeLessThanOrEqual(gamma(L) * abs)
        }
      }
    }
  })
})

describe('matmul: the order option is checked', () => {
  it('refuses an unknown order with a NumericsError naming it', () => {
    const F = (n: number) => new Float32Array(n)
    expect(() => matmulF32(F(4), 1, 4, F(4), 1, undefined, { order: 'pairwise' as never })).toThrow(/^matmulF32: opts.order must be 'lanes8', 'blocks128', 'lanes8-fma' or 'sequential-fma', got "pairwise"/)
    expect(() => reference.matmulBf16(F(4), 1, 4, new Uint16Array(4), 1, undefined, { order: 1 as never })).toThrow(/^reference.matmulBf16: opts.order must be 'lanes8', 'blocks128', 'lanes8-fma' or 'sequential-fma', got number/)
  })
})
