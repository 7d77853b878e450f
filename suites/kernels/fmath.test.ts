// Our own float32 transcendental functions: the TypeScript functions and the native bulk forms give
// the same bits for millions of inputs, every result is within a stated ulp bound of float64 truth,
// and the edge cases (zeros, subnormals, thresholds, infinities, NaN) come out exactly as documented.
import { describe, it, expect, afterAll } from 'vitest'
import {
  FMATH_FUNCTIONS, expF32, fmathArray, getKernelThreads, log1pF32, logF32, reference, setKernelThreads, sigmoidF32,
  siluF32, softplusF32, sqrtsoftplusF32,
} from '../../src/kernels/index.ts'
import type { FmathName } from '../../src/kernels/index.ts'
import { bitsToF32, f32ToBits } from '../../src/numerics/bits.ts'
import { bitReport, makeRng, randomBitsF32, ulpError } from './fixtures.ts'

const defaultThreads = getKernelThreads()
afterAll(() => setKernelThreads(defaultThreads))

const NAMES = Object.keys(FMATH_FUNCTIONS) as FmathName[]

/** float64 truth (V8's Math.exp/log/log1p are accurate to well under one float64 ulp). */
const TRUTH: Record<FmathName, (x: number) => number> = {
  exp: Math.exp,
  log: Math.log,
  log1p: Math.log1p,
  sigmoid: (x) => 1 / (1 + Math.exp(-x)),
  softplus: (x) => (x > 20 ? x : Math.log1p(Math.exp(x))),
  silu: (x) => (x === -Infinity ? -0 : x === Infinity ? x : x / (1 + Math.exp(-x))),
  sqrtsoftplus: (x) => Math.sqrt(x > 20 ? x : Math.log1p(Math.exp(x))),
}

/**
 * The largest error over all 2^32 float32 inputs, in float32 ulps at the exact value, as measured
 * by native/tools/fmath_scan.cc (docs/kernels.md); the sweeps below must stay within it.
 */
const MAX_ULP: Record<FmathName, number> = {
  exp: 0.771, log: 0.858, log1p: 0.871, sigmoid: 0.771, softplus: 0.885, silu: 0.809, sqrtsoftplus: 0.981,
}

/** Inputs per function: 1M random bit patterns (all exponents) and a dense sweep of the busy range. */
function inputs (name: FmathName, seed: number): Float32Array {
  const rng = makeRng(seed)
  const n = 1 << 20
  const out = new Float32Array(2 * n)
  out.set(randomBitsF32(n, rng))
  const [lo, hi] = name === 'log' ? [0, 64] : name === 'log1p' ? [-1, 64] : [-125, 95]
  for (let i = 0; i < n; i++) out[n + i] = lo + (hi - lo) * rng()
  return out
}

describe('fmath: native bulk forms equal the TypeScript functions bit for bit', () => {
  for (const name of NAMES) {
    it(`${name}: 2M inputs (random bit patterns and a dense sweep) give identical bits`, () => {
      const x = inputs(name, 100 + NAMES.indexOf(name))
      const native = fmathArray(name, x)
      const f = FMATH_FUNCTIONS[name]
      const ts = new Float32Array(x.length)
      for (let i = 0; i < x.length; i++) ts[i] = f(x[i])
      // The TypeScript functions return a plain NaN; the array forms write it canonical.
      const tsBits = new Uint32Array(ts.buffer)
      for (let i = 0; i < ts.length; i++) if (Number.isNaN(ts[i])) tsBits[i] = 0x7fc00000
      expect(bitReport(native, ts)).toBe('identical')
    })
  }

  it('gives the same bits in the 8-lane body and in the scalar tail (every start offset)', () => {
    const x = inputs('exp', 7).subarray(0, 4099)
    const whole = fmathArray('exp', x)
    for (let start = 1; start < 9; start++) {
      expect(bitReport(fmathArray('exp', x.subarray(start)), whole.subarray(start)), `start ${start}`).toBe('identical')
    }
  })

  it('gives the same bits on 1, 2 and 3 threads and in place', () => {
    const x = inputs('silu', 8)
    setKernelThreads(1)
    const one = fmathArray('silu', x)
    const oneExp = fmathArray('exp', x)
    for (const threads of [2, 3]) {
      setKernelThreads(threads)
      expect(bitReport(fmathArray('silu', x), one), `silu threads=${threads}`).toBe('identical')
      expect(bitReport(fmathArray('exp', x), oneExp), `exp threads=${threads}`).toBe('identical')
    }
    const copy = x.slice()
    expect(fmathArray('exp', copy, copy)).toBe(copy)
    expect(bitReport(copy, oneExp)).toBe('identical')
    expect(bitReport(reference.fmathArray('exp', x), oneExp)).toBe('identical')
  })
})

