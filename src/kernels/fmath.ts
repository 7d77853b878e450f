// Our own float32 exp, log, log1p, sigmoid, softplus, silu and sqrt(softplus). Every step is one
// float32 operation (Math.fround after each), in the same order as native/src/fmath.h, so the two
// give the same bits for every input. Never Math.exp / Math.log: V8's and glibc's differ.
// docs/kernels.md ("Transcendental functions") derives each algorithm; the ulp bounds below are the
// largest errors over all 2^32 float32 inputs (native/tools/fmath_scan.cc against float64 libm).
import { bitsToF32, f32ToBits } from '../numerics/bits.ts'

const fround = Math.fround

const LOG2E = bitsToF32(0x3fb8aa3b) // log2(e) rounded
const SHIFT = 12582912 // 1.5 * 2^23: (t + SHIFT) - SHIFT rounds t to an integer
const LN2_HI = bitsToF32(0x3f317200) // ln 2 with 15 significant bits: k * LN2_HI is exact
const LN2_LO = bitsToF32(0x35bfbe8e) // ln 2 - LN2_HI, rounded
// Taylor coefficients 1/n! of exp, n = 3..7 (1/2 is exact).
const E3 = bitsToF32(0x3e2aaaab)
const E4 = bitsToF32(0x3d2aaaab)
const E5 = bitsToF32(0x3c088889)
const E6 = bitsToF32(0x3ab60b61)
const E7 = bitsToF32(0x39500d01)
// 2/n for n = 3, 5, 7, 9 (the atanh series of log).
const L3 = bitsToF32(0x3f2aaaab)
const L5 = bitsToF32(0x3ecccccd)
const L7 = bitsToF32(0x3e924925)
const L9 = bitsToF32(0x3e638e39)
/** The largest float32 x whose exp(x) is finite (88.7228317). */
export const EXP_OVERFLOW = bitsToF32(0x42b17217)
/** Below this, exp(x) < 2^-150 and rounds to +0. */
export const EXP_UNDERFLOW = -104
const PARTS_FLOOR = -120
const SQRT2_MANTISSA = 0x3504f3 // mantissa bits of 1.41421354, just below sqrt 2
const TWO_M24 = 2 ** -24
const TWO_M14 = 2 ** -14
const TWO_M126 = 2 ** -126

/** 2^e for e in [-126, 127], exact. */
const POW2 = Float64Array.from({ length: 254 }, (_, i) => 2 ** (i - 126))
function pow2 (e: number): number {
  return POW2[e + 126]
}

// exp_parts's results (module scratch instead of an allocated tuple).
let partsHi = 0
let partsLo = 0
let partsK = 0

/** exp(x) = (hi + lo) 2^k with |r| <= ln2/2, r = x - k ln 2; x in [-120, 89]. Sets partsHi/Lo/K. */
function expParts (x: number): void {
  const t = fround(x * LOG2E)
  const kf = fround(fround(t + SHIFT) - SHIFT)
  const rh = fround(x - fround(kf * LN2_HI)) // exact (Sterbenz)
  const rl = fround(kf * LN2_LO)
  const r = fround(rh - rl)
  const q = fround(0.5 + fround(r * fround(E3 + fround(r * fround(E4 + fround(r * fround(E5 + fround(r * fround(E6 + fround(r * E7))))))))))
  // 1 + r + r^2 q with 1 + rh split exactly (Fast2Sum): only the last add rounds at p's scale.
  const oneHi = fround(1 + rh)
  const oneLo = fround(fround(1 - oneHi) + rh)
  const tail = fround(oneLo + fround(fround(fround(r * r) * q) - rl))
  const hi = fround(oneHi + tail)
  partsHi = hi
  partsLo = fround(fround(oneHi - hi) + tail)
  partsK = kf
}

/** p * 2^k in two exact-then-rounded steps (one rounding for subnormal results, 2^128 reachable). */
function scalePow2 (p: number, k: number): number {
  const k2 = k > 127 ? 1 : (k < -126 ? -64 : 0)
  return fround(fround(p * pow2(k - k2)) * pow2(k2))
}

