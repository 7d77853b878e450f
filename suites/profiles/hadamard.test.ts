import { describe, expect, it } from 'vitest'
import fc from 'fast-check'
import { NumericsError } from '../../src/errors.ts'
import { hadamardScale, hadamardTransform } from '../../src/model/profiles/index.ts'
import { f32ToBits } from '../../src/numerics/bits.ts'

const U = 2 ** -24
const gamma = (k: number) => (k * U) / (1 - k * U)
const bitsOf = (x: Float32Array) => [...new Uint32Array(x.buffer, x.byteOffset, x.length)]

// The definition in float64: y_i = sum_j (-1)^popcount(i & j) x_j / sqrt(n).
function exactHadamard (x: Float32Array): Float64Array {
  const n = x.length
  const y = new Float64Array(n)
  for (let i = 0; i < n; i++) {
    let s = 0
    for (let j = 0; j < n; j++) s += (popcount(i & j) % 2 === 0 ? 1 : -1) * x[j]
    y[i] = s / Math.sqrt(n)
  }
  return y
}

function popcount (v: number): number {
  let c = 0
  for (; v !== 0; v &= v - 1) c++
  return c
}

const rows128 = fc.array(fc.float({ min: -100, max: 100, noNaN: true }), { minLength: 128, maxLength: 128 }).map((a) => new Float32Array(a))

describe('hadamardTransform: hand-derived values', () => {
  it('gives H4 [1, 2, 3, 4] / 2 = [5, -1, -2, 0] and leaves n = 1 unchanged', () => {
    expect([...hadamardTransform(new Float32Array([1, 2, 3, 4]))]).toEqual([5, -1, -2, 0])
    expect([...hadamardTransform(new Float32Array([-3.25]))]).toEqual([-3.25])
  })

  it('uses increasing strides: a row where the decreasing order gives other bits', () => {
    // Strides 1 then 2: (2^24 + 1 -> 2^24, 2^24 - 1, 1, 1), then (2^24, 2^24, 2^24 - 1, 2^24 - 2), times 1/2.
    // Strides 2 then 1 would give [2^23, 2^23 - 0.5, 2^23, 2^23 - 1]; the exact answer is [2^23 + 1, 2^23, 2^23, 2^23 - 1].
    const x = new Float32Array([2 ** 24, 1, 1, 0])
    expect([...hadamardTransform(x)]).toEqual([2 ** 23, 2 ** 23, 2 ** 23 - 0.5, 2 ** 23 - 1])
    const decreasing = Float32Array.from(x)
    for (let h = 2; h >= 1; h /= 2) {
      for (let s = 0; s < 4; s += 2 * h) {
        for (let j = s; j < s + h; j++) {
          const a = decreasing[j]; const b = decreasing[j + h]
          decreasing[j] = Math.fround(a + b); decreasing[j + h] = Math.fround(a - b)
        }
      }
    }
    for (let i = 0; i < 4; i++) decreasing[i] = Math.fround(decreasing[i] * 0.5)
    expect([...decreasing]).toEqual([2 ** 23, 2 ** 23 - 0.5, 2 ** 23, 2 ** 23 - 1])
    expect(bitsOf(decreasing)).not.toEqual(bitsOf(hadamardTransform(x)))
  })

  it('scales by fround(1/sqrt(n)): 0x3db504f3 for n = 128, exact powers of two for n = 4^k', () => {
    expect(f32ToBits(hadamardScale(128))).toBe(0x3db504f3)
    expect(hadamardScale(128)).toBe(Math.fround(128 ** -0.5))
    expect([hadamardScale(1), hadamardScale(4), hadamardScale(64), hadamardScale(256)]).toEqual([1, 0.5, 0.125, 0.0625])
  })

  it('maps every basis vector e_j (n = 128) to s * (-1)^popcount(i & j), exactly', () => {
    const s = hadamardScale(128)
    for (let j = 0; j < 128; j++) {
      const e = new Float32Array(128)
      e[j] = 1
      const y = hadamardTransform(e)
      for (let i = 0; i < 128; i++) {
        if (!Object.is(y[i], popcount(i & j) % 2 === 0 ? s : -s)) throw new Error(`e_${j}: y[${i}] = ${y[i]}`)
      }
    }
  })
})

describe('hadamardTransform: float64 bounds (L = log2 n roundings per sum, then the rounded scale and product)', () => {
  const L = 7

  it('is within gamma_{L+2} * sum|x| / sqrt(n) of the definition', () => {
    fc.assert(fc.property(rows128, (x) => {
      const y = hadamardTransform(x)
      const exact = exactHadamard(x)
      const bound = gamma(L + 2) * x.reduce((a, v) => a + Math.abs(v), 0) / Math.sqrt(128)
      return y.every((v, i) => Math.abs(v - exact[i]) <= bound)
    }), { numRuns: 200 })
  })

  it('is an involution within 2.01 * gamma_{L+2} * sum|x|', () => {
    fc.assert(fc.property(rows128, (x) => {
      const back = hadamardTransform(hadamardTransform(x))
      const bound = 2.01 * gamma(L + 2) * x.reduce((a, v) => a + Math.abs(v), 0)
      return back.every((v, i) => Math.abs(v - x[i]) <= bound)
    }), { numRuns: 200 })
  })

  it('preserves the 2-norm within gamma_{L+2} * sum|x| (orthogonality)', () => {
    fc.assert(fc.property(rows128, (x) => {
      const norm = (v: ArrayLike<number>) => Math.sqrt(Array.from(v).reduce((a, t) => a + t * t, 0))
      const bound = gamma(L + 2) * x.reduce((a, v) => a + Math.abs(v), 0)
      return Math.abs(norm(hadamardTransform(x)) - norm(x)) <= bound
    }), { numRuns: 200 })
  })
})

describe('hadamardTransform: out buffer and errors', () => {
  it('gives the same bits in place, into out, and into a fresh array', () => {
    const x = new Float32Array(128).map((_, i) => Math.fround(Math.sin(i) * 10))
    const fresh = hadamardTransform(x)
    const out = new Float32Array(128)
    expect(hadamardTransform(x, out)).toBe(out)
    const inPlace = Float32Array.from(x)
    hadamardTransform(inPlace, inPlace)
    expect(bitsOf(out)).toEqual(bitsOf(fresh))
    expect(bitsOf(inPlace)).toEqual(bitsOf(fresh))
  })

  it('refuses lengths that are not powers of two and a wrong out length', () => {
    for (const n of [0, 3, 96, 130]) {
      expect(() => hadamardTransform(new Float32Array(n))).toThrow(NumericsError)
    }
    expect(() => hadamardTransform(new Float32Array(96))).toThrow(/length 96 is not a power of two/)
    expect(() => hadamardTransform(new Float32Array(8), new Float32Array(4))).toThrow(/out has 4 elements, expected 8/)
  })
})
