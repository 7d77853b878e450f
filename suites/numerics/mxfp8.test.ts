import { describe, expect, it } from 'vitest'
import fc from 'fast-check'
import { NumericsError } from '../../src/errors.ts'
import { E4M3_VALUES } from '../../src/numerics/e4m3.ts'
import { dequantizeE4m3Blocks, dequantizeMxfp8, quantizeE4m3Blocks, quantizeMxfp8 } from '../../src/numerics/mxfp8.ts'
import { bitDiffs, e4m3HalfStep, E4M3_GRID, roundTripFromSpec } from './oracle.ts'

const FLOOR = Math.fround(1e-4)
const finiteCodes = fc.integer({ min: 0, max: 255 }).filter((c) => (c & 0x7f) !== 0x7f)
const blockOf = (values: fc.Arbitrary<number>) => fc.array(values, { minLength: 32, maxLength: 32 })
const finiteFloat = fc.float({ noNaN: true, noDefaultInfinity: true })
// Below 2^127 no block rounds up past the float32 maximum (see the overflow test).
const boundedFloat = fc.float({ noNaN: true, min: -(2 ** 127), max: 2 ** 127 })

describe('MXFP8 layout and scale', () => {
  it('gives one e8m0 scale per 32 values, 2^ceil(log2(amax / 448))', () => {
    const x = new Float32Array(96)
    x[5] = 448 // block 0: scale 1
    x[40] = -449 // block 1: just over 448, scale 2
    x[70] = 1e-6 // block 2: below the 1e-4 floor, scale 2^-22
    const q = quantizeMxfp8(x)
    expect(q.codes.length).toBe(96)
    expect([...q.scales]).toEqual([127, 128, 105])
    expect(q.codes[5]).toBe(0x7e)
    expect(q.codes[40]).toBe(0xf6) // -449/2 = -224.5 rounds to -224 = -1.75 * 2^7
  })
})

describe('MXFP8 round trip of representable values', () => {
  it('is exact and recovers codes and scale when a block reaches ±448 * 2^k', () => {
    fc.assert(fc.property(blockOf(finiteCodes), fc.integer({ min: -22, max: 100 }), fc.integer({ min: 0, max: 31 }), (drawn, k, at) => {
      // Copy before editing: fast-check reuses drawn values while shrinking.
      const codes = [...drawn]
      codes[at] = 0x7e | (codes[at] & 0x80)
      const x = new Float32Array(codes.map((c) => E4M3_VALUES[c] * 2 ** k))
      const q = quantizeMxfp8(x)
      return q.scales[0] === 127 + k && q.codes.every((c, i) => c === codes[i]) && bitDiffs(dequantizeMxfp8(q), x).length === 0
    }), { numRuns: 2_000 })
  })
})

describe('MXFP8 round trip of arbitrary values', () => {
  it('equals the exact-arithmetic spec bit for bit', () => {
    fc.assert(fc.property(blockOf(finiteFloat), (list) => {
      const x = new Float32Array(list)
      return bitDiffs(dequantizeMxfp8(quantizeMxfp8(x)), roundTripFromSpec(x, 32, E4M3_GRID, FLOOR)).length === 0
    }), { numRuns: 2_000 })
  })

  it('errs by at most half an e4m3 step at x / s, times s', () => {
    fc.assert(fc.property(blockOf(boundedFloat), (list) => {
      const x = new Float32Array(list)
      const q = quantizeMxfp8(x)
      const y = dequantizeMxfp8(q)
      const s = 2 ** (q.scales[0] - 127)
      // x / s is exact in double precision (s is a power of two), so the bound is exact too.
      return list.every((v, i) => Math.abs(Math.fround(v) - y[i]) <= e4m3HalfStep(Math.fround(v) / s) * s)
    }), { numRuns: 2_000 })
  })
})

describe('MXFP8 at the top of the float32 range', () => {
  it('can round up past the float32 maximum to Inf, as the float32 dequantisation in torch does', () => {
    const x = new Float32Array(32)
    x[0] = 3.4e38 // scale 2^120; 3.4e38 / 2^120 = 255.8 rounds to 256, and 256 * 2^120 = 2^128
    const q = quantizeMxfp8(x)
    expect(q.scales[0]).toBe(127 + 120)
    expect(dequantizeMxfp8(q)[0]).toBe(Infinity)
  })
})

describe('MXFP8 non-finite blocks', () => {
  it('marks a block with NaN or Inf by scale 255 and decodes it all NaN, leaving other blocks alone', () => {
    const x = new Float32Array(64).fill(1)
    x[3] = NaN
    x[33] = 2
    const q = quantizeMxfp8(x)
    expect(q.scales[0]).toBe(255)
    expect(q.codes.subarray(0, 32).every((c) => c === 0x7f)).toBe(true)
    const y = dequantizeMxfp8(q)
    expect(y.subarray(0, 32).every(Number.isNaN)).toBe(true)
    expect(y[33]).toBe(2)
    x[3] = -Infinity
    expect(quantizeMxfp8(x).scales[0]).toBe(255)
  })
})

describe('block-scaled e4m3 argument checks', () => {
  it('rejects lengths, blocks and scale counts that do not fit', () => {
    expect(() => quantizeMxfp8(new Float32Array(33))).toThrow(/not a multiple of the block size 32/)
    expect(() => quantizeE4m3Blocks(new Float32Array(8), 0)).toThrow(NumericsError)
    expect(() => quantizeE4m3Blocks(new Float32Array(8), 2.5)).toThrow(NumericsError)
    const q = quantizeE4m3Blocks(new Float32Array(128), 64)
    expect(q.scales.length).toBe(2)
    expect(() => dequantizeMxfp8(q)).toThrow(/block size 64 is not 32/)
    expect(() => dequantizeE4m3Blocks({ ...q, scales: new Uint8Array(3) })).toThrow(/need 2 scales, got 3/)
    expect(() => dequantizeE4m3Blocks(q, new Float32Array(5))).toThrow(NumericsError)
  })
})
