import { describe, expect, it } from 'vitest'
import fc from 'fast-check'
import { NumericsError } from '../../src/errors.ts'
import { bitsToF32 } from '../../src/numerics/bits.ts'
import {
  decodeE4m3, E4M3_MAX, E4M3_VALUES, e4m3ToF32, encodeE4m3, encodeE4m3NoSat, f32ToE4m3,
  f32ToE4m3NoSat, roundE4m3,
} from '../../src/numerics/e4m3.ts'
import { binaryGrid, criticalInputs, nearestCode, nextDownF32, nextUpF32, signBit, strideSweep } from './oracle.ts'

// e4m3fn: 4 exponent bits (bias 7), 3 mantissa bits; magnitude codes 0..0x7e finite, 0x7f NaN.
// The grid's "beyond" value is 480, what code 0x7f would be without the NaN.
const grid = binaryGrid(4, 3, 7, 0x7f)

function expected (x: number, saturate: boolean): number {
  const sign = signBit(x) ? 0x80 : 0
  if (Number.isNaN(x)) return sign | 0x7f
  if (!Number.isFinite(x)) return sign | (saturate ? 0x7e : 0x7f)
  const code = nearestCode(grid, x)
  if (code > 0x7e) return sign | (saturate ? 0x7e : 0x7f)
  return sign | code
}

describe('e4m3 decode', () => {
  it('gives every one of the 256 codes its textbook value', () => {
    expect(grid.beyond).toBe(480)
    for (let code = 0; code < 256; code++) {
      const magnitude = code & 0x7f
      if (magnitude === 0x7f) {
        expect(Number.isNaN(e4m3ToF32(code))).toBe(true)
        continue
      }
      const value = grid.magnitudes[magnitude]
      expect(Object.is(e4m3ToF32(code), code & 0x80 ? -value : value)).toBe(true)
    }
  })

  it('knows the landmarks', () => {
    expect(e4m3ToF32(0x7e)).toBe(448)
    expect(E4M3_MAX).toBe(448)
    expect(e4m3ToF32(0xfe)).toBe(-448)
    expect(e4m3ToF32(0x01)).toBe(2 ** -9) // smallest subnormal, 2^-6 * 1/8
    expect(e4m3ToF32(0x07)).toBe(7 * 2 ** -9) // largest subnormal
    expect(e4m3ToF32(0x08)).toBe(2 ** -6) // smallest normal
    expect(e4m3ToF32(0x38)).toBe(1)
    expect(e4m3ToF32(0x77)).toBe(240)
    expect(Object.is(e4m3ToF32(0x80), -0)).toBe(true)
    expect(signBit(e4m3ToF32(0xff))).toBe(true)
    expect(signBit(e4m3ToF32(0x7f))).toBe(false)
  })

  it('decodes buffers through the same table, and rejects bad codes', () => {
    const codes = new Uint8Array(256).map((_, i) => i)
    const values = decodeE4m3(codes)
    for (let c = 0; c < 256; c++) expect(Object.is(values[c], E4M3_VALUES[c])).toBe(true)
    expect(() => e4m3ToF32(256)).toThrow(NumericsError)
    expect(() => e4m3ToF32(-1)).toThrow(/e4m3: code -1/)
    expect(() => decodeE4m3(codes, new Float32Array(10))).toThrow(NumericsError)
  })
})

describe('e4m3 decode then encode', () => {
  it('returns all 256 codes to themselves in both overflow modes (NaN keeps its sign)', () => {
    for (let code = 0; code < 256; code++) {
      expect(f32ToE4m3(e4m3ToF32(code))).toBe(code)
      expect(f32ToE4m3NoSat(e4m3ToF32(code))).toBe(code)
    }
  })
})

