// Independent test oracles for the number formats: the grid of representable magnitudes is
// listed by plain arithmetic, and the nearest grid point is chosen by comparing with the exact
// midpoint (ties to the even code). No bit tricks from src/numerics are reused here.
import { bitsToF32, f32ToBits } from '../../src/numerics/bits.ts'

/** The non-negative finite values of a format, in code order, and the value the next code would have. */
export interface Grid {
  /** magnitudes[c] is the value of magnitude code c; strictly increasing. */
  magnitudes: number[]
  /** Where the grid would continue past its largest finite value (the overflow boundary's far side). */
  beyond: number
}

/**
 * Grid of a binary float format listed the textbook way: subnormals m * 2^(1 - bias - manBits),
 * normals (1 + m / 2^manBits) * 2^(e - bias), for `finiteCount` codes.
 */
export function binaryGrid (expBits: number, manBits: number, bias: number, finiteCount: number): Grid {
  const magnitudes: number[] = []
  const perBinade = 2 ** manBits
  // One binade more than the format has, so the value past the last finite code exists.
  for (let e = 0; e <= 2 ** expBits; e++) {
    for (let m = 0; m < perBinade; m++) {
      const value = e === 0
        ? (m / perBinade) * Math.pow(2, 1 - bias)
        : (1 + m / perBinade) * Math.pow(2, e - bias)
      magnitudes.push(value)
    }
  }
  const next = magnitudes[finiteCount]
  return { magnitudes: magnitudes.slice(0, finiteCount), beyond: next }
}

/**
 * The magnitude code nearest to |x| (x a finite number), ties to the even code; returns
 * grid.magnitudes.length when |x| rounds past the largest finite value.
 */
export function nearestCode (grid: Grid, x: number): number {
  const ax = Math.abs(x)
  const m = grid.magnitudes
  const n = m.length
  if (ax >= grid.beyond) return n
  // Largest i with m[i] <= ax.
  let lo = 0
  let hi = n - 1
  while (lo < hi) {
    const mid = (lo + hi + 1) >> 1
    if (m[mid] <= ax) lo = mid
    else hi = mid - 1
  }
  if (m[lo] === ax) return lo
  const above = lo + 1 < n ? m[lo + 1] : grid.beyond
  const midpoint = (m[lo] + above) / 2 // exact: both are short dyadic numbers
  if (ax < midpoint) return lo
  if (ax > midpoint) return lo + 1
  return lo % 2 === 0 ? lo : lo + 1
}

/** The next float32 above x (x a finite float32). */
export function nextUpF32 (x: number): number {
  if (Object.is(x, -0) || x === 0) return bitsToF32(1)
  const bits = f32ToBits(x)
  return bitsToF32(x > 0 ? bits + 1 : bits - 1)
}

/** The next float32 below x (x a finite float32). */
export function nextDownF32 (x: number): number {
  return -nextUpF32(-x)
}

/**
 * Inputs where rounding to `grid` is decided: each grid value, each midpoint between neighbours
 * (including the one past the largest value) and the float32 values just either side, both signs.
 */
export function criticalInputs (grid: Grid): number[] {
  const out: number[] = []
  const m = [...grid.magnitudes, grid.beyond]
  for (let i = 0; i < m.length; i++) {
    const points = [m[i]]
    if (i + 1 < m.length) points.push((m[i] + m[i + 1]) / 2)
    for (const p of points) {
      const f = Math.fround(p)
      if (!Number.isFinite(f)) continue
      for (const v of [f, nextUpF32(f), f > 0 ? nextDownF32(f) : f]) out.push(v, -v)
    }
  }
  return out
}

/** Every `stride`-th float32 bit pattern starting at `offset`, as numbers (NaNs included). */
export function strideSweep (stride: number, offset = 0): Float32Array {
  const count = Math.floor((2 ** 32 - 1 - offset) / stride) + 1
  const out = new Float32Array(count)
  const bits = new Uint32Array(out.buffer)
  for (let i = 0; i < count; i++) bits[i] = offset + i * stride
  return out
}

/** The smallest power of two 2^k with 2^k >= v (v > 0), by exact comparisons only. */
export function ceilPow2 (v: number): number {
  let p = 1
  while (p < v) p *= 2
  while (p / 2 >= v) p /= 2
  return p
}

/** Is the sign bit of the float32 image of x set (works for NaN, unlike x < 0)? */
export function signBit (x: number): boolean {
  return (f32ToBits(x) >>> 31) === 1
}

/** The element formats of the block quantisers, as the tests see them. */
export const E4M3_GRID = binaryGrid(4, 3, 7, 0x7f)
export const E2M1_GRID = binaryGrid(2, 1, 1, 8)

/** The scale rule from the DeepSeek spec: smallest power of two p with p * elementMax >= max(amax, floor), exactly. */
export function scaleFromSpec (amax: number, elementMax: number, floor: number): number {
  const a = Math.max(amax, floor)
  let p = 1
  while (p * elementMax < a) p *= 2
  while ((p / 2) * elementMax >= a) p /= 2
  return p
}

/**
 * The quantise-dequantise round trip written from the spec with exact arithmetic: per block,
 * s = scaleFromSpec(amax); y = sign(x) * nearest grid value to min(|x| / s, max) * s, ties to even.
 * A block holding NaN or ±Inf comes back all NaN.
 */
export function roundTripFromSpec (x: Float32Array, block: number, grid: Grid, floor: number): Float32Array {
  const elementMax = grid.magnitudes[grid.magnitudes.length - 1]
  const out = new Float32Array(x.length)
  for (let start = 0; start < x.length; start += block) {
    const values = [...x.subarray(start, start + block)]
    if (values.some((v) => !Number.isFinite(v))) {
      out.fill(NaN, start, start + block)
      continue
    }
    const s = scaleFromSpec(Math.max(...values.map(Math.abs)), elementMax, floor)
    values.forEach((v, i) => {
      const q = Math.min(Math.abs(v) / s, elementMax)
      const magnitude = grid.magnitudes[Math.min(nearestCode(grid, q), grid.magnitudes.length - 1)] * s
      out[start + i] = signBit(v) ? -magnitude : magnitude
    })
  }
  return out
}

/** Half the e4m3 step at magnitude q: the largest error a round to nearest can make there. */
export function e4m3HalfStep (q: number): number {
  const a = Math.abs(q)
  if (a < 2 ** -6) return 2 ** -10
  let p = 2 ** -6
  while (p * 2 <= a) p *= 2
  return p / 16
}

/** Half the e2m1 step at magnitude q (steps 0.5 below 2, 1 below 4, 2 up to 6). */
export function e2m1HalfStep (q: number): number {
  const a = Math.abs(q)
  return a < 2 ? 0.25 : a < 4 ? 0.5 : 1
}

/** Bitwise equality of two float32 arrays (NaN equals NaN regardless of payload): indexes that differ. */
export function bitDiffs (a: Float32Array, b: Float32Array): number[] {
  const bad: number[] = []
  if (a.length !== b.length) return [-1]
  for (let i = 0; i < a.length; i++) {
    if (Number.isNaN(a[i]) && Number.isNaN(b[i])) continue
    if (f32ToBits(a[i]) !== f32ToBits(b[i])) bad.push(i)
  }
  return bad
}
