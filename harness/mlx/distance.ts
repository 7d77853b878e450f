// How far our tensors are from a reference's, in the reference's own dtype: the fraction of elements
// with identical bits, the ulp histogram, the worst ulp and the relative error. An f32 reference is
// measured in f32 ulps; a bf16 one in bf16 ulps, our value first rounded to bf16 (round to nearest
// even), since that is what a bf16 engine would have stored.
import { f32ToBits } from '../../src/numerics/bits.ts'
import { f32ToBf16 } from '../../src/numerics/bf16.ts'

/** Histogram buckets of ulp distances. */
export const ULP_BUCKETS = ['0', '1', '2', '3-4', '5-16', '17-256', '>256'] as const

/** The distance of one tensor. */
export interface Distance {
  elements: number
  identical: number
  /** identical / elements (1 when there are no elements). */
  identicalFraction: number
  maxUlp: number
  /** ||ours - ref|| / ||ref|| in float64 (0 when both are zero). */
  relError: number
  /** Counts per ULP_BUCKETS. */
  histogram: number[]
}

function bucket (u: number): number {
  return u === 0 ? 0 : u === 1 ? 1 : u === 2 ? 2 : u <= 4 ? 3 : u <= 16 ? 4 : u <= 256 ? 5 : 6
}

// Codes on a line where adjacent values are one apart and -0 and +0 are both 0.
function ordinal32 (x: number): number {
  const b = f32ToBits(x)
  return b & 0x80000000 ? -(b & 0x7fffffff) : b
}

function ordinal16 (code: number): number {
  return code & 0x8000 ? -(code & 0x7fff) : code
}

/** Ulps between a and ref in `dtype` (NaN against anything but the same NaN counts as infinitely far). */
export function ulps (a: number, ref: number, dtype: 'F32' | 'BF16'): number {
  if (Number.isNaN(a) || Number.isNaN(ref)) return Number.isNaN(a) && Number.isNaN(ref) ? 0 : Infinity
  if (dtype === 'F32') return Math.abs(ordinal32(a) - ordinal32(ref))
  return Math.abs(ordinal16(f32ToBf16(a)) - ordinal16(f32ToBf16(ref)))
}

/** The distance of `ours` from `ref` (same length) in `dtype`. */
export function distance (ours: ArrayLike<number>, ref: ArrayLike<number>, dtype: 'F32' | 'BF16'): Distance {
  if (ours.length !== ref.length) throw new Error(`distance: ${ours.length} elements against ${ref.length}`)
  const histogram = ULP_BUCKETS.map(() => 0)
  let identical = 0
  let maxUlp = 0
  let d2 = 0
  let r2 = 0
  for (let i = 0; i < ours.length; i++) {
    const u = ulps(ours[i], ref[i], dtype)
    histogram[bucket(u)]++
    if (u === 0) identical++
    if (u > maxUlp) maxUlp = u
    d2 += (ours[i] - ref[i]) ** 2
    r2 += ref[i] ** 2
  }
  const n = ours.length
  const relError = r2 === 0 ? (d2 === 0 ? 0 : Infinity) : Math.sqrt(d2 / r2)
  return { elements: n, identical, identicalFraction: n === 0 ? 1 : identical / n, maxUlp, relError, histogram }
}

/** Several distances as one (elements, identical and histograms summed; worst ulp and relative error). */
export function combine (ds: readonly Distance[]): Distance {
  const histogram = ULP_BUCKETS.map((_, i) => ds.reduce((a, d) => a + d.histogram[i], 0))
  const elements = ds.reduce((a, d) => a + d.elements, 0)
  const identical = ds.reduce((a, d) => a + d.identical, 0)
  return {
    elements, identical, identicalFraction: elements === 0 ? 1 : identical / elements,
    maxUlp: ds.reduce((a, d) => Math.max(a, d.maxUlp), 0),
    relError: ds.reduce((a, d) => Math.max(a, d.relError), 0),
    histogram,
  }
}

/** `0:97.1% 1:2.5% ...`, buckets that are empty left out. */
export function showHistogram (h: readonly number[]): string {
  const n = h.reduce((a, b) => a + b, 0)
  return h.map((c, i) => (c === 0 ? '' : `${ULP_BUCKETS[i]}:${(100 * c / n).toFixed(n < 10000 ? 1 : 3)}%`)).filter(Boolean).join(' ')
}
