import { describe, expect, it } from 'vitest'
import fc from 'fast-check'
import { NumericsError } from '../../src/errors.ts'
import { E2M1_VALUES } from '../../src/numerics/e2m1.ts'
import { unpackE2m1 } from '../../src/numerics/e2m1-pack.ts'
import { dequantizeE2m1Blocks, dequantizeMxfp4, quantizeE2m1Blocks, quantizeMxfp4 } from '../../src/numerics/mxfp4.ts'
import { bitDiffs, e2m1HalfStep, E2M1_GRID, roundTripFromSpec } from './oracle.ts'

const FLOOR = 6 * 2 ** -126
const blockOf = (values: fc.Arbitrary<number>) => fc.array(values, { minLength: 32, maxLength: 32 })
const finiteFloat = fc.float({ noNaN: true, noDefaultInfinity: true })
// Below 2^127 no block rounds up past the float32 maximum (see the overflow test).
const boundedFloat = fc.float({ noNaN: true, min: -(2 ** 127), max: 2 ** 127 })

describe('MXFP4 packing order', () => {
  it('stores element 2i in the low nibble and 2i+1 in the high nibble of byte i', () => {
    const x = new Float32Array(32)
    x[0] = 1.5 // code 0x3
    x[1] = -1 // code 0xa
    x[30] = -0.5 // code 0x9
    x[31] = 6 // code 0x7 (makes amax 6, scale 1)
    const q = quantizeMxfp4(x)
    expect(q.packed.length).toBe(16)
    expect(q.scales[0]).toBe(127)
    expect(q.packed[0]).toBe(0xa3)
    expect(q.packed[15]).toBe(0x79)
    expect(q.packed.subarray(1, 15).every((b) => b === 0)).toBe(true)
  })

  it('dequantises a hand-written buffer in that order', () => {
    const packed = new Uint8Array(16)
    packed[0] = 0xa3 // element 0: 1.5, element 1: -1
    packed[1] = 0x7f // element 2: -6, element 3: 6
    const y = dequantizeMxfp4({ packed, scales: new Uint8Array([128]), block: 32 }) // scale 2
    expect([...y.subarray(0, 5)]).toEqual([3, -2, -12, 12, 0])
  })
})

describe('MXFP4 scale rule', () => {
  it('is 2^ceil(log2(amax / 6)), with 2^-126 for all-zero and tiny blocks', () => {
    const scaleFor = (amax: number) => {
      const x = new Float32Array(32)
      x[7] = amax
      return quantizeMxfp4(x).scales[0]
    }
    expect(scaleFor(6)).toBe(127)
    expect(scaleFor(6.000001)).toBe(128)
    expect(scaleFor(4)).toBe(127)
    expect(scaleFor(3)).toBe(126)
    expect(scaleFor(0)).toBe(1)
    expect(scaleFor(1e-45)).toBe(1) // float32 subnormal amax
    expect(scaleFor(3.4e38)).toBe(253) // near float32 max
  })

  it('keeps subnormal inputs instead of flushing them', () => {
    const x = new Float32Array(32)
    x[0] = 2 ** -127 // 0.5 * 2^-126
    x[1] = -(2 ** -126)
    const y = dequantizeMxfp4(quantizeMxfp4(x))
    expect(y[0]).toBe(2 ** -127)
    expect(y[1]).toBe(-(2 ** -126))
  })
})

describe('MXFP4 rounding inside a block', () => {
  it('breaks ties between e2m1 neighbours toward the even code', () => {
    const x = new Float32Array([6, 0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5, -5, -0.25, ...new Array(22).fill(0)])
    const y = dequantizeMxfp4(quantizeMxfp4(x))
    expect([...y.subarray(0, 10)]).toEqual([6, 0, 1, 1, 2, 2, 4, 4, -4, -0])
    expect(Object.is(y[9], -0)).toBe(true)
  })
})

describe('MXFP4 round trip of representable values', () => {
  it('is exact and recovers codes and scale when a block reaches ±6 * 2^k', () => {
    fc.assert(fc.property(blockOf(fc.integer({ min: 0, max: 15 })), fc.integer({ min: -126, max: 100 }), fc.integer({ min: 0, max: 31 }), (drawn, k, at) => {
      // Copy before editing: fast-check reuses drawn values while shrinking.
      const codes = [...drawn]
      codes[at] = 0x7 | (codes[at] & 0x8)
      const x = new Float32Array(codes.map((c) => E2M1_VALUES[c] * 2 ** k))
      const q = quantizeMxfp4(x)
      const back = unpackE2m1(q.packed)
      return q.scales[0] === 127 + k && back.every((c, i) => c === codes[i]) && bitDiffs(dequantizeMxfp4(q), x).length === 0
    }), { numRuns: 2_000 })
  })
})

describe('MXFP4 round trip of arbitrary values', () => {
  it('equals the exact-arithmetic spec bit for bit', () => {
    fc.assert(fc.property(blockOf(finiteFloat), (list) => {
      const x = new Float32Array(list)
      return bitDiffs(dequantizeMxfp4(quantizeMxfp4(x)), roundTripFromSpec(x, 32, E2M1_GRID, FLOOR)).length === 0
    }), { numRuns: 2_000 })
  })

  it('errs by at most half an e2m1 step at x / s, times s', () => {
    fc.assert(fc.property(blockOf(boundedFloat), (list) => {
      const x = new Float32Array(list)
      const q = quantizeMxfp4(x)
      const y = dequantizeMxfp4(q)
      const s = 2 ** (q.scales[0] - 127)
      return list.every((v, i) => Math.abs(Math.fround(v) / s) <= 6 &&
        Math.abs(Math.fround(v) - y[i]) <= e2m1HalfStep(Math.fround(v) / s) * s)
    }), { numRuns: 2_000 })
  })
})

describe('MXFP4 at the top of the float32 range', () => {
  it('can round up past the float32 maximum to Inf, as the float32 dequantisation in torch does', () => {
    const x = new Float32Array(32)
    x[0] = 3.5 * 2 ** 126 // scale 2^126; 3.5 ties to 4, and 4 * 2^126 = 2^128
    const q = quantizeMxfp4(x)
    expect(q.scales[0]).toBe(253)
    expect(dequantizeMxfp4(q)[0]).toBe(Infinity)
  })
})

describe('MXFP4 non-finite blocks', () => {
  it('marks a block with NaN or Inf by scale 255 and decodes it all NaN', () => {
    const x = new Float32Array(64).fill(3)
    x[40] = Infinity
    const q = quantizeMxfp4(x)
    expect([...q.scales]).toEqual([126, 255])
    const y = dequantizeMxfp4(q)
    expect(y[0]).toBe(3)
    expect(y.subarray(32).every(Number.isNaN)).toBe(true)
  })
})

describe('block-scaled e2m1 argument checks', () => {
  it('rejects lengths, odd blocks and scale counts that do not fit', () => {
    expect(() => quantizeMxfp4(new Float32Array(48))).toThrow(/not a multiple of the block size 32/)
    expect(() => quantizeE2m1Blocks(new Float32Array(6), 3)).toThrow(/odd/)
    const q = quantizeE2m1Blocks(new Float32Array(32), 16)
    expect(() => dequantizeMxfp4(q)).toThrow(/block size 16 is not 32/)
    expect(() => dequantizeE2m1Blocks({ ...q, scales: new Uint8Array(1) })).toThrow(NumericsError)
    expect(() => dequantizeE2m1Blocks({ ...q, block: 3 })).toThrow(NumericsError)
  })
})
