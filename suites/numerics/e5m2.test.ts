import { describe, expect, it } from 'vitest'
import fc from 'fast-check'
import { NumericsError } from '../../src/errors.ts'
import { bitsToF32 } from '../../src/numerics/bits.ts'
import { decodeE5m2, E5M2_MAX, E5M2_VALUES, e5m2ToF32, encodeE5m2, f32ToE5m2, roundE5m2 } from '../../src/numerics/e5m2.ts'
import { binaryGrid, criticalInputs, nearestCode, nextDownF32, signBit, strideSweep } from './oracle.ts'

// e5m2: 5 exponent bits (bias 15), 2 mantissa bits; 0x7c is Inf, 0x7d..0x7f NaN.
const grid = binaryGrid(5, 2, 15, 0x7c)

function expected (x: number): number {
  const sign = signBit(x) ? 0x80 : 0
  if (Number.isNaN(x)) return sign | 0x7f
  const code = Number.isFinite(x) ? nearestCode(grid, x) : 0x7c
  return sign | (code >= 0x7c ? 0x7c : code)
}

describe('e5m2 decode', () => {
  it('gives every one of the 256 codes its textbook value', () => {
    for (let code = 0; code < 256; code++) {
      const magnitude = code & 0x7f
      const got = e5m2ToF32(code)
      if (magnitude > 0x7c) {
        expect(Number.isNaN(got)).toBe(true)
        expect(signBit(got)).toBe(code >= 0x80)
        continue
      }
      const value = magnitude === 0x7c ? Infinity : grid.magnitudes[magnitude]
      expect(Object.is(got, code & 0x80 ? -value : value)).toBe(true)
    }
  })

  it('knows the landmarks and rejects bad codes', () => {
    expect(e5m2ToF32(0x7b)).toBe(57344)
    expect(E5M2_MAX).toBe(57344)
    expect(e5m2ToF32(0x01)).toBe(2 ** -16)
    expect(e5m2ToF32(0x04)).toBe(2 ** -14)
    expect(e5m2ToF32(0x3c)).toBe(1)
    expect(e5m2ToF32(0xfc)).toBe(-Infinity)
    expect(() => e5m2ToF32(300)).toThrow(NumericsError)
    const values = decodeE5m2(new Uint8Array([0x3c, 0xfb]))
    expect([...values]).toEqual([1, -57344])
    expect(Object.is(E5M2_VALUES[0x80], -0)).toBe(true)
  })
})

describe('e5m2 decode then encode', () => {
  it('returns every code to itself; NaN codes become 0x7f with their sign', () => {
    for (let code = 0; code < 256; code++) {
      const expectedCode = (code & 0x7f) > 0x7c ? (code & 0x80) | 0x7f : code
      expect(f32ToE5m2(e5m2ToF32(code))).toBe(expectedCode)
    }
  })
})

describe('e5m2 encode rounds to nearest, ties to even', () => {
  it('handles explicit ties and the subnormal range', () => {
    expect(f32ToE5m2(1.125)).toBe(0x3c) // halfway 1 (0x3c) and 1.25 (0x3d)
    expect(f32ToE5m2(1.375)).toBe(0x3e) // halfway 0x3d and 0x3e
    expect(f32ToE5m2(2 ** -17)).toBe(0x00) // halfway 0 and 2^-16
    expect(f32ToE5m2(3 * 2 ** -17)).toBe(0x02)
    expect(f32ToE5m2(7 * 2 ** -17)).toBe(0x04) // halfway 3*2^-16 (0x03) and 2^-14 (0x04)
  })

  it('matches the exact-arithmetic oracle at every decision point and across the float32 space', () => {
    const inputs = [...criticalInputs(grid), ...strideSweep(8191)]
    expect(inputs.filter((x) => f32ToE5m2(x) !== expected(x))).toEqual([])
  })

  it('matches the oracle on random float32 values', () => {
    fc.assert(fc.property(fc.float(), (x) => f32ToE5m2(x) === expected(x)), { numRuns: 20_000 })
  })
})

describe('e5m2 overflow and specials', () => {
  it('overflows to Inf from 61440 (halfway to 65536) up', () => {
    expect(f32ToE5m2(57344)).toBe(0x7b)
    expect(f32ToE5m2(nextDownF32(61440))).toBe(0x7b)
    expect(f32ToE5m2(61440)).toBe(0x7c) // tie: 0x7b is odd
    expect(f32ToE5m2(-61440)).toBe(0xfc)
    expect(f32ToE5m2(Infinity)).toBe(0x7c)
    expect(roundE5m2(1e9)).toBe(Infinity)
  })

  it('keeps the sign of zero and NaN', () => {
    expect(f32ToE5m2(-0)).toBe(0x80)
    expect(f32ToE5m2(NaN)).toBe(0x7f)
    expect(f32ToE5m2(bitsToF32(0xffc00000))).toBe(0xff)
  })

  it('encodes buffers like the scalar encoder', () => {
    const values = new Float32Array([0, 1.125, -61440, NaN, 2 ** -17])
    expect([...encodeE5m2(values)]).toEqual([...values].map((v) => f32ToE5m2(v)))
  })
})
