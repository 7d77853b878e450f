import { describe, expect, it } from 'vitest'
import fc from 'fast-check'
import { NumericsError } from '../../src/errors.ts'
import { bitsToF32 } from '../../src/numerics/bits.ts'
import { decodeE8m0, e8m0Ceil, e8m0FromExponent, e8m0ToF32 } from '../../src/numerics/e8m0.ts'
import { ceilPow2, nextDownF32, nextUpF32 } from './oracle.ts'

describe('e8m0 decode', () => {
  it('gives code c the value 2^(c - 127) for all 255 finite codes, and 255 NaN', () => {
    for (let code = 0; code < 255; code++) expect(e8m0ToF32(code)).toBe(Math.pow(2, code - 127))
    expect(Number.isNaN(e8m0ToF32(255))).toBe(true)
    expect(e8m0ToF32(0)).toBe(bitsToF32(0x00400000)) // 2^-127 is a float32 subnormal
    expect(e8m0ToF32(127)).toBe(1)
    expect(e8m0ToF32(254)).toBe(2 ** 127)
  })

  it('decodes buffers and rejects bad codes', () => {
    const codes = new Uint8Array(256).map((_, i) => i)
    const values = decodeE8m0(codes)
    for (let c = 0; c < 255; c++) expect(values[c]).toBe(e8m0ToF32(c))
    expect(Number.isNaN(values[255])).toBe(true)
    expect(() => e8m0ToF32(256)).toThrow(NumericsError)
    expect(() => e8m0ToF32(NaN)).toThrow(/e8m0: code NaN/)
  })
})

describe('e8m0 from an exponent', () => {
  it('maps every exponent -127..127 to the code that decodes to 2^e', () => {
    for (let e = -127; e <= 127; e++) {
      const code = e8m0FromExponent(e)
      expect(code).toBe(e + 127)
      expect(e8m0ToF32(code)).toBe(Math.pow(2, e))
    }
  })

  it('rejects exponents it cannot hold', () => {
    for (const e of [-128, 128, 0.5, NaN, Infinity]) expect(() => e8m0FromExponent(e)).toThrow(NumericsError)
  })
})

describe('e8m0Ceil: the smallest e8m0 scale >= x', () => {
  it('maps each power of two to its own code and the float32 just above to the next', () => {
    for (let code = 0; code < 255; code++) {
      const p = Math.pow(2, code - 127)
      expect(e8m0Ceil(p)).toBe(code)
      expect(e8m0Ceil(nextUpF32(p))).toBe(code === 254 ? 255 : code + 1)
      if (code > 0) expect(e8m0Ceil(nextDownF32(p))).toBe(code)
    }
  })

  it('agrees with an exact ceil-power-of-two on random positive float32 values', () => {
    fc.assert(fc.property(fc.float({ min: bitsToF32(0x00400001), max: 2 ** 127, noNaN: true }), (x) =>
      e8m0Ceil(x) === Math.log2(ceilPow2(x)) + 127), { numRuns: 20_000 })
  })

  it('gives the smallest scale for zero and values at or below 2^-127', () => {
    expect(e8m0Ceil(0)).toBe(0)
    expect(e8m0Ceil(-0)).toBe(0)
    expect(e8m0Ceil(bitsToF32(1))).toBe(0)
    expect(e8m0Ceil(2 ** -127)).toBe(0)
    expect(e8m0Ceil(bitsToF32(0x00400001))).toBe(1)
    expect(e8m0Ceil(bitsToF32(0x007fffff))).toBe(1)
  })

  it('gives the NaN code where no scale covers x', () => {
    expect(e8m0Ceil(nextUpF32(2 ** 127))).toBe(255)
    expect(e8m0Ceil(bitsToF32(0x7f7fffff))).toBe(255)
    expect(e8m0Ceil(Infinity)).toBe(255)
    expect(e8m0Ceil(NaN)).toBe(255)
  })

  it('rejects negative scales', () => {
    expect(() => e8m0Ceil(-1)).toThrow(NumericsError)
    expect(() => e8m0Ceil(-Infinity)).toThrow(/negative scale/)
  })
})
