import { describe, expect, it } from 'vitest'
import fc from 'fast-check'
import { NumericsError } from '../../src/errors.ts'
import { bitsToF32, f32ToBits } from '../../src/numerics/bits.ts'
import { decodeF16, encodeF16, F16_MAX, f16ToF32, f32ToF16, roundF16 } from '../../src/numerics/f16.ts'
import { binaryGrid, criticalInputs, nearestCode, signBit, strideSweep } from './oracle.ts'

// IEEE half: 5 exponent bits (bias 15), 10 mantissa bits; 0x7c00 is Inf, above it NaN.
const grid = binaryGrid(5, 10, 15, 0x7c00)

function expectedF16 (x: number): number {
  const sign = signBit(x) ? 0x8000 : 0
  if (Number.isNaN(x)) return sign | 0x7e00
  const code = nearestCode(grid, x)
  return sign | (code >= 0x7c00 ? 0x7c00 : code)
}

describe('f16 decode', () => {
  it('gives every one of the 65,536 codes its textbook value', () => {
    const bad: number[] = []
    for (let code = 0; code < 0x10000; code++) {
      const magnitude = code & 0x7fff
      const got = f16ToF32(code)
      if (magnitude > 0x7c00) {
        if (!Number.isNaN(got)) bad.push(code)
        continue
      }
      const value = magnitude === 0x7c00 ? Infinity : grid.magnitudes[magnitude]
      if (!Object.is(got, code & 0x8000 ? -value : value)) bad.push(code)
    }
    expect(bad).toEqual([])
  })

  it('knows the landmarks', () => {
    expect(f16ToF32(0x7bff)).toBe(F16_MAX)
    expect(F16_MAX).toBe(65504)
    expect(f16ToF32(0x0001)).toBe(2 ** -24)
    expect(f16ToF32(0x03ff)).toBe(1023 * 2 ** -24)
    expect(f16ToF32(0x0400)).toBe(2 ** -14)
    expect(f16ToF32(0x3c00)).toBe(1)
    expect(f16ToF32(0xc000)).toBe(-2)
    expect(Object.is(f16ToF32(0x8000), -0)).toBe(true)
    expect(f16ToF32(0xfc00)).toBe(-Infinity)
  })

  it('keeps NaN sign and payload (moved to the top of the float32 mantissa)', () => {
    expect(f32ToBits(f16ToF32(0x7e00))).toBe(0x7fc00000)
    expect(f32ToBits(f16ToF32(0xfe01))).toBe(0xffc02000)
  })

  it('decodes buffers to the same bits as the scalar decoder', () => {
    const codes = new Uint16Array(0x10000).map((_, i) => i)
    const values = decodeF16(codes)
    const bad = [...codes].filter((c) => {
      const a = f32ToBits(values[c])
      const b = f32ToBits(f16ToF32(c))
      return a !== b && !(Number.isNaN(values[c]) && Number.isNaN(f16ToF32(c)))
    })
    expect(bad).toEqual([])
  })

  it('rejects codes outside 0..65535 with a NumericsError', () => {
    expect(() => f16ToF32(0x10000)).toThrow(NumericsError)
    expect(() => f16ToF32(-1)).toThrow(/f16: code -1/)
    expect(() => f16ToF32(1.5)).toThrow(NumericsError)
  })
})

describe('f16 decode then encode', () => {
  it('returns every code to itself; NaN codes become 0x7e00 with their sign', () => {
    const bad: number[] = []
    for (let code = 0; code < 0x10000; code++) {
      const expected = (code & 0x7fff) > 0x7c00 ? (code & 0x8000) | 0x7e00 : code
      if (f32ToF16(f16ToF32(code)) !== expected) bad.push(code)
    }
    expect(bad).toEqual([])
  })
})

describe('f16 encode rounds to nearest, ties to even', () => {
  it('handles explicit ties both ways', () => {
    expect(f32ToF16(1 + 2 ** -11)).toBe(0x3c00) // halfway 0x3c00 (even) and 0x3c01
    expect(f32ToF16(1 + 3 * 2 ** -11)).toBe(0x3c02) // halfway 0x3c01 and 0x3c02 (even)
    expect(f32ToF16(2 ** -25)).toBe(0x0000) // halfway 0 and the smallest subnormal
    expect(f32ToF16(3 * 2 ** -25)).toBe(0x0002)
    expect(f32ToF16(2 ** -14 - 2 ** -25)).toBe(0x0400) // halfway largest subnormal (odd) and 2^-14
    expect(f32ToF16(bitsToF32(0x33000001))).toBe(0x0001) // just above 2^-25
  })

  it('matches the exact-arithmetic oracle at every decision point and across the float32 space', () => {
    const inputs = [...criticalInputs(grid), ...strideSweep(4099)]
    const bad = inputs.filter((x) => f32ToF16(x) !== expectedF16(x))
    expect(bad).toEqual([])
  })

  it('matches the oracle on random float32 values', () => {
    fc.assert(fc.property(fc.float(), (x) => f32ToF16(x) === expectedF16(x)), { numRuns: 20_000 })
  })
})

describe('f16 overflow and specials', () => {
  it('overflows to Inf from 65520 (halfway to 65536) up, and keeps signs', () => {
    expect(f32ToF16(65504)).toBe(0x7bff)
    expect(f32ToF16(65519.99609375)).toBe(0x7bff)
    expect(f32ToF16(65520)).toBe(0x7c00)
    expect(f32ToF16(-65520)).toBe(0xfc00)
    expect(f32ToF16(1e10)).toBe(0x7c00)
    expect(f32ToF16(Infinity)).toBe(0x7c00)
    expect(f32ToF16(-Infinity)).toBe(0xfc00)
    expect(roundF16(70000)).toBe(Infinity)
  })

  it('keeps the sign of zero and of NaN', () => {
    expect(f32ToF16(-0)).toBe(0x8000)
    expect(f32ToF16(-(2 ** -30))).toBe(0x8000)
    expect(f32ToF16(NaN)).toBe(0x7e00)
    expect(f32ToF16(bitsToF32(0xff800001))).toBe(0xfe00)
  })

  it('rounds the input to float32 first, as every kernel input is', () => {
    // 1 + 2^-11 + 2^-40 is above the tie as a double, but a tie once rounded to float32.
    expect(f32ToF16(1 + 2 ** -11 + 2 ** -40)).toBe(0x3c00)
  })

  it('encodes buffers like the scalar encoder and checks the output length', () => {
    const values = new Float32Array([0, -0, 1 + 2 ** -11, 65520, NaN, 2 ** -25, -3.5])
    expect([...encodeF16(values)]).toEqual([...values].map((v) => f32ToF16(v)))
    expect(() => encodeF16(values, new Uint16Array(3))).toThrow(NumericsError)
  })
})
