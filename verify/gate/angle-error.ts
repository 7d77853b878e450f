// How far apart two rope tables rotate, as a function of position. At position p pair k turns by
// angle = fp32(fp32(p) * inv_freq[k]) (exactly as ropeTable computes it); the error of a pair is the
// difference of the two angles wrapped to [-pi, pi] (what the rotation actually gets wrong), and
// the error at p is the largest over pairs. The unwrapped difference ("drift") is kept too: it
// grows linearly with p, so it shows how the damage grows past the first full turn.
import { ropeInvFreq } from '../../src/model/rope.ts'
import type { RopeParams } from '../../src/model/config.ts'

/** The angle error at one position. */
export interface AngleErrorPoint {
  position: number
  /** max over pairs of |wrap(angle_a - angle_b)|, radians, in [0, pi]. */
  error: number
  /** The pair with that error. */
  pair: number
  /** max over pairs of |angle_a - angle_b| unwrapped, radians. */
  drift: number
}

const TWO_PI = 2 * Math.PI

function wrap (d: number): number {
  return d - TWO_PI * Math.round(d / TWO_PI)
}

/** The angle error of inverse frequencies `a` and `b` at position p (they must have equal length). */
export function angleErrorAt (a: Float32Array, b: Float32Array, p: number): AngleErrorPoint {
  const pos = Math.fround(p)
  let error = 0
  let pair = 0
  let drift = 0
  for (let k = 0; k < a.length; k++) {
    const d = Math.fround(pos * a[k]) - Math.fround(pos * b[k])
    const w = Math.abs(wrap(d))
    if (w > error) {
      error = w
      pair = k
    }
    drift = Math.max(drift, Math.abs(d))
  }
  return { position: p, error, pair, drift }
}

/** The inverse frequencies of two parameter sets, checked to have the same number of pairs. */
export function invPair (a: RopeParams, b: RopeParams): [Float32Array, Float32Array] | null {
  const x = ropeInvFreq(a)
  const y = ropeInvFreq(b)
  return x.length === y.length ? [x, y] : null
}

/**
 * The first position in [0, limit) whose angle error exceeds `threshold` radians, found by
 * scanning every position (exact; the error is not monotone once a pair wraps), or null.
 */
export function firstPositionExceeding (a: Float32Array, b: Float32Array, threshold: number, limit: number): AngleErrorPoint | null {
  for (let p = 0; p < limit; p++) {
    const pos = Math.fround(p)
    for (let k = 0; k < a.length; k++) {
      const d = Math.fround(pos * a[k]) - Math.fround(pos * b[k])
      if (Math.abs(wrap(d)) > threshold) return angleErrorAt(a, b, p)
    }
  }
  return null
}

/**
 * Positions worth a row in a report for a table of `extent` positions: 1 and every power of ten
 * below the extent, each `marks` value inside it (the original window, a threshold crossing, ...),
 * and the last position. Sorted, without repeats.
 */
export function reportPositions (extent: number, marks: readonly number[] = []): number[] {
  const out = new Set<number>()
  for (let p = 1; p < extent; p *= 10) out.add(p)
  for (const m of marks) if (Number.isSafeInteger(m) && m >= 0 && m < extent) out.add(m)
  if (extent > 0) out.add(extent - 1)
  return [...out].sort((x, y) => x - y)
}

/** `count` positions spread evenly on a log scale over [1, extent), for a plot. */
export function plotPositions (extent: number, count = 240): number[] {
  const out = new Set<number>()
  const top = Math.log10(Math.max(2, extent - 1))
  for (let i = 0; i <= count; i++) out.add(Math.min(extent - 1, Math.round(10 ** (top * i / count))))
  return [...out].filter((p) => p >= 1).sort((x, y) => x - y)
}
