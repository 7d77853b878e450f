import { describe, expect, it } from 'vitest'
import fc from 'fast-check'
import { NumericsError } from '../../src/errors.ts'
import { E2M1_VALUES, e2m1ToF32, f32ToE2m1, roundE2m1 } from '../../src/numerics/e2m1.ts'
import { packE2m1, unpackE2m1 } from '../../src/numerics/e2m1-pack.ts'
import { binaryGrid, criticalInputs, nearestCode, signBit, strideSweep } from './oracle.ts'

const LUT = [0, 0.5, 1, 1.5, 2, 3, 4, 6]
const grid = binaryGrid(2, 1, 1, 8)

function expected (x: number): number {
  const sign = signBit(x) ? 8 : 0
  const code = Number.isFinite(x) ? nearestCode(grid, x) : 8
  return sign | Math.min(code, 7)
}

describe('e2m1 decode', () => {
  it('gives all 16 codes the MXFP4 table values, signs and -0 included', () => {
    expect(grid.magnitudes).toEqual(LUT)
    for (let code = 0; code < 16; code++) {
      const value = code & 8 ? -LUT[code & 7] : LUT[code & 7]
      expect(Object.is(e2m1ToF32(code), value)).toBe(true)
      expect(Object.is(E2M1_VALUES[code], value)).toBe(true)
    }
    expect(() => e2m1ToF32(16)).toThrow(NumericsError)
  })
})

describe('e2m1 decode then encode', () => {
  it('returns all 16 codes to themselves', () => {
    for (let code = 0; code < 16; code++) expect(f32ToE2m1(e2m1ToF32(code))).toBe(code)
  })
})

describe('e2m1 encode rounds to nearest, ties to even', () => {
  it('breaks every tie between neighbours toward the even code', () => {
    const ties: Array<[number, number]> = [[0.25, 0], [0.75, 1], [1.25, 1], [1.75, 2], [2.5, 2], [3.5, 4], [5, 4]]
    for (const [x, value] of ties) {
      expect(roundE2m1(x)).toBe(value)
      expect(roundE2m1(-x)).toBe(-value)
    }
  })

  it('matches the exact-arithmetic oracle at every decision point and across the float32 space', () => {
    const inputs = [...criticalInputs(grid), ...strideSweep(8191)].filter((x) => !Number.isNaN(x))
    expect(inputs.filter((x) => f32ToE2m1(x) !== expected(x))).toEqual([])
  })

  it('matches the oracle on random float32 values', () => {
    fc.assert(fc.property(fc.float({ noNaN: true }), (x) => f32ToE2m1(x) === expected(x)), { numRuns: 20_000 })
  })
})

describe('e2m1 saturation and specials', () => {
  it('saturates at ±6, Inf included, and keeps the sign of small negatives as -0', () => {
    expect(f32ToE2m1(6.99)).toBe(7)
    expect(f32ToE2m1(7)).toBe(7) // would tie to the would-be 8; saturates instead
    expect(f32ToE2m1(1e30)).toBe(7)
    expect(f32ToE2m1(Infinity)).toBe(7)
    expect(f32ToE2m1(-Infinity)).toBe(15)
    expect(f32ToE2m1(-0.1)).toBe(8)
    expect(Object.is(roundE2m1(-0.2), -0)).toBe(true)
  })

  it('refuses NaN, which e2m1 cannot hold', () => {
    expect(() => f32ToE2m1(NaN)).toThrow(NumericsError)
  })
})

describe('e2m1 packing, low nibble first', () => {
  it('puts element 2i in bits 0-3 and element 2i+1 in bits 4-7', () => {
    // 1.5 is code 0x3, -1 is code 0xa: the byte is 0xa3.
    const packed = packE2m1(new Uint8Array([0x3, 0xa, 0xf, 0x0]))
    expect([...packed]).toEqual([0xa3, 0x0f])
    expect([...unpackE2m1(new Uint8Array([0xa3, 0x0f]))]).toEqual([0x3, 0xa, 0xf, 0x0])
  })

  it('round-trips any even-length code list', () => {
    fc.assert(fc.property(fc.array(fc.integer({ min: 0, max: 15 }), { maxLength: 64 }), (list) => {
      const codes = new Uint8Array(list.length - (list.length % 2)).map((_, i) => list[i])
      const back = unpackE2m1(packE2m1(codes))
      return back.length === codes.length && back.every((c, i) => c === codes[i])
    }))
  })

  it('rejects odd counts, codes above 15 and wrong output lengths', () => {
    expect(() => packE2m1(new Uint8Array(3))).toThrow(/cannot fill whole bytes/)
    expect(() => packE2m1(new Uint8Array([1, 16]))).toThrow(/element 1/)
    expect(() => unpackE2m1(new Uint8Array(2), new Uint8Array(3))).toThrow(NumericsError)
  })
})
