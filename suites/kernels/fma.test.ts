// fmaF32 (src/kernels/fma.ts) is a correctly rounded float32 fused multiply-add, checked against two
// references that share nothing with it: an exact BigInt evaluation of a * b + c rounded by hand,
// and the CPU's own fused multiply-add (vfmadd, or libm's fmaf in the portable kernels), reached
// through a lanes8-fma matmul whose only non-zero lane computes fma(a, b, c).
import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import { fmaF32, matmulF32 } from '../../src/kernels/index.ts'
import { makeRng } from './fixtures.ts'

const f32 = new Float32Array(1)
const u32 = new Uint32Array(f32.buffer)
const bitsOf = (x: number): number => { f32[0] = x; return u32[0] }
const fromBits = (b: number): number => { u32[0] = b >>> 0; return f32[0] }

/** A finite float32 as sign * mant * 2^exp with an integer mantissa. */
function decompose (x: number): { neg: boolean, mant: bigint, exp: number } {
  const b = bitsOf(x)
  const field = (b >>> 23) & 0xff
  const frac = b & 0x7fffff
  return { neg: b >>> 31 === 1, mant: BigInt(field === 0 ? frac : frac | 0x800000), exp: field === 0 ? -149 : field - 150 }
}

/** a * b + c rounded once to float32 (nearest, ties to even), computed exactly with BigInt. */
function exactFma (a: number, b: number, c: number): number {
  if (!Number.isFinite(a) || !Number.isFinite(b) || !Number.isFinite(c)) return Math.fround(a * b + c) // IEEE specials: exact anyway
  const da = decompose(a); const db = decompose(b); const dc = decompose(c)
  const pNeg = da.neg !== db.neg
  const pMant = da.mant * db.mant
  const pExp = da.exp + db.exp
  if (pMant === 0n && dc.mant === 0n) return pNeg && dc.neg ? -0 : 0
  const lo = Math.min(pExp, dc.exp)
  const sum = (pNeg ? -pMant : pMant) * (1n << BigInt(pExp - lo)) + (dc.neg ? -dc.mant : dc.mant) * (1n << BigInt(dc.exp - lo))
  if (sum === 0n) return 0 // an exact cancellation is +0 when rounding to nearest
  const neg = sum < 0n
  const mag = neg ? -sum : sum
  const msb = mag.toString(2).length - 1 + lo // exponent of the leading bit
  const q = Math.max(msb - 23, -149) // the float32 quantum there
  let mant: bigint
  if (q <= lo) mant = mag << BigInt(lo - q)
  else {
    const shift = BigInt(q - lo)
    mant = mag >> shift
    const rem = mag - (mant << shift)
    const half = 1n << (shift - 1n)
    if (rem > half || (rem === half && (mant & 1n) === 1n)) mant += 1n
  }
  const value = Number(mant) * 2 ** q // exact: mant <= 2^24
  const rounded = value >= 2 ** 128 ? Infinity : value
  return neg ? -rounded : rounded
}

const sameBits = (x: number, y: number): boolean => Number.isNaN(x) ? Number.isNaN(y) : bitsOf(x) === bitsOf(y)

/** The b of every double-rounding trap: (2^23 - 2895) * 2^-23. */
const TRAP_B = (2 ** 23 - 2895) * 2 ** -23

/**
 * Triples whose exact a * b + c lies just off a float32 midpoint, so that rounding the float64 sum
 * first lands on the midpoint and then ties the wrong way (naive Math.fround(a * b + c) fails).
 */
function doubleRoundingTriples (count: number, rng: () => number): Array<[number, number, number]> {
  const out: Array<[number, number, number]> = []
  // Ma * Mb = 2^46 + 4688: a * b is half an ulp of c times (1 + 4688 * 2^-46), below float64's reach.
  const ma = 2 ** 23 + 2896
  for (let i = 0; i < count; i++) {
    const e = Math.floor(rng() * 200) - 100
    const cMant = 2 ** 23 + 2 * Math.floor(rng() * 2 ** 22) // even: a tie would round down to it
    const c = (rng() < 0.5 ? -1 : 1) * cMant * 2 ** (e - 23)
    const halfUlp = 2 ** (e - 24)
    const a = Math.fround(ma * 2 ** -23 * halfUlp * (c < 0 ? -1 : 1))
    out.push([a, TRAP_B, c])
  }
  return out
}

function randomBitsTriple (rng: () => number): [number, number, number] {
  const r = () => fromBits(Math.floor(rng() * 2 ** 32))
  return [r(), r(), r()]
}

