import { describe, expect, it } from 'vitest'
import fc from 'fast-check'
import { NumericsError } from '../../src/errors.ts'
import { E4M3_VALUES } from '../../src/numerics/e4m3.ts'
import {
  dequantizeFp8BlockWeight, fp8WeightScaleShape, quantizeFp8BlockWeight,
} from '../../src/numerics/fp8-block-weight.ts'
import { bitDiffs, e4m3HalfStep } from './oracle.ts'

/** A deterministic matrix with a wide spread of magnitudes (a tiny LCG; no randomness in the suite). */
function matrix (rows: number, cols: number, seed: number): Float32Array {
  const out = new Float32Array(rows * cols)
  let state = seed >>> 0
  for (let i = 0; i < out.length; i++) {
    state = (Math.imul(state, 1664525) + 1013904223) >>> 0
    out[i] = ((state / 2 ** 32) - 0.5) * 2 ** ((state & 31) - 12)
  }
  return out
}

/** Scale of the tile holding (r, c), as a number. */
function tileScale (q: ReturnType<typeof quantizeFp8BlockWeight>, r: number, c: number): number {
  const [, tileCols] = fp8WeightScaleShape(q.rows, q.cols)
  const s = Math.floor(r / 128) * tileCols + Math.floor(c / 128)
  return q.scaleFormat === 'f32' ? q.scales[s] : 2 ** (q.scales[s] - 127)
}

describe('fp8 block weight shapes', () => {
  it('has one scale per 128x128 tile, partial edge tiles included', () => {
    expect(fp8WeightScaleShape(1, 1)).toEqual([1, 1])
    expect(fp8WeightScaleShape(128, 128)).toEqual([1, 1])
    expect(fp8WeightScaleShape(129, 257)).toEqual([2, 3])
    expect(fp8WeightScaleShape(0, 5)).toEqual([0, 1])
    for (const format of ['f32', 'ue8m0'] as const) {
      const q = quantizeFp8BlockWeight(matrix(300, 130, 1), 300, 130, format)
      expect(q.codes.length).toBe(300 * 130)
      expect(q.scales.length).toBe(3 * 2)
    }
  })

  it('rejects shapes and buffers that do not fit', () => {
    expect(() => quantizeFp8BlockWeight(new Float32Array(10), 3, 3, 'f32')).toThrow(/10 values do not fill shape \[3, 3\]/)
    expect(() => quantizeFp8BlockWeight(new Float32Array(0), -1, 0, 'f32')).toThrow(NumericsError)
    expect(() => quantizeFp8BlockWeight(new Float32Array(4), 2, 2, 'bf16' as 'f32')).toThrow(/unknown scale format/)
    const q = quantizeFp8BlockWeight(new Float32Array(4), 2, 2, 'ue8m0')
    expect(() => dequantizeFp8BlockWeight({ ...q, scales: new Uint8Array(2) })).toThrow(/needs 1x1 scales, got 2/)
    expect(() => dequantizeFp8BlockWeight({ ...q, codes: new Uint8Array(3) })).toThrow(NumericsError)
    expect(() => dequantizeFp8BlockWeight(q, new Float32Array(5))).toThrow(NumericsError)
  })
})

describe('fp8 block weight scales', () => {
  it('uses amax / 448 in float32, or its power-of-two ceiling for ue8m0, per tile', () => {
    const w = new Float32Array(130 * 2)
    w[0] = 448 * 3 // tile (0, 0)
    w[129] = -7 // tile (0, 1), amax 7
    const f = quantizeFp8BlockWeight(w, 2, 130, 'f32')
    expect([...f.scales]).toEqual([3, Math.fround(7 / 448)])
    const u = quantizeFp8BlockWeight(w, 2, 130, 'ue8m0')
    expect([...u.scales]).toEqual([127 + 2, 127 - 6]) // 3 -> 4; 7/448 = 2^-6 exactly
  })

  it('gives all-zero tiles the floor scale (2^-126, or 2^-22 for ue8m0) and zero codes', () => {
    const w = new Float32Array(200 * 200)
    w[0] = 1 // only tile (0, 0) is non-zero
    const f = quantizeFp8BlockWeight(w, 200, 200, 'f32')
    expect([...f.scales.subarray(1)]).toEqual([2 ** -126, 2 ** -126, 2 ** -126])
    const u = quantizeFp8BlockWeight(w, 200, 200, 'ue8m0')
    expect([...u.scales.subarray(1)]).toEqual([105, 105, 105])
    expect(f.codes.subarray(1).every((c) => c === 0)).toBe(true)
    expect(dequantizeFp8BlockWeight(u).subarray(1).every((v) => v === 0)).toBe(true)
  })

  it('marks a tile holding NaN or Inf with a NaN scale and NaN codes', () => {
    const w = new Float32Array(4 * 130)
    w[129] = Infinity
    const f = quantizeFp8BlockWeight(w, 4, 130, 'f32')
    expect(Number.isNaN(f.scales[1])).toBe(true)
    const u = quantizeFp8BlockWeight(w, 4, 130, 'ue8m0')
    expect(u.scales[1]).toBe(255)
    const y = dequantizeFp8BlockWeight(u)
    expect(y[0]).toBe(0)
    expect(Number.isNaN(y[128]) && Number.isNaN(y[3 * 130 + 129])).toBe(true)
  })
})