describe('e4m3 encode rounds to nearest, ties to even', () => {
  it('handles ties in the normal range', () => {
    expect(f32ToE4m3(1 + 1 / 16)).toBe(0x38) // halfway 1 (0x38, even) and 1.125 (0x39)
    expect(f32ToE4m3(1 + 3 / 16)).toBe(0x3a) // halfway 0x39 and 0x3a (even)
    expect(f32ToE4m3(nextUpF32(1 + 1 / 16))).toBe(0x39)
    expect(f32ToE4m3(-(1 + 3 / 16))).toBe(0xba)
    expect(f32ToE4m3(15.5)).toBe(0x58) // halfway 15 (0x57, odd) and 16 (0x58): carries into the exponent
  })

  it('handles the subnormal range and its boundary with the normals', () => {
    expect(f32ToE4m3(2 ** -10)).toBe(0x00) // halfway 0 and 2^-9
    expect(f32ToE4m3(nextUpF32(2 ** -10))).toBe(0x01)
    expect(f32ToE4m3(3 * 2 ** -10)).toBe(0x02) // halfway 0x01 and 0x02
    expect(f32ToE4m3(15 * 2 ** -10)).toBe(0x08) // halfway 7*2^-9 (0x07) and 2^-6 (0x08)
    expect(f32ToE4m3(nextDownF32(15 * 2 ** -10))).toBe(0x07)
    expect(f32ToE4m3(2 ** -6)).toBe(0x08)
    expect(f32ToE4m3(1e-30)).toBe(0x00)
    expect(f32ToE4m3(-1e-30)).toBe(0x80)
    expect(f32ToE4m3(bitsToF32(1))).toBe(0x00) // float32 subnormal
  })

  it('matches the exact-arithmetic oracle at every decision point and across the float32 space', () => {
    const inputs = [...criticalInputs(grid), ...strideSweep(8191), ...strideSweep(65537, 12345)]
    const badSat = inputs.filter((x) => f32ToE4m3(x) !== expected(x, true))
    const badNoSat = inputs.filter((x) => f32ToE4m3NoSat(x) !== expected(x, false))
    expect(badSat).toEqual([])
    expect(badNoSat).toEqual([])
  })

  it('matches the oracle on random float32 values', () => {
    fc.assert(fc.property(fc.float(), (x) =>
      f32ToE4m3(x) === expected(x, true) && f32ToE4m3NoSat(x) === expected(x, false)), { numRuns: 20_000 })
  })
})

describe('e4m3 overflow: saturating cast', () => {
  it('clamps everything past 448 to ±448, Inf included, and keeps NaN', () => {
    expect(f32ToE4m3(448)).toBe(0x7e)
    expect(f32ToE4m3(463.99)).toBe(0x7e)
    expect(f32ToE4m3(464)).toBe(0x7e)
    expect(f32ToE4m3(nextUpF32(464))).toBe(0x7e)
    expect(f32ToE4m3(480)).toBe(0x7e)
    expect(f32ToE4m3(1e30)).toBe(0x7e)
    expect(f32ToE4m3(-1e30)).toBe(0xfe)
    expect(f32ToE4m3(Infinity)).toBe(0x7e)
    expect(f32ToE4m3(-Infinity)).toBe(0xfe)
    expect(f32ToE4m3(NaN)).toBe(0x7f)
    expect(f32ToE4m3(bitsToF32(0xffc00000))).toBe(0xff)
    expect(roundE4m3(1000)).toBe(448)
  })
})

describe('e4m3 overflow: torch plain cast (no saturation)', () => {
  it('keeps 448 up to and including the 464 tie, then gives NaN', () => {
    expect(f32ToE4m3NoSat(448)).toBe(0x7e)
    expect(f32ToE4m3NoSat(463.99)).toBe(0x7e)
    expect(f32ToE4m3NoSat(464)).toBe(0x7e) // tie between 448 (0x7e, even) and would-be 480 (0x7f)
    expect(f32ToE4m3NoSat(nextUpF32(464))).toBe(0x7f)
    expect(f32ToE4m3NoSat(-nextUpF32(464))).toBe(0xff)
    expect(f32ToE4m3NoSat(480)).toBe(0x7f)
    expect(f32ToE4m3NoSat(1e30)).toBe(0x7f)
    expect(f32ToE4m3NoSat(Infinity)).toBe(0x7f)
    expect(f32ToE4m3NoSat(-Infinity)).toBe(0xff)
    expect(f32ToE4m3NoSat(NaN)).toBe(0x7f)
  })

  it('differs from the saturating cast exactly when |x| > 464', () => {
    fc.assert(fc.property(fc.float({ noNaN: true }), (x) => {
      const differ = f32ToE4m3(x) !== f32ToE4m3NoSat(x)
      return differ === (Math.abs(x) > 464)
    }), { numRuns: 5_000 })
  })
})

describe('e4m3 buffer encoders', () => {
  it('agree with the scalar encoders and check the output length', () => {
    const values = new Float32Array([0, -0, 1 + 1 / 16, 464, 465, -1e9, NaN, Infinity])
    expect([...encodeE4m3(values)]).toEqual([...values].map((v) => f32ToE4m3(v)))
    expect([...encodeE4m3NoSat(values)]).toEqual([...values].map((v) => f32ToE4m3NoSat(v)))
    expect(() => encodeE4m3(values, new Uint8Array(1))).toThrow(NumericsError)
  })
})
