import { describe, expect, it } from 'vitest'
import { blockAmax, E2M1_AMAX_FLOOR, E4M3_AMAX_FLOOR, ue8m0BlockScale } from '../../src/numerics/block-scale.ts'
import { e8m0Ceil } from '../../src/numerics/e8m0.ts'
import { bitsToF32 } from '../../src/numerics/bits.ts'
import { scaleFromSpec } from './oracle.ts'

describe('blockAmax', () => {
  it('returns the largest magnitude of the range only', () => {
    const x = new Float32Array([100, -3, 2, -0, -7, 50])
    expect(blockAmax(x, 1, 5)).toBe(7)
    expect(blockAmax(x, 0, 6)).toBe(100)
    expect(blockAmax(new Float32Array([-0, 0]), 0, 2)).toBe(0)
    expect(blockAmax(new Float32Array([1, -Infinity]), 0, 2)).toBe(Infinity)
  })

  it('propagates NaN wherever it sits, as torch amax does', () => {
    for (const at of [0, 1, 2]) {
      const x = new Float32Array([5, 1, 3])
      x[at] = NaN
      expect(Number.isNaN(blockAmax(x, 0, 3))).toBe(true)
    }
  })
})

describe('ue8m0 block scale rule', () => {
  it('rounds amax / elementMax up to a power of two', () => {
    expect(ue8m0BlockScale(448, 448, E4M3_AMAX_FLOOR)).toBe(127)
    expect(ue8m0BlockScale(bitsToF32(0x43e00001), 448, E4M3_AMAX_FLOOR)).toBe(128) // just above 448
    expect(ue8m0BlockScale(224, 448, E4M3_AMAX_FLOOR)).toBe(126)
    expect(ue8m0BlockScale(300, 448, E4M3_AMAX_FLOOR)).toBe(127)
    expect(ue8m0BlockScale(6, 6, E2M1_AMAX_FLOOR)).toBe(127)
    expect(ue8m0BlockScale(6.5, 6, E2M1_AMAX_FLOOR)).toBe(128)
    expect(ue8m0BlockScale(3, 6, E2M1_AMAX_FLOOR)).toBe(126)
  })

  it('floors amax: 1e-4 for e4m3 (scale 2^-22), 6 * 2^-126 for e2m1 (scale 2^-126)', () => {
    expect(E4M3_AMAX_FLOOR).toBe(Math.fround(1e-4))
    for (const amax of [0, 1e-9, 9.9e-5]) expect(ue8m0BlockScale(amax, 448, E4M3_AMAX_FLOOR)).toBe(127 - 22)
    for (const amax of [0, bitsToF32(1), 2 ** -126]) expect(ue8m0BlockScale(amax, 6, E2M1_AMAX_FLOOR)).toBe(1)
    expect(ue8m0BlockScale(bitsToF32(0x7f7fffff), 6, E2M1_AMAX_FLOOR)).toBe(253) // float32 max / 6 -> 2^126
  })

  it('gives the NaN code for NaN or infinite amax', () => {
    expect(ue8m0BlockScale(NaN, 448, E4M3_AMAX_FLOOR)).toBe(255)
    expect(ue8m0BlockScale(Infinity, 6, E2M1_AMAX_FLOOR)).toBe(255)
  })

  // Multiplying by fround(1/M) and dividing by M could in principle pick different powers of two
  // right at a boundary. Over one whole binade every float32 amax must give the exact ceiling of
  // amax / M (the spec), which the division rule also gives; the rule is scale-invariant above
  // the floors, so one binade around each element maximum stands for all of them.
  for (const [elementMax, floor, binadeStart] of [[448, E4M3_AMAX_FLOOR, 256], [6, E2M1_AMAX_FLOOR, 4]]) {
    it(`equals the exact ceiling of amax / ${elementMax} for every float32 amax in [${binadeStart}, ${2 * binadeStart})`, () => {
      const p0 = scaleFromSpec(binadeStart, elementMax, floor)
      const bad: number[] = []
      const f = new Float32Array(1)
      const u = new Uint32Array(f.buffer)
      const first = Math.log2(binadeStart) + 127
      for (let m = 0; m < 2 ** 23; m++) {
        u[0] = ((first << 23) | m) >>> 0
        const amax = f[0]
        const exact = amax <= p0 * elementMax ? p0 : 2 * p0
        const code = ue8m0BlockScale(amax, elementMax, floor)
        if (code !== Math.log2(exact) + 127 || code !== e8m0Ceil(Math.fround(amax / elementMax))) bad.push(amax)
        if (bad.length > 5) break
      }
      expect(bad).toEqual([])
    })
  }
})