describe('fp8 block weight dequantisation', () => {
  it('multiplies each code by its own tile scale', () => {
    const codes = new Uint8Array(2 * 130).fill(0x38) // every element 1.0
    const y = dequantizeFp8BlockWeight({ scaleFormat: 'f32', rows: 2, cols: 130, codes, scales: new Float32Array([2, 0.5]) })
    expect([y[0], y[127], y[128], y[129], y[130 + 127], y[130 + 128]]).toEqual([2, 2, 0.5, 0.5, 2, 0.5])
    const z = dequantizeFp8BlockWeight({ scaleFormat: 'ue8m0', rows: 2, cols: 130, codes, scales: new Uint8Array([130, 120]) })
    expect([z[127], z[128]]).toEqual([8, 2 ** -7])
  })
})

describe('fp8 block weight round trip of representable values', () => {
  it('is exact for ue8m0 tiles reaching ±448 * 2^k', () => {
    fc.assert(fc.property(fc.integer({ min: -20, max: 20 }), fc.integer({ min: 1, max: 300 }), (k, cols) => {
      const rows = 3
      const codes = new Uint8Array(rows * cols).map((_, i) => (i * 37) & 0xff).map((c) => (c & 0x7f) === 0x7f ? 0x7e : c)
      for (let c = 0; c < cols; c += 128) codes[c] = 0xfe // each tile column reaches -448
      const w = new Float32Array([...codes].map((c) => E4M3_VALUES[c] * 2 ** k))
      const q = quantizeFp8BlockWeight(w, rows, cols, 'ue8m0')
      return q.scales.every((s) => s === 127 + k) && q.codes.every((c, i) => c === codes[i]) &&
        bitDiffs(dequantizeFp8BlockWeight(q), w).length === 0
    }), { numRuns: 200 })
  })

  it('is exact for float32 tiles whose scale times every e4m3 value is a float32', () => {
    // s has an 11-bit significand, so s * (4-bit e4m3 significand) fits float32 exactly,
    // amax = 448 * s is a float32, and fround(amax / 448) gives s back.
    fc.assert(fc.property(fc.integer({ min: 0, max: 1023 }), fc.integer({ min: -30, max: 30 }), (m, k) => {
      const s = (1 + m / 1024) * 2 ** k
      const codes = new Uint8Array(5 * 140).map((_, i) => (i * 53 + 1) & 0xff).map((c) => (c & 0x7f) === 0x7f ? 0x7e : c)
      codes[0] = 0x7e
      codes[128] = 0x7e
      const w = new Float32Array([...codes].map((c) => E4M3_VALUES[c] * s))
      const q = quantizeFp8BlockWeight(w, 5, 140, 'f32')
      return q.scales.every((v) => v === s) && q.codes.every((c, i) => c === codes[i]) &&
        bitDiffs(dequantizeFp8BlockWeight(q), w).length === 0
    }), { numRuns: 300 })
  })
})

describe('fp8 block weight error bound', () => {
  const shapes: Array<[number, number]> = [[1, 1], [7, 300], [129, 131], [256, 64]]

  it('ue8m0: |w - deq| <= half an e4m3 step at w / s, times s (exact: s is a power of two)', () => {
    for (const [rows, cols] of shapes) {
      const w = matrix(rows, cols, rows * 1000 + cols)
      const q = quantizeFp8BlockWeight(w, rows, cols, 'ue8m0')
      const y = dequantizeFp8BlockWeight(q)
      const bad: number[] = []
      for (let r = 0; r < rows; r++) {
        for (let c = 0; c < cols; c++) {
          const i = r * cols + c
          const s = tileScale(q, r, c)
          if (Math.abs(w[i] - y[i]) > e4m3HalfStep(w[i] / s) * s) bad.push(i)
        }
      }
      expect(bad).toEqual([])
    }
  })

  it('f32: the same bound plus the two float32 roundings (of w / s and of code * s)', () => {
    for (const [rows, cols] of shapes) {
      const w = matrix(rows, cols, rows * 7 + cols)
      const q = quantizeFp8BlockWeight(w, rows, cols, 'f32')
      const y = dequantizeFp8BlockWeight(q)
      const bad: number[] = []
      for (let r = 0; r < rows; r++) {
        for (let c = 0; c < cols; c++) {
          const i = r * cols + c
          const s = tileScale(q, r, c)
          // Each float32 rounding errs by at most 2^-24 relative; 2^-23 of |w| + |y| covers both.
          const slack = (Math.abs(w[i]) + Math.abs(y[i])) * 2 ** -23
          if (Math.abs(w[i] - y[i]) > e4m3HalfStep(w[i] / s) * s + slack) bad.push(i)
        }
      }
      expect(bad).toEqual([])
    }
  })

  it('leaves tiles independent: changing one tile changes no other tile', () => {
    const w = matrix(200, 300, 9)
    const before = quantizeFp8BlockWeight(w, 200, 300, 'ue8m0')
    w[150 * 300 + 260] = 1e6 // tile (1, 2)
    const after = quantizeFp8BlockWeight(w, 200, 300, 'ue8m0')
    const changedScales = [...after.scales].flatMap((s, i) => s !== before.scales[i] ? [i] : [])
    expect(changedScales).toEqual([5])
    const changedOutside = [...after.codes].filter((c, i) => c !== before.codes[i] && !(Math.floor(i / 300) >= 128 && i % 300 >= 256)).length
    expect(changedOutside).toBe(0)
  })
})
