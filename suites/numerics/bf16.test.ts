import { describe, expect, it } from 'vitest'
import fc from 'fast-check'
import { bitsToF32 } from '../../src/numerics/bits.ts'
import { BF16_QUIET_NAN, bf16ToF32, decodeBf16, encodeBf16, f32ToBf16, roundBf16 } from '../../src/numerics/bf16.ts'
import { binaryGrid, criticalInputs, nearestCode, signBit } from './oracle.ts'

// bf16: 8 exponent bits (bias 127), 7 mantissa bits; codes 0x7f80 and up are Inf/NaN.
const grid = binaryGrid(8, 7, 127, 0x7f80)

/** What f32ToBf16 must return for a float32 x, from the oracle grid. */
function expectedBf16 (x: number): number {
  const sign = signBit(x) ? 0x8000 : 0
  if (Number.isNaN(x)) return sign | BF16_QUIET_NAN
  const code = nearestCode(grid, x)
  return sign | (code >= 0x7f80 ? 0x7f80 : code)
}

describe('bf16 decode', () => {
  it('gives every one of the 65,536 codes its textbook value', () => {
    const bad: number[] = []
    for (let code = 0; code < 0x10000; code++) {
      const magnitude = code & 0x7fff
      const got = bf16ToF32(code)
      if (magnitude > 0x7f80) {
        if (!Number.isNaN(got)) bad.push(code)
        continue
      }
      const value = magnitude === 0x7f80 ? Infinity : grid.magnitudes[magnitude]
      if (!Object.is(got, code & 0x8000 ? -value : value)) bad.push(code)
    }
    expect(bad).toEqual([])
  })

  it('decodes buffers to the same bits as the scalar decoder', () => {
    const codes = new Uint16Array(0x10000).map((_, i) => i)
    const bits = new Uint32Array(decodeBf16(codes).buffer)
    const bad = [...codes].filter((code) => bits[code] !== (code << 16) >>> 0)
    expect(bad).toEqual([])
  })
})

describe('bf16 decode then encode', () => {
  it('returns every code to itself; NaN codes become the quiet NaN with their sign', () => {
    const bad: number[] = []
    for (let code = 0; code < 0x10000; code++) {
      const isNaN = (code & 0x7fff) > 0x7f80
      const expected = isNaN ? (code & 0x8000) | BF16_QUIET_NAN : code
      if (f32ToBf16(bf16ToF32(code)) !== expected) bad.push(code)
    }
    expect(bad).toEqual([])
  })
})

describe('bf16 encode rounds to nearest, ties to even', () => {
  it('sends exact halfway cases to the even neighbour, both ways', () => {
    // 1 + 2^-8 lies halfway between 1 (0x3f80, even) and 1 + 2^-7 (0x3f81): goes down.
    expect(f32ToBf16(1 + 2 ** -8)).toBe(0x3f80)
    // 1 + 3 * 2^-8 lies halfway between 0x3f81 (odd) and 0x3f82 (even): goes up.
    expect(f32ToBf16(1 + 3 * 2 ** -8)).toBe(0x3f82)
    expect(f32ToBf16(-(1 + 2 ** -8))).toBe(0xbf80)
    expect(f32ToBf16(-(1 + 3 * 2 ** -8))).toBe(0xbf82)
    // One float32 ulp either side of a tie is no longer a tie.
    expect(f32ToBf16(bitsToF32(0x3f808001))).toBe(0x3f81)
    expect(f32ToBf16(bitsToF32(0x3f817fff))).toBe(0x3f81)
  })

  it('carries a mantissa overflow into the exponent', () => {
    // 2 - 2^-8 is halfway between 2 - 2^-7 (0x3fff, odd) and 2 (0x4000): goes up to 2.
    expect(f32ToBf16(2 - 2 ** -8)).toBe(0x4000)
  })

  it('matches the exact-arithmetic oracle at every decision point and across the float32 space', () => {
    const inputs = criticalInputs(grid)
    // Every bf16 code's upper half with low halves around the rounding point.
    const lows = [0x0000, 0x0001, 0x7fff, 0x8000, 0x8001, 0xffff, 0x4321]
    for (let high = 0; high < 0x10000; high++) {
      for (const low of lows) inputs.push(bitsToF32(((high << 16) | low) >>> 0))
    }
    const bad = inputs.filter((x) => f32ToBf16(x) !== expectedBf16(x))
    expect(bad).toEqual([])
  })

  it('matches the oracle on random float32 values', () => {
    fc.assert(fc.property(fc.float(), (x) => f32ToBf16(x) === expectedBf16(x)), { numRuns: 20_000 })
  })
})

describe('bf16 overflow', () => {
  it('rounds to Inf from halfway past the largest finite value, and not before', () => {
    const max = bf16ToF32(0x7f7f) // (2 - 2^-7) * 2^127
    expect(f32ToBf16(max)).toBe(0x7f7f)
    expect(f32ToBf16(bitsToF32(0x7f7f7fff))).toBe(0x7f7f)
    expect(f32ToBf16(bitsToF32(0x7f7f8000))).toBe(0x7f80) // tie, 0x7f7f is odd
    expect(f32ToBf16(bitsToF32(0x7f7fffff))).toBe(0x7f80) // float32 max
    expect(f32ToBf16(bitsToF32(0xff7fffff))).toBe(0xff80)
    expect(f32ToBf16(Infinity)).toBe(0x7f80)
    expect(f32ToBf16(-Infinity)).toBe(0xff80)
  })
})

describe('bf16 subnormals and signed zero', () => {
  it('rounds float32 subnormals onto the bf16 subnormal grid', () => {
    expect(f32ToBf16(bitsToF32(0x00008000))).toBe(0x0000) // halfway 0..2^-133, to even 0
    expect(f32ToBf16(bitsToF32(0x00008001))).toBe(0x0001)
    expect(f32ToBf16(bitsToF32(0x00018000))).toBe(0x0002) // halfway 0x0001..0x0002, to even
    expect(f32ToBf16(bitsToF32(0x007fffff))).toBe(0x0080) // largest subnormal rounds up to 2^-126
    expect(bf16ToF32(0x0001)).toBe(2 ** -133)
  })

  it('keeps the sign of zero', () => {
    expect(f32ToBf16(-0)).toBe(0x8000)
    expect(Object.is(bf16ToF32(0x8000), -0)).toBe(true)
    expect(f32ToBf16(bitsToF32(0x80008000))).toBe(0x8000) // tiny negative rounds to -0
    expect(Object.is(roundBf16(-(2 ** -140)), -0)).toBe(true)
  })
})

describe('bf16 NaN', () => {
  it('writes the canonical quiet NaN and keeps the sign', () => {
    expect(f32ToBf16(NaN)).toBe(0x7fc0)
    expect(f32ToBf16(bitsToF32(0x7f800001))).toBe(0x7fc0) // signalling payload in the low half
    expect(f32ToBf16(bitsToF32(0xffc00000))).toBe(0xffc0)
    expect(f32ToBf16(bitsToF32(0xff800001))).toBe(0xffc0)
  })
})

describe('bf16 buffer encode', () => {
  it('agrees with the scalar encoder', () => {
    const values = new Float32Array([0, -0, 1 + 2 ** -8, 3.14159, -65504, Infinity, NaN, 1e-40])
    const codes = encodeBf16(values)
    expect([...codes]).toEqual([...values].map((v) => f32ToBf16(v)))
  })
})
