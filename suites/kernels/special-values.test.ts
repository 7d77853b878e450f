// Signed zeros, subnormals, overflow, infinities and NaN: exact, documented results in both paths.
import { describe, it, expect } from 'vitest'
import { CANONICAL_NAN_BITS, matmulBf16, matmulF32, reference } from '../../src/kernels/index.ts'
import { bitsToF32 } from '../../src/numerics/bits.ts'
import { bitReport, bitsOf, makeRng, SPECIAL_F32 } from './fixtures.ts'

const f = (...v: number[]) => Float32Array.from(v)

/** Both paths on a 1 x k by k x 1 product; returns [native, reference] results. */
function dot1 (x: Float32Array, w: Float32Array, roundBf16 = false): [Float32Array, Float32Array] {
  const k = x.length
  return [matmulF32(x, 1, k, w, 1, undefined, { roundBf16 }), reference.matmulF32(x, 1, k, w, 1, undefined, { roundBf16 })]
}

describe('matmul: every pair of special values, in the lane part and in the tail', () => {
  it('gives the same bits natively and in the reference', () => {
    // k = 9 puts index 0 in lane 0 and index 8 in the sequential tail.
    for (const a of SPECIAL_F32) {
      for (const b of SPECIAL_F32) {
        const x = f(a, 1, 1, 1, 1, 1, 1, 1, b)
        const w = f(b, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, a)
        const [got, want] = dot1(x, w)
        expect(bitReport(got, want), `a=${a} b=${b}`).toBe('identical')
        const [gotB, wantB] = dot1(x, w, true)
        expect(bitReport(gotB, wantB), `a=${a} b=${b} bf16`).toBe('identical')
      }
    }
  })
})

describe('matmul: signed zeros', () => {
  it('gives +0 when every product is -0, because the sums start from +0', () => {
    for (const k of [1, 8, 9]) {
      const x = new Float32Array(k).fill(-1)
      const w = new Float32Array(k).fill(0)
      for (const y of dot1(x, w)) expect(bitsOf(y), `k=${k}`).toEqual([0x00000000])
    }
  })
})

describe('matmul: subnormals are neither flushed nor treated as zero', () => {
  it('keeps a subnormal product and subnormal inputs, on the calling thread and in lanes', () => {
    // 2^-75 * 2^-74 = 2^-149, the smallest subnormal: flush-to-zero would give 0.
    for (const y of dot1(f(2 ** -75), f(2 ** -74))) expect(bitsOf(y)).toEqual([0x00000001])
    // 8 lanes of 2^-149 * 1 meet in the tree: 8 * 2^-149 = 2^-146 (bits 0x8).
    for (const y of dot1(new Float32Array(8).fill(2 ** -149), new Float32Array(8).fill(1))) expect(bitsOf(y)).toEqual([0x00000008])
  })
})

describe('matmul: overflow, infinities and NaN', () => {
  it('overflows a finite sum to +Inf and keeps -Inf', () => {
    for (const y of dot1(f(3e38, 3e38), f(1, 1))) expect(bitsOf(y)).toEqual([0x7f800000])
    for (const y of dot1(f(-Infinity, 1), f(2, 1))) expect(bitsOf(y)).toEqual([0xff800000])
  })

  it('writes the canonical quiet NaN (0x7fc00000) for Inf - Inf, 0 * Inf and NaN inputs of either sign', () => {
    const negativeNan = bitsToF32(0xffc00001)
    const cases: Array<[Float32Array, Float32Array]> = [
      [f(Infinity, -Infinity), f(1, 1)],
      [f(0), f(Infinity)],
      [f(NaN, 1, 2), f(1, 1, 1)],
      [f(negativeNan), f(-1)],
      [new Float32Array(16).fill(1).map((v, i) => (i === 5 ? Infinity : i === 13 ? -Infinity : v)), new Float32Array(16).fill(1)],
    ]
    for (const [x, w] of cases) {
      for (const roundBf16 of [false, true]) {
        for (const y of dot1(x, w, roundBf16)) expect(bitsOf(y), `x=${Array.from(x)} bf16=${roundBf16}`).toEqual([CANONICAL_NAN_BITS])
      }
    }
  })

  it('propagates a NaN weight code through the bf16 weight path', () => {
    const x = f(1, 2, 3)
    const w = Uint16Array.from([0x3f80, 0xffc1, 0x3f80]) // 1, -NaN with payload, 1
    expect(bitsOf(matmulBf16(x, 1, 3, w, 1))).toEqual([CANONICAL_NAN_BITS])
    expect(bitsOf(reference.matmulBf16(x, 1, 3, w, 1))).toEqual([CANONICAL_NAN_BITS])
  })
})

describe('matmul: bf16 output rounding', () => {
  it('rounds to nearest even, and the largest float32 rounds up to +Inf', () => {
    const cases: Array<[number, number]> = [
      [bitsToF32(0x3f808000), 0x3f800000], // tie, lower code even: down
      [bitsToF32(0x3f818000), 0x3f820000], // tie, lower code odd: up
      [bitsToF32(0x3f808001), 0x3f810000], // above the tie: up
      [3.4028234663852886e38, 0x7f800000],
      [bitsToF32(0x00008000), 0x00000000], // subnormal tie to even (zero)
    ]
    for (const [v, want] of cases) {
      for (const y of dot1(f(v), f(1), true)) expect(bitsOf(y), `v=${v}`).toEqual([want])
    }
  })
})

describe('matmul: random special-heavy inputs', () => {
  it('agree natively and in the reference for many shapes', () => {
    const rng = makeRng(77)
    for (let t = 0; t < 200; t++) {
      const m = 1 + Math.floor(rng() * 4)
      const n = 1 + Math.floor(rng() * 9)
      const k = Math.floor(rng() * 40)
      const pick = () => SPECIAL_F32[Math.floor(rng() * SPECIAL_F32.length)]
      const x = Float32Array.from({ length: m * k }, pick)
      const w = Float32Array.from({ length: n * k }, pick)
      expect(bitReport(matmulF32(x, m, k, w, n), reference.matmulF32(x, m, k, w, n)), `t=${t}`).toBe('identical')
    }
  })
})
