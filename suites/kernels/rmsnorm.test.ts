// Native RMSNorm == Math.fround reference, bit for bit, including special values.
import { describe, it, expect } from 'vitest'
import fc from 'fast-check'
import { CANONICAL_NAN_BITS, reference, rmsNorm } from '../../src/kernels/index.ts'
import { bitReport, bitsOf, makeRng, mixedF32, uniformF32, wideF32 } from './fixtures.ts'

const f = (...v: number[]) => Float32Array.from(v)

function both (x: Float32Array, rows: number, d: number, weight: Float32Array, eps: number): [Float32Array, Float32Array] {
  return [rmsNorm(x, rows, d, weight, eps), reference.rmsNorm(x, rows, d, weight, eps)]
}

describe('rmsNorm: native equals the reference on the shape grid', () => {
  it('matches for rows 1, 2, 5 and d from 1 to 4096', () => {
    const rng = makeRng(51)
    for (const rows of [1, 2, 5]) {
      for (const d of [1, 3, 7, 8, 9, 31, 33, 257, 4096]) {
        const x = wideF32(rows * d, rng)
        const weight = uniformF32(d, rng, 2)
        for (const eps of [0, 1e-6, 1e-5]) {
          const [got, want] = both(x, rows, d, weight, eps)
          expect(bitReport(got, want), `rows=${rows} d=${d} eps=${eps}`).toBe('identical')
        }
      }
    }
  })

  it('matches on random shapes, values and special-value rates (property)', () => {
    fc.assert(fc.property(
      fc.integer({ min: 0, max: 5 }), fc.integer({ min: 1, max: 90 }), fc.integer({ min: 0, max: 2 ** 31 - 1 }),
      fc.constantFrom(0, 0.05, 0.3), fc.constantFrom(0, 1e-6, 0.5),
      (rows, d, seed, specialRate, eps) => {
        const rng = makeRng(seed)
        const x = mixedF32(rows * d, rng, specialRate)
        const weight = mixedF32(d, rng, specialRate)
        const [got, want] = both(x, rows, d, weight, eps)
        return bitReport(got, want) === 'identical'
      }), { numRuns: 300 })
  })
})

describe('rmsNorm: exact values', () => {
  it('normalises [2, 2, 2, 2] to exactly 1 (ss 16, mean 4, sqrt 2, r 0.5)', () => {
    for (const y of both(f(2, 2, 2, 2), 1, 4, f(1, 1, 1, 1), 0)) expect(Array.from(y)).toEqual([1, 1, 1, 1])
  })

  it('scales by the weight after normalising: [2, -2] with weight [3, 0.5] gives [3, -0.5]', () => {
    for (const y of both(f(2, -2), 1, 2, f(3, 0.5), 0)) expect(Array.from(y)).toEqual([3, -0.5])
  })
})

describe('rmsNorm: special values', () => {
  it('gives canonical NaN for a zero row with eps = 0 (0 * Inf), and +-0 for it with eps > 0', () => {
    for (const y of both(f(0, -0, 0), 1, 3, f(1, 1, 1), 0)) expect(bitsOf(y)).toEqual([CANONICAL_NAN_BITS, CANONICAL_NAN_BITS, CANONICAL_NAN_BITS])
    for (const y of both(f(0, -0, 0), 1, 3, f(1, 1, 1), 1e-6)) expect(bitsOf(y)).toEqual([0, 0x80000000, 0])
  })

  it('sends an overflowing sum of squares to r = 0: signed zeros, NaN where x is Inf', () => {
    for (const y of both(f(1e30, -1e30, 1), 1, 3, f(1, 1, 1), 1e-6)) expect(bitsOf(y)).toEqual([0, 0x80000000, 0])
    for (const y of both(f(Infinity, -2, 1), 1, 3, f(1, 1, 1), 1e-6)) expect(bitsOf(y)).toEqual([CANONICAL_NAN_BITS, 0x80000000, 0])
  })

  it('makes every element of a row with a NaN canonical NaN, and leaves other rows alone', () => {
    const x = f(1, NaN, 3, 1, 2, 3)
    for (const y of both(x, 2, 3, f(1, 1, 1), 1e-6)) {
      expect(bitsOf(y.subarray(0, 3))).toEqual([CANONICAL_NAN_BITS, CANONICAL_NAN_BITS, CANONICAL_NAN_BITS])
      expect(y.subarray(3).every(Number.isFinite)).toBe(true)
    }
  })

  it('keeps subnormal inputs (no denormals-are-zero): subnormal x times a large r comes back exactly', () => {
    // x = 2^-140 squares to 2^-280, which underflows to 0 in float32 (ss = 0, r = 1/sqrt(eps));
    // with eps = 2^-100, r = 2^50 and y = 2^-140 * 2^50 = 2^-90: exact, and lost if x were flushed.
    const x = new Float32Array(16).fill(2 ** -140)
    for (const y of both(x, 1, 16, new Float32Array(16).fill(1), 2 ** -100)) expect(y.every((v) => v === 2 ** -90)).toBe(true)
    const sub = new Float32Array(9).fill(2 ** -149)
    for (const y of both(sub, 1, 9, new Float32Array(9).fill(1), 2 ** -126)) {
      // r = 1 / sqrt(2^-126) = 2^63, y = 2^-149 * 2^63 = 2^-86.
      expect(y.every((v) => v === 2 ** -86)).toBe(true)
    }
  })
})