/** The rounding error of a * b (p = fround(a * b)), exactly: Dekker's product with a 12-bit split. */
function twoProdErr (a: number, b: number, p: number): number {
  const ca = fround(4097 * a)
  const ah = fround(ca - fround(ca - a))
  const al = fround(a - ah)
  const cb = fround(4097 * b)
  const bh = fround(cb - fround(cb - b))
  const bl = fround(b - bh)
  return fround(fround(fround(fround(fround(ah * bh) - p) + fround(ah * bl)) + fround(al * bh)) + fround(al * bl))
}

/** (nh + nl) / (dh + dl) with one correction from the exact residual of y0 = nh / dh. */
function dividePairs (nh: number, nl: number, dh: number, dl: number): number {
  const y0 = fround(nh / dh)
  const p = fround(y0 * dh)
  const rem = fround(fround(fround(fround(nh - p) - twoProdErr(y0, dh, p)) + nl) - fround(y0 * dl))
  return fround(y0 + fround(rem / dh))
}

// one_plus_exp_neg's results: exp(-a) = th + tl, 1 + exp(-a) = dh + dl.
let th = 0
let tl = 0
let dh = 0
let dl = 0

function onePlusExpNeg (a: number): void {
  expParts(-a)
  const s = pow2(partsK)
  th = fround(partsHi * s)
  tl = fround(partsLo * s)
  dh = fround(1 + th)
  dl = fround(fround(fround(1 - dh) + th) + tl)
}

/** log(1+f) + e ln 2 + tiny, for f = m - 1 with m in [sqrt(1/2), sqrt 2); large parts added last. */
function logReduced (f: number, e: number, tiny: number): number {
  const s = fround(f / fround(2 + f))
  const z = fround(s * s)
  const bigR = fround(z * fround(L3 + fround(z * fround(L5 + fround(z * fround(L7 + fround(z * L9)))))))
  const hfsq = fround(fround(0.5 * f) * f)
  const lo = fround(fround(s * fround(hfsq + bigR)) + fround(fround(e * LN2_LO) + tiny))
  return fround(fround(e * LN2_HI) + fround(f - fround(hfsq - lo)))
}

let splitE = 0

/** u > 0 finite: u = 2^e m, m in [sqrt(1/2), sqrt 2); returns f = m - 1 (exact) and sets splitE = e. */
function splitLogArgument (u: number): number {
  let extra = 0
  if (u < TWO_M126) {
    u = fround(u * 8388608)
    extra = -23
  }
  const b = f32ToBits(u)
  const mant = b & 0x7fffff
  let exponent = ((b >>> 23) & 0xff) - 127 + extra
  let m: number
  if (mant > SQRT2_MANTISSA) {
    m = bitsToF32(mant | 0x3f000000)
    exponent += 1
  } else {
    m = bitsToF32(mant | 0x3f800000)
  }
  splitE = exponent
  return fround(m - 1)
}

/** log(1 + xh + xl) for finite xh > -1, |xh| >= 2^-24 (Fast2Sum recovers the error of 1 + xh). */
function log1pPair (xh: number, xl: number): number {
  const u = fround(1 + xh)
  const c = fround((xh <= 1 ? fround(fround(1 - u) + xh) : fround(fround(xh - u) + 1)) + xl)
  const f = splitLogArgument(u)
  return logReduced(f, splitE, fround(c / u))
}

/**
 * exp(x) in float32 (x is first rounded to float32), within 0.771 ulp; bit-identical to the native
 * exp_f32. NaN -> NaN, x > 88.7228317 -> +Inf, x < -104 -> +0.
 */
export function expF32 (x: number): number {
  x = fround(x)
  if (x !== x) return NaN
  if (x > EXP_OVERFLOW) return Infinity
  if (x < EXP_UNDERFLOW) return 0
  expParts(x)
  return scalePow2(partsHi, partsK)
}

/** log(x) in float32, within 0.858 ulp. NaN or x < 0 -> NaN, +-0 -> -Inf, +Inf -> +Inf. */
export function logF32 (x: number): number {
  x = fround(x)
  if (x !== x || x < 0) return NaN
  if (x === 0) return -Infinity
  if (x === Infinity) return Infinity
  const f = splitLogArgument(x)
  return logReduced(f, splitE, 0)
}