describe('fmath: accuracy against float64', () => {
  for (const name of NAMES) {
    it(`${name}: every swept input within ${MAX_ULP[name]} ulp of the exact value`, () => {
      const x = inputs(name, 200 + NAMES.indexOf(name))
      const f = FMATH_FUNCTIONS[name]
      const truth = TRUTH[name]
      let worst = 0
      let worstAt = 0
      let above = 0
      for (let i = 0; i < x.length; i++) {
        const e = ulpError(f(x[i]), truth(x[i]))
        if (e > 0.5) above++
        if (e > worst) { worst = e; worstAt = x[i] }
      }
      expect(worst, `worst at x = ${worstAt}`).toBeLessThanOrEqual(MAX_ULP[name])
      // Most results are correctly rounded: a sloppier algorithm within the bound would fail this.
      expect(above / x.length).toBeLessThan(0.03)
    })
  }
})

/** The float32 with bit pattern b. */
const f = bitsToF32
const bits = (x: number) => f32ToBits(x)

describe('fmath: edge cases', () => {
  it('exp: zeros, thresholds, subnormal results, infinities and NaN', () => {
    expect(expF32(0)).toBe(1)
    expect(expF32(-0)).toBe(1)
    expect(expF32(2 ** -149)).toBe(1)
    expect(expF32(1)).toBe(Math.fround(Math.E))
    expect(expF32(f(0x42b17217))).toBe(Math.fround(Math.exp(f(0x42b17217)))) // largest finite
    expect(expF32(f(0x42b17217))).toBeLessThan(Infinity)
    expect(expF32(f(0x42b17218))).toBe(Infinity)
    expect(expF32(Infinity)).toBe(Infinity)
    expect(expF32(-Infinity)).toBe(0)
    expect(Object.is(expF32(-200), 0)).toBe(true)
    expect(expF32(-103.27893)).toBe(2 ** -149) // exp = 1.0 x 2^-149: the smallest subnormal
    expect(expF32(-103.973)).toBe(0) // below 2^-150: rounds to +0
    expect(expF32(-103.972)).toBe(2 ** -149) // just above 2^-150: rounds up
    expect(expF32(-88)).toBe(Math.fround(Math.exp(-88))) // subnormal result
    expect(expF32(NaN)).toBeNaN()
  })

  it('log and log1p: domain edges, subnormals, exact points', () => {
    expect(Object.is(logF32(1), 0)).toBe(true)
    expect(logF32(0)).toBe(-Infinity)
    expect(logF32(-0)).toBe(-Infinity)
    expect(logF32(-(2 ** -149))).toBeNaN()
    expect(logF32(-1)).toBeNaN()
    expect(logF32(Infinity)).toBe(Infinity)
    expect(logF32(NaN)).toBeNaN()
    expect(logF32(2 ** -149)).toBe(Math.fround(Math.log(2 ** -149)))
    expect(logF32(f(0x7f7fffff))).toBe(Math.fround(Math.log(f(0x7f7fffff))))
    expect(logF32(2)).toBe(Math.fround(Math.LN2))
    expect(Object.is(log1pF32(-0), -0)).toBe(true)
    expect(log1pF32(2 ** -149)).toBe(2 ** -149)
    expect(log1pF32(2 ** -25)).toBe(2 ** -25)
    expect(log1pF32(-1)).toBe(-Infinity)
    expect(log1pF32(f(0xbf800001))).toBeNaN() // just below -1
    expect(log1pF32(Infinity)).toBe(Infinity)
    expect(log1pF32(f(0x7f7fffff))).toBe(Math.fround(Math.log1p(f(0x7f7fffff))))
  })

  it('sigmoid: both tails without overflow, exact midpoint', () => {
    expect(sigmoidF32(0)).toBe(0.5)
    expect(sigmoidF32(-0)).toBe(0.5)
    expect(sigmoidF32(Infinity)).toBe(1)
    expect(Object.is(sigmoidF32(-Infinity), 0)).toBe(true)
    expect(sigmoidF32(100)).toBe(1)
    expect(sigmoidF32(-100)).toBe(Math.fround(Math.exp(-100))) // subnormal, not 0
    expect(sigmoidF32(-100)).toBeGreaterThan(0)
    expect(sigmoidF32(NaN)).toBeNaN()
  })

  it('softplus: torch threshold 20, tails, infinities', () => {
    expect(softplusF32(20)).toBe(Math.fround(Math.log1p(Math.exp(20))))
    expect(softplusF32(Math.fround(20.000002))).toBe(Math.fround(20.000002))
    expect(softplusF32(0)).toBe(Math.fround(Math.LN2))
    expect(softplusF32(-90)).toBe(Math.fround(Math.exp(-90)))
    expect(Object.is(softplusF32(-Infinity), 0)).toBe(true)
    expect(softplusF32(Infinity)).toBe(Infinity)
    expect(softplusF32(NaN)).toBeNaN()
  })

  it('silu and sqrtsoftplus: tails keep their bits, limits at the infinities', () => {
    expect(Object.is(siluF32(0), 0)).toBe(true)
    expect(Object.is(siluF32(-0), -0)).toBe(true)
    expect(siluF32(25)).toBe(25)
    expect(siluF32(Infinity)).toBe(Infinity)
    expect(Object.is(siluF32(-Infinity), -0)).toBe(true)
    expect(Object.is(siluF32(-130), -0)).toBe(true)
    // -100 e^-100 = -3.7e-42: a subnormal result that x * (rounded subnormal exp) would miss.
    expect(siluF32(-100)).toBe(Math.fround(-100 * Math.exp(-100)))
    expect(siluF32(-100)).not.toBe(Math.fround(-100 * Math.fround(Math.exp(-100))))
    expect(siluF32(-90)).toBe(Math.fround(-90 / (1 + Math.exp(90))))
    expect(siluF32(NaN)).toBeNaN()
    expect(sqrtsoftplusF32(Infinity)).toBe(Infinity)
    expect(Object.is(sqrtsoftplusF32(-Infinity), 0)).toBe(true)
    expect(sqrtsoftplusF32(-150)).toBe(Math.fround(Math.exp(-75))) // normal, though softplus(-150) underflows
    expect(sqrtsoftplusF32(NaN)).toBeNaN()
  })

  it('native array forms agree on every edge value (NaN written as 0x7fc00000)', () => {
    const edges = Float32Array.from([
      0, -0, 2 ** -149, -(2 ** -149), 2 ** -126, -(2 ** -126), 1, -1, 20, Math.fround(20.000002), -20, 80, -80, -64,
      -120, -121, 88, f(0x42b17217), f(0x42b17218), -103.97, -104, -104.1, f(0x7f7fffff), f(0xff7fffff),
      Infinity, -Infinity, NaN, f(0xffc00001), f(0x7f800001), f(0xbf800001),
    ])
    for (const name of NAMES) {
      const native = fmathArray(name, edges)
      const fn = FMATH_FUNCTIONS[name]
      for (let i = 0; i < edges.length; i++) {
        const expected = fn(edges[i])
        const got = bits(native[i])
        if (Number.isNaN(expected)) expect(got, `${name}(${edges[i]})`).toBe(0x7fc00000)
        else expect(got, `${name}(${edges[i]})`).toBe(bits(expected))
      }
    }
  })

  it('rounds a non-float32 argument to float32 first', () => {
    expect(expF32(0.1)).toBe(expF32(Math.fround(0.1)))
    expect(siluF32(1 / 3)).toBe(siluF32(Math.fround(1 / 3)))
  })
})
