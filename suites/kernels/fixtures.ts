// Seeded inputs and bit comparison helpers for the kernel suites.
import { f32ToBf16 } from '../../src/numerics/bf16.ts'

/** A small seeded PRNG (mulberry32): the same seed gives the same inputs on every run. */
export function makeRng (seed: number): () => number {
  let a = seed >>> 0
  return () => {
    a = (a + 0x6d2b79f5) >>> 0
    let t = a
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
}

/** Uniform float32 values in [-scale, scale). */
export function uniformF32 (n: number, rng: () => number, scale = 1): Float32Array {
  const out = new Float32Array(n)
  for (let i = 0; i < n; i++) out[i] = (rng() * 2 - 1) * scale
  return out
}

/** Float32 values with random signs and exponents spread over 2^-20 .. 2^20 (cancellation-heavy sums). */
export function wideF32 (n: number, rng: () => number): Float32Array {
  const out = new Float32Array(n)
  for (let i = 0; i < n; i++) out[i] = (rng() < 0.5 ? -1 : 1) * (1 + rng()) * 2 ** Math.floor(rng() * 41 - 20)
  return out
}

/** Values a kernel must treat exactly: signed zeros, subnormals, extremes, infinities, NaN. */
export const SPECIAL_F32: readonly number[] = [
  0, -0, 2 ** -149, -(2 ** -149), 2 ** -126 - 2 ** -149, 2 ** -126, 1e-30,
  3.4028234663852886e38, -3.4028234663852886e38, 1e30, -1e30, Infinity, -Infinity, NaN, 1, -1,
]

/** Mostly ordinary values, with a `specialRate` share drawn from SPECIAL_F32. */
export function mixedF32 (n: number, rng: () => number, specialRate = 0.1): Float32Array {
  const out = new Float32Array(n)
  for (let i = 0; i < n; i++) {
    out[i] = rng() < specialRate
      ? SPECIAL_F32[Math.floor(rng() * SPECIAL_F32.length)]
      : (rng() * 2 - 1) * 2 ** Math.floor(rng() * 9 - 4)
  }
  return out
}

/** bf16 codes of uniform values in [-scale, scale). */
export function bf16Codes (n: number, rng: () => number, scale = 1): Uint16Array {
  const out = new Uint16Array(n)
  for (let i = 0; i < n; i++) out[i] = f32ToBf16((rng() * 2 - 1) * scale)
  return out
}

/** Index of the first element whose bits differ, or -1 when the two arrays are bit-identical. */
export function firstBitDifference (a: Float32Array, b: Float32Array): number {
  if (a.length !== b.length) return Math.min(a.length, b.length)
  const ua = new Uint32Array(a.buffer, a.byteOffset, a.length)
  const ub = new Uint32Array(b.buffer, b.byteOffset, b.length)
  for (let i = 0; i < ua.length; i++) if (ua[i] !== ub[i]) return i
  return -1
}

/** A readable description of the first bit difference (for assertion messages). */
export function bitReport (a: Float32Array, b: Float32Array): string {
  const i = firstBitDifference(a, b)
  if (i < 0) return 'identical'
  if (a.length !== b.length) return `lengths differ: ${a.length} vs ${b.length}`
  const ba = new Uint32Array(a.buffer, a.byteOffset, a.length)[i]
  const bb = new Uint32Array(b.buffer, b.byteOffset, b.length)[i]
  return `first difference at ${i}: ${a[i]} (0x${ba.toString(16)}) vs ${b[i]} (0x${bb.toString(16)})`
}

/** The float32 bit pattern of every element, for exact expectations. */
export function bitsOf (a: Float32Array): number[] {
  return Array.from(new Uint32Array(a.buffer, a.byteOffset, a.length))
}

/** Unit roundoff of float32. */
export const U = 2 ** -24

/** gamma_L = L u / (1 - L u): the classic bound on L chained float32 roundings (Higham, ch. 3). */
export function gamma (l: number): number {
  return (l * U) / (1 - l * U)
}

/** The spacing of the float32 grid at |r| (2^-149 in the subnormal range). */
export function ulpAt (r: number): number {
  const a = Math.abs(r)
  if (a < 2 ** -126) return 2 ** -149
  let e = Math.floor(Math.log2(a))
  if (2 ** e > a) e -= 1
  else if (2 ** (e + 1) <= a) e += 1
  return 2 ** (e - 23)
}

/**
 * Error of the float32 result y against the exact (float64) r, in float32 ulps at r. An Inf
 * result counts as exact when r is at or beyond the overflow rounding boundary 2^128 - 2^103.
 */
export function ulpError (y: number, r: number): number {
  if (Number.isNaN(r)) return Number.isNaN(y) ? 0 : Infinity
  if (Number.isNaN(y)) return Infinity
  const big = 2 ** 128 - 2 ** 103
  if (Math.abs(r) >= big) return (y === Infinity * Math.sign(r)) ? 0 : (Math.abs(r) - Math.abs(y)) / 2 ** 104
  if (!Number.isFinite(y)) return (2 ** 128 - Math.abs(r)) / 2 ** 104
  return Math.abs(y - r) / ulpAt(r)
}

/** Float32 values from uniformly random bit patterns (every exponent equally likely), NaN skipped. */
export function randomBitsF32 (n: number, rng: () => number): Float32Array {
  const bits = new Uint32Array(n)
  for (let i = 0; i < n; i++) {
    let b: number
    do b = Math.floor(rng() * 4294967296) >>> 0
    while ((b & 0x7f800000) === 0x7f800000 && (b & 0x7fffff) !== 0)
    bits[i] = b
  }
  return new Float32Array(bits.buffer)
}

/**
 * n seeded values in about [-1, 1) with every 13th scaled by 1e4; with `special`, every 97th
 * (offset 5) one of +-Inf, NaN, +-0, 1e38 or a subnormal.
 */
export function mixedValues (n: number, seed: number, special: boolean): Float32Array {
  const rng = makeRng(seed)
  const a = new Float32Array(n)
  for (let i = 0; i < n; i++) {
    const r = rng()
    a[i] = special && i % 97 === 5 ? [Infinity, -Infinity, NaN, 0, -0, 1e38, 1e-40][i % 7] : (r - 0.5) * (i % 13 === 0 ? 1e4 : 2)
  }
  return a
}

/** How many elements of a and b differ in their bits. */
export function differingBits (a: Float32Array, b: Float32Array): number {
  const x = new Uint32Array(a.buffer, a.byteOffset, a.length)
  const y = new Uint32Array(b.buffer, b.byteOffset, b.length)
  let n = 0
  for (let i = 0; i < x.length; i++) if (x[i] !== y[i]) n++
  return n
}