/** log(1 + x) in float32, within 0.871 ulp. NaN or x < -1 -> NaN, -1 -> -Inf, |x| < 2^-24 -> x. */
export function log1pF32 (x: number): number {
  x = fround(x)
  if (x !== x || x < -1) return NaN
  if (x === -1) return -Infinity
  if (x === Infinity) return Infinity
  if (Math.abs(x) < TWO_M24) return x
  return log1pPair(x, 0)
}

/**
 * 1 / (1 + exp(-x)) in float32, within 0.771 ulp for both signs: t = exp(-|x|) as a hi/lo pair,
 * then 1 / (1 + t) (x >= 0) or t / (1 + t) (x < 0), rounded once. |x| > 80: 1 or exp(x).
 */
export function sigmoidF32 (x: number): number {
  x = fround(x)
  if (x !== x) return NaN
  const a = Math.abs(x)
  if (a > 80) return x > 0 ? 1 : expF32(x)
  onePlusExpNeg(a)
  return x >= 0 ? dividePairs(1, 0, dh, dl) : dividePairs(th, tl, dh, dl)
}

/** torch's softplus (beta 1, threshold 20): x > 20 ? x : log1p(exp(x)), in float32, within 0.885 ulp. */
export function softplusF32 (x: number): number {
  x = fround(x)
  if (x !== x) return NaN
  if (x > 20) return x
  if (x < -80) return expF32(x)
  expParts(x)
  const s = pow2(partsK)
  const hi = fround(partsHi * s)
  const lo = fround(partsLo * s)
  // log1p(t) = t - t^2/2 + t^3/3 ...: below 2^-14 the cubic term is under 2^-29 t.
  if (hi < TWO_M14) return fround(hi + fround(lo - fround(fround(0.5 * hi) * hi)))
  return log1pPair(hi, lo)
}

/**
 * x * sigmoid(x) = x / (1 + exp(-x)) in float32, within 0.809 ulp, rounded once at the end.
 * x > 20 -> x; +-0 -> itself; x < -64 -> x exp(x) from the unscaled exp parts (no subnormal loss); x < -120 -> -0.
 */
export function siluF32 (x: number): number {
  x = fround(x)
  if (x !== x) return NaN
  if (x > 20 || x === 0) return x // the quotient rounds to x; +-0 keeps its sign
  if (x < -64) {
    if (x < PARTS_FLOOR) return -0
    expParts(x)
    const s = pow2(partsK + 64)
    const hi = fround(partsHi * s)
    const n = fround(x * hi)
    return fround(fround(n + fround(twoProdErr(x, hi, n) + fround(x * fround(partsLo * s)))) * pow2(-64))
  }
  onePlusExpNeg(Math.abs(x))
  if (x >= 0) return dividePairs(x, 0, dh, dl)
  const n = fround(x * th)
  return dividePairs(n, fround(twoProdErr(x, th, n) + fround(x * tl)), dh, dl)
}

/** sqrt(softplus(x)) (the sqrtsoftplus router score) in float32, within 0.981 ulp; below -20, exp(x / 2). */
export function sqrtsoftplusF32 (x: number): number {
  x = fround(x)
  if (x < -20) return expF32(fround(0.5 * x))
  return fround(Math.sqrt(softplusF32(x)))
}

/** The element-wise functions by name (the native bulk forms take the same names). */
export const FMATH_FUNCTIONS = {
  exp: expF32,
  log: logF32,
  log1p: log1pF32,
  sigmoid: sigmoidF32,
  softplus: softplusF32,
  silu: siluF32,
  sqrtsoftplus: sqrtsoftplusF32,
} as const

/** The name of one element-wise function. */
export type FmathName = keyof typeof FMATH_FUNCTIONS

/** Native function codes, in the order native/src/fmath_array.cc switches on them. */
export const FMATH_CODES: Readonly<Record<FmathName, number>> = {
  exp: 0, log: 1, log1p: 2, sigmoid: 3, softplus: 4, silu: 5, sqrtsoftplus: 6,
}
