// The power-of-two ("ue8m0") block scale DeepSeek's quantisers use, shared by MXFP8, MXFP4,
// the ue8m0 weight tiles and the activation round trips.
//
//   amax  = max |x| over the block (NaN if any element is NaN)
//   a     = max(amax, floor)                         floor keeps an all-zero block finite
//   s     = 2^ceil(log2( fround(a * fround(1 / elementMax)) ))     stored as e8m0
//
// The reciprocal is multiplied, as DeepSeek's TileLang `fast_round_scale` does. For every float32
// amax at or above the floors below it picks the same power of two as fround(a / elementMax) and
// as the exact quotient: checked over every positive float32 while writing this (the rules differ
// only on 22 subnormal amax values, far below the floors), and over whole binades in the tests.
import { e8m0Ceil } from './e8m0.ts'

/** Values per scale in the MX formats (MXFP8, MXFP4). */
export const MX_BLOCK = 32

/** amax floor of the fp8 (e4m3) quantisers: DeepSeek's act_quant clamps amax to 1e-4 (as float32). */
export const E4M3_AMAX_FLOOR = Math.fround(1e-4)
/** amax floor of the fp4 (e2m1) quantisers: 6 * 2^-126, so the scale is at least 2^-126. */
export const E2M1_AMAX_FLOOR = 6 * 2 ** -126

/**
 * The largest magnitude in `x[start, end)`, or NaN if any element there is NaN (as torch's amax).
 * Exact: no arithmetic, only comparisons.
 */
export function blockAmax (x: Float32Array, start: number, end: number): number {
  let amax = 0
  for (let i = start; i < end; i++) {
    const a = Math.abs(x[i])
    if (a > amax) amax = a
    else if (a !== a) return NaN
  }
  return amax
}

/**
 * The e8m0 code of the power-of-two scale for a block whose largest magnitude is `amax`:
 * 2^ceil(log2(fround(max(amax, amaxFloor) * fround(1 / elementMax)))). NaN or infinite amax
 * gives the NaN code 255 (the whole block then decodes to NaN).
 */
export function ue8m0BlockScale (amax: number, elementMax: number, amaxFloor: number): number {
  const rounded = Math.fround(amax)
  if (rounded !== rounded) return e8m0Ceil(NaN)
  const a = rounded > amaxFloor ? rounded : amaxFloor
  return e8m0Ceil(Math.fround(a * Math.fround(1 / elementMax)))
}
