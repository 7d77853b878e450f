// The seeded PRNG behind synthetic checkpoints: exact sequence, stream independence, normal shape.
import { describe, it, expect } from 'vitest'
import fc from 'fast-check'
import { Xoshiro128, streamFor, assertSeed } from '../../src/model/checkpoint/random.ts'
import { PdBridgeError } from '../../src/errors.ts'
import { initialValues } from '../../src/model/checkpoint/init.ts'
import { f32ToBf16, roundBf16 } from '../../src/numerics/bf16.ts'

describe('xoshiro128** produces the reference sequence', () => {
  it('matches outputs computed independently (Python big-int arithmetic) from state [1, 2, 3, 4]', () => {
    const rng = new Xoshiro128([1, 2, 3, 4])
    const got = Array.from({ length: 8 }, () => rng.nextU32())
    expect(got).toEqual([11520, 0, 5927040, 70819200, 2031721883, 1637235492, 1287239034, 3734860849])
  })

  it('refuses an all-zero state (the generator would output zeros forever)', () => {
    expect(() => new Xoshiro128([0, 0, 0, 0])).toThrow(PdBridgeError)
  })
})

describe('uniforms and integers stay in range', () => {
  it('nextUniform is in [0, 1) and nextInt(n) in [0, n) for any stream', () => {
    fc.assert(fc.property(fc.nat(), fc.string(), fc.integer({ min: 1, max: 1000 }), (seed, name, n) => {
      const rng = streamFor(seed, name)
      for (let i = 0; i < 50; i++) {
        const u = rng.nextUniform()
        const k = rng.nextInt(n)
        if (!(u >= 0 && u < 1)) return false
        if (!(Number.isInteger(k) && k >= 0 && k < n)) return false
      }
      return true
    }), { numRuns: 200 })
  })
})

describe('streams are keyed by (seed, name)', () => {
  const first = (seed: number, name: string) => Array.from({ length: 4 }, ((r) => () => r.nextU32())(streamFor(seed, name)))

  it('gives the same sequence for the same seed and name', () => {
    expect(first(7, 'model.norm.weight')).toEqual(first(7, 'model.norm.weight'))
  })

  it('gives different sequences for another name or another seed', () => {
    expect(first(7, 'model.norm.weight')).not.toEqual(first(7, 'model.norm.weights'))
    expect(first(7, 'model.norm.weight')).not.toEqual(first(8, 'model.norm.weight'))
  })

  it('accepts only non-negative safe integer seeds', () => {
    for (const bad of [-1, 1.5, Number.NaN, 2 ** 53, Infinity]) expect(() => assertSeed(bad)).toThrow(PdBridgeError)
    for (const good of [0, 1, 2 ** 53 - 1]) expect(() => assertSeed(good)).not.toThrow()
  })
})

describe('nextNormal is a standard normal', () => {
  it('has mean ~0, variance ~1 and ~68.3% of mass within one sigma over 200k samples', () => {
    // Tolerances are ~10 standard errors for n = 200000 (SE of mean 0.0022, of variance 0.0032,
    // of a proportion 0.001), so a correct generator never fails and a wrong scale always does.
    const rng = streamFor(1, 'normal-check')
    const n = 200_000
    let sum = 0
    let sumSq = 0
    let within = 0
    for (let i = 0; i < n; i++) {
      const z = rng.nextNormal()
      sum += z
      sumSq += z * z
      if (Math.abs(z) < 1) within++
    }
    const mean = sum / n
    expect(Math.abs(mean)).toBeLessThan(0.022)
    expect(Math.abs(sumSq / n - mean * mean - 1)).toBeLessThan(0.032)
    expect(Math.abs(within / n - 0.682689)).toBeLessThan(0.01)
  })
})

describe('fillNormals is nextNormal in bulk', () => {
  it('gives the same values in order, for any stream and any split into chunks (the pair spare crossing chunks)', () => {
    fc.assert(fc.property(fc.nat(), fc.array(fc.nat({ max: 9 }), { maxLength: 6 }), (seed, sizes) => {
      const one = streamFor(seed, 'w')
      const bulk = streamFor(seed, 'w')
      for (const n of sizes) {
        const z = new Float64Array(n)
        bulk.fillNormals(z)
        for (let i = 0; i < n; i++) expect(Object.is(z[i], one.nextNormal())).toBe(true)
      }
      // The state and the spare are where nextNormal would have left them.
      expect([bulk.nextNormal(), bulk.nextNormal(), bulk.nextU32()]).toEqual([one.nextNormal(), one.nextNormal(), one.nextU32()])
    }), { numRuns: 200 })
  })

  it('initialValues equals the value-by-value reference (normal, rounded to float32, then bf16) across chunk boundaries', () => {
    const shape = [1, 65536 + 7]
    const count = shape[1]
    const reference = (encode: (x: number) => number) => {
      const rng = streamFor(5, 'p')
      return Array.from({ length: count }, () => encode(0.25 + 0.02 * rng.nextNormal()))
    }
    const bf16 = initialValues({ name: 'p', shape, dtype: 'BF16', role: 'linear', init: { kind: 'normal', mean: 0.25, std: 0.02, bf16Values: true } }, 5)
    const differing = (got: ArrayLike<number>, want: number[]) => want.filter((w, i) => !Object.is(got[i], w)).length
    expect(bf16.length).toBe(count)
    expect(differing(bf16 as Uint16Array, reference(f32ToBf16))).toBe(0)
    const f32 = initialValues({ name: 'p', shape, dtype: 'F32', role: 'linear', init: { kind: 'normal', mean: 0.25, std: 0.02, bf16Values: true } }, 5)
    expect(differing(f32 as Float32Array, reference(roundBf16))).toBe(0)
  })
})
