// The seeded PRNG behind synthetic checkpoints: exact sequence, stream independence, normal shape.
import { describe, it, expect } from 'vitest'
import fc from 'fast-check'
import { Xoshiro128, streamFor, assertSeed } from '../../src/model/checkpoint/random.ts'
import { PdBridgeError } from '../../src/errors.ts'

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
