// A float32 fused multiply-add in JavaScript, exactly: fmaF32(a, b, c) is a * b + c rounded ONCE to
// float32 (round to nearest, ties to even), bit for bit what vfmadd231ps / C's fmaf return.
//
// Why it is exact (docs/kernels.md, "The FMA order"):
//   1. a * b of two float32 values has at most 48 significant bits, so the float64 product is exact
//      (and cannot overflow or underflow float64: |a * b| lies in [2^-298, 2^256)).
//   2. s = p + c in float64, and TwoSum's e with s + e = p + c exactly.
//   3. s is then rounded to ODD at 53 bits: kept when e = 0 or s's last bit is 1, else moved one
//      float64 ulp towards e. Rounding to odd with at least two extra bits, then rounding to the
//      target, is the correct rounding of the exact sum (Boldo and Melquiond, "Emulation of FMA and
//      correctly rounded sums: proved algorithms using rounding to odd", IEEE TC 2008); 53 >= 24 + 2.
//   4. Math.fround of that value is the float32 result, subnormals and overflow to ±Inf included.
// Special values: a NaN or infinite operand goes through plain float64 arithmetic, which gives the
// IEEE result (NaN for Inf * 0 or Inf - Inf, the signed infinity otherwise); exact zeros keep
// IEEE's sign rules, since s = p + c is then exact and e = 0.

const fround = Math.fround

const word = new Float64Array(1)
const halves = new Uint32Array(word.buffer)
// Float64Array and Uint32Array share the platform's byte order; which half holds the low word follows.
const LOW = new Uint8Array(new Uint16Array([1]).buffer)[0] === 1 ? 0 : 1
const HIGH = 1 - LOW

/** a * b + c with one rounding to float32. a, b and c must already be float32 values. */
export function fmaF32 (a: number, b: number, c: number): number {
  const p = a * b
  const s = p + c
  if (s - s !== 0) return fround(s) // NaN or ±Inf: every operand exact, one IEEE operation
  const bb = s - p
  const e = (p - (s - bb)) + (c - bb)
  if (e === 0) return fround(s)
  word[0] = s
  if ((halves[LOW] & 1) === 1) return fround(s)
  // Even last bit: one ulp away from zero when e has s's sign, else towards zero (s is never 0 here).
  if ((s > 0) === (e > 0)) {
    if (halves[LOW] === 0xffffffff) { halves[LOW] = 0; halves[HIGH] += 1 } else halves[LOW] += 1
  } else {
    if (halves[LOW] === 0) { halves[LOW] = 0xffffffff; halves[HIGH] -= 1 } else halves[LOW] -= 1
  }
  return fround(word[0])
}