/** a and b with exponents that keep a * b in range, and c near -a * b (heavy cancellation). */
function cancellingTriple (rng: () => number): [number, number, number] {
  const a = Math.fround((rng() * 2 - 1) * 2 ** Math.floor(rng() * 60 - 30))
  const b = Math.fround((rng() * 2 - 1) * 2 ** Math.floor(rng() * 60 - 30))
  const p = Math.fround(a * b)
  const c = fromBits(bitsOf(-p) + Math.floor(rng() * 9) - 4)
  return [a, b, c]
}

describe('fmaF32: the exact fused multiply-add', () => {
  it('equals the BigInt evaluation on random bit patterns, cancellations and double-rounding traps', () => {
    const rng = makeRng(41)
    const triples: Array<[number, number, number]> = []
    for (let i = 0; i < 20000; i++) triples.push(randomBitsTriple(rng))
    for (let i = 0; i < 20000; i++) triples.push(cancellingTriple(rng))
    const traps = doubleRoundingTriples(2000, rng)
    triples.push(...traps)
    // Subnormal results, signed zeros, overflow to Inf, Inf * 0.
    triples.push([2 ** -75, 2 ** -75, 0], [2 ** -75, -(2 ** -75), -0], [-0, 5, -0], [0, -5, -0], [0, -5, 0],
      [3e38, 3e38, -Infinity], [3e38, 2, -3e38], [2 ** 64, 2 ** 64, 0], [Infinity, 0, 1], [1e-45, 0.5, 0], [1e-45, 0.75, 0])
    let differ = 0
    for (const [a, b, c] of triples) if (!sameBits(fmaF32(a, b, c), exactFma(a, b, c))) differ++
    expect(differ).toBe(0)
    // The traps are real: rounding the float64 sum first gets every one of them wrong.
    const naiveWrong = traps.filter(([a, b, c]) => !sameBits(Math.fround(a * b + c), exactFma(a, b, c))).length
    expect(naiveWrong).toBe(traps.length)
    console.log(`fma: ${triples.length} triples equal the BigInt reference; naive fround(a*b + c) is wrong on ${naiveWrong}/${traps.length} traps`)
  })

  it('equals the BigInt evaluation for arbitrary float32 triples (property)', () => {
    fc.assert(fc.property(fc.float(), fc.float(), fc.float(), (a, b, c) => sameBits(fmaF32(a, b, c), exactFma(a, b, c))), { numRuns: 20000 })
  })

  it("equals the CPU's fused multiply-add, reached through a lanes8-fma matmul", () => {
    // x row i = [c_i, 0 x 7, a_i, 0 x (k - 9)], W row j = [1, 0 x 7, b_j, 0 ...]: lane 0 computes
    // fma(a_i, b_j, fma(c_i, 1, 0)) = fma(a_i, b_j, c_i); the other lanes stay +0; the lane tree adds
    // +0s, and NaN comes out canonical, so compare with fmaF32 through the same tree.
    const rng = makeRng(42)
    const m = 300
    const n = 64
    let traps = 0
    for (const k of [16, 64]) { // k = 64 takes the 512-bit tiles where the CPU has them
      const x = new Float32Array(m * k)
      const w = new Float32Array(n * k)
      const as: number[] = []; const cs: number[] = []; const bs: number[] = []
      let trapRows = 0
      for (let i = 0; i < m; i++) {
        if (i % 3 === 2) trapRows++
        const [a, , c] = i % 3 === 0 ? randomBitsTriple(rng) : i % 3 === 1 ? cancellingTriple(rng) : doubleRoundingTriples(1, rng)[0]
        x[i * k] = c; x[i * k + 8] = a; as.push(Math.fround(a)); cs.push(Math.fround(c))
      }
      for (let j = 0; j < n; j++) {
        // j % 4 == 1: the traps' b, so the trap rows meet it
        const b = j % 4 === 1 ? TRAP_B : j % 2 === 0 ? Math.fround(1 - 2 ** -23 * (j + 1)) : fromBits(Math.floor(rng() * 2 ** 32))
        w[j * k] = 1; w[j * k + 8] = b; bs.push(Math.fround(b))
      }
      const y = matmulF32(x, m, k, w, n, undefined, { order: 'lanes8-fma' })
      let differ = 0
      for (let i = 0; i < m; i++) {
        for (let j = 0; j < n; j++) {
          const r = fmaF32(as[i], bs[j], fmaF32(cs[i], 1, 0))
          const want = Number.isNaN(r) ? NaN : Math.fround(Math.fround(r + 0) + 0)
          if (!sameBits(y[i * n + j], want)) differ++
        }
      }
      expect(differ, `k=${k}`).toBe(0)
      traps += trapRows * (n / 4)
    }
    expect(traps).toBeGreaterThan(100)
  })
})
