import { describe, expect, it } from 'vitest'
import fc from 'fast-check'
import { NumericsError } from '../../src/errors.ts'
import { bf16ToF32, roundBf16 } from '../../src/numerics/bf16.ts'
import { fp4RoundTripBlocks, fp8RoundTripBlocks } from '../../src/numerics/round-trip.ts'
import { bitDiffs, E2M1_GRID, E4M3_GRID, roundTripFromSpec } from './oracle.ts'

// DeepSeek's inputs are bf16 activations: draw rows of bf16 values, mostly of ordinary size.
const bf16Value = fc.integer({ min: 0, max: 0xffff })
  .filter((code) => (code & 0x7f80) !== 0x7f80)
  .map((code) => bf16ToF32(code))
const ordinary = fc.float({ min: -50, max: 50, noNaN: true })
const row = (length: number) => fc.array(fc.oneof(bf16Value, ordinary.map(roundBf16)), { minLength: length, maxLength: length })
// Below 2^127 no block rounds up past the float32 maximum to Inf (mxfp8/mxfp4 tests show that edge).
const boundedRow = (length: number) => row(length).map((list) => list.map((v) => Math.abs(v) < 2 ** 127 ? v : 0))

describe('fp8RoundTripBlocks (window rows: blocks of 64, e4m3, ue8m0 scale)', () => {
  it('equals the exact-arithmetic spec bit for bit', () => {
    fc.assert(fc.property(row(128), (list) => {
      const x = new Float32Array(list)
      return bitDiffs(fp8RoundTripBlocks(x, 64), roundTripFromSpec(x, 64, E4M3_GRID, Math.fround(1e-4))).length === 0
    }), { numRuns: 1_000 })
  })

  it('gives values bf16 can hold exactly, and is idempotent', () => {
    fc.assert(fc.property(boundedRow(64), (list) => {
      const y = fp8RoundTripBlocks(new Float32Array(list), 64)
      return y.every((v) => Object.is(roundBf16(v), v)) && bitDiffs(fp8RoundTripBlocks(y, 64), y).length === 0
    }), { numRuns: 1_000 })
  })

  it('works on a hand-checked block', () => {
    const x = new Float32Array(64)
    x.set([300, 1.03, -0.0009, 17])
    // amax 300 -> scale 1. 300 -> 288 (step 32 in [256, 448)); 1.03 -> 1 (step 1/8);
    // -0.0009 is below half the smallest subnormal (2^-10), so -0 with its sign; 17 ties between 16 (even code) and 18, so 16.
    const y = fp8RoundTripBlocks(x, 64)
    expect([...y.subarray(0, 4)]).toEqual([288, 1, -0, 16])
    expect(Object.is(y[2], -0)).toBe(true)
  })
})

describe('fp4RoundTripBlocks (indexer rows: blocks of 32, e2m1, ue8m0 scale)', () => {
  it('equals the exact-arithmetic spec bit for bit', () => {
    fc.assert(fc.property(row(128), (list) => {
      const x = new Float32Array(list)
      return bitDiffs(fp4RoundTripBlocks(x, 32), roundTripFromSpec(x, 32, E2M1_GRID, 6 * 2 ** -126)).length === 0
    }), { numRuns: 1_000 })
  })

  it('gives values bf16 can hold exactly, and is idempotent', () => {
    fc.assert(fc.property(boundedRow(32), (list) => {
      const y = fp4RoundTripBlocks(new Float32Array(list))
      return y.every((v) => Object.is(roundBf16(v), v)) && bitDiffs(fp4RoundTripBlocks(y), y).length === 0
    }), { numRuns: 1_000 })
  })

  it('applies the ties-to-even rule listed in the architecture notes', () => {
    const x = new Float32Array(32)
    x.set([0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5, 6])
    expect([...fp4RoundTripBlocks(x).subarray(0, 8)]).toEqual([0, 1, 1, 2, 2, 4, 4, 6])
  })
})

describe('round trips with non-finite input or bad shapes', () => {
  it('turns only the block holding NaN into NaN', () => {
    const x = new Float32Array(128).fill(0.5)
    x[70] = NaN
    const y = fp8RoundTripBlocks(x, 64)
    expect(y.subarray(0, 64).every((v) => v === 0.5)).toBe(true)
    expect(y.subarray(64).every(Number.isNaN)).toBe(true)
    const z = fp4RoundTripBlocks(x)
    expect(z.subarray(0, 64).every((v) => v === 0.5)).toBe(true)
    expect(z.subarray(64, 96).every(Number.isNaN)).toBe(true)
    expect(z.subarray(96).every((v) => v === 0.5)).toBe(true)
  })

  it('rejects lengths that are not whole blocks and wrong output lengths', () => {
    expect(() => fp8RoundTripBlocks(new Float32Array(100), 64)).toThrow(NumericsError)
    expect(() => fp4RoundTripBlocks(new Float32Array(33))).toThrow(NumericsError)
    expect(() => fp8RoundTripBlocks(new Float32Array(64), 64, new Float32Array(63))).toThrow(/fp8RoundTripBlocks/)
  })
})
