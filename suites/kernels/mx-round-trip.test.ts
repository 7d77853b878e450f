// The load-time weight kernels (2026-12-05: a decoder's start spent about 30 s of single-threaded
// JavaScript quantising, dequantising and converting its weights): mxRoundTrip, decodeBf16Array
// and exactBf16Codes. For each: native == reference, every bit, at 1 thread and at several (the
// calls here are above the thread threshold), on values chosen for the rules each one has; a
// fast-check property; argument errors. And the loader's piecewise use == the whole-matrix
// reference, so moving the loops changed no weight bit.
import fc from 'fast-check'
import { afterAll, describe, expect, it } from 'vitest'
import { NumericsError } from '../../src/errors.ts'
import { decodeBf16Array, exactBf16Codes, getKernelThreads, kernelParallelThreshold, loadNativeKernels, mxRoundTrip, reference, setKernelThreads, type MxElement } from '../../src/kernels/index.ts'
import { holdMatrix, MX_PIECE } from '../../src/model/weights/formats.ts'
import { E2M1_VALUES } from '../../src/numerics/e2m1.ts'
import { E4M3_VALUES } from '../../src/numerics/e4m3.ts'
import { differingBits, makeRng } from './fixtures.ts'

const defaultThreads = getKernelThreads()
afterAll(() => setKernelThreads(defaultThreads))
const THREADS = [1, 2, 3, 7]

function atThreads<T> (n: number, f: () => T): T {
  setKernelThreads(n)
  try { return f() } finally { setKernelThreads(defaultThreads) }
}

const bitsOf = (a: Float32Array) => new Uint32Array(a.buffer, a.byteOffset, a.length)

/** A rough normal deviate (sum of uniforms), never 0 in practice. */
const gauss = (rng: () => number) => rng() + rng() + rng() + rng() - 2

/** The element grid's non-negative finite values, ascending (code order is value order). */
function grid (element: MxElement): number[] {
  return element === 'e4m3' ? Array.from(E4M3_VALUES.subarray(0, 0x7f)) : Array.from(E2M1_VALUES.subarray(0, 8))
}

/**
 * Blocks of every kind the rules treat apart, in turn: normal values at one magnitude from 2^-149
 * to 2^127; exact rounding ties after scaling (the block's anchor fixes its scale at 2^s: 400 * 2^s
 * for e4m3, 5 * 2^s for e2m1, both ties themselves; larger midpoints are capped there); float32
 * subnormals; all-zero blocks of both signs; blocks holding NaN (several payloads, both signs),
 * +Inf or -Inf among ordinary values; float max; magnitudes spread wide inside one block.
 */
function mxInputs (blocks: number, block: number, element: MxElement, seed: number): Float32Array {
  const rng = makeRng(seed)
  const x = new Float32Array(blocks * block)
  const bits = bitsOf(x)
  const g = grid(element)
  const sign = () => (rng() < 0.5 ? -1 : 1)
  for (let b = 0; b < blocks; b++) {
    const at = b * block
    const kind = b % 8
    for (let i = at; i < at + block; i++) {
      switch (kind) {
        case 0: x[i] = gauss(rng) * 2 ** (Math.floor(b / 8) % 277 - 149); break
        case 2: bits[i] = (rng() < 0.5 ? 0x80000000 : 0) | (1 + Math.floor(rng() * 0x7fffff)); break
        case 3: x[i] = rng() < 0.5 ? 0 : -0; break
        case 6: x[i] = sign() * 3.4028234663852886e38 * (rng() < 0.5 ? 1 : rng()); break
        case 7: x[i] = gauss(rng) * 2 ** Math.floor(rng() * 100 - 60); break
        default: x[i] = gauss(rng) * 2 ** Math.floor(rng() * 20 - 10)
      }
    }
    if (kind === 1) {
      // Ties: the midpoint of two neighbouring grid values, or past the top (saturation), times 2^s.
      const s = element === 'e4m3' ? Math.floor(rng() * 140) - 21 : Math.floor(rng() * 244) - 125
      const anchor = element === 'e4m3' ? 400 : 5
      for (let i = at; i < at + block; i++) {
        const k = Math.floor(rng() * (g.length - 1))
        let v = (g[k] + g[k + 1]) / 2
        if (v > anchor) v = anchor
        x[i] = sign() * v * 2 ** s
      }
      x[at + Math.floor(rng() * block)] = sign() * anchor * 2 ** s
    }
    if (kind === 4 || kind === 5) {
      const specials = kind === 4 ? [0x7fc00000, 0xffc00000, 0x7f800001, 0xffbfffff, 0x7fc00001] : [0x7f800000, 0xff800000, 0x80000000, 0x7f7fffff]
      bits[at + Math.floor(rng() * block)] = specials[b % specials.length]
      if (kind === 5 && rng() < 0.5) bits[at + Math.floor(rng() * block)] = 0xff800000
    }
  }
  return x
}

function expectSameBits (got: Float32Array, want: Float32Array): void {
  expect(got.length).toBe(want.length)
  const n = differingBits(got, want)
  if (n > 0) {
    const g = bitsOf(got), w = bitsOf(want)
    const i = g.findIndex((v, j) => v !== w[j])
    expect.fail(`${n} elements differ; first at ${i}: 0x${g[i].toString(16)} vs 0x${w[i].toString(16)}`)
  }
}

describe('mxRoundTrip', () => {
  for (const element of ['e4m3', 'e2m1'] as const) {
    for (const block of [32, 64, 6]) {
      it(`${element}, block ${block}: native == reference at ${THREADS.join(', ')} threads over every kind of block`, () => {
        const blocks = Math.ceil(kernelParallelThreshold() / block) + 5
        const x = mxInputs(blocks, block, element, block * 7 + (element === 'e4m3' ? 1 : 2))
        const want = reference.mxRoundTrip(x, block, element)
        for (const t of THREADS) expectSameBits(atThreads(t, () => mxRoundTrip(x, block, element)), want)
        // In place (out === x) gives the same bits.
        expectSameBits(mxRoundTrip(x.slice(), block, element, undefined), want)
        const same = x.slice()
        expect(mxRoundTrip(same, block, element, same)).toBe(same)
        expectSameBits(same, want)
      })
    }

    it(`${element}: hand cases: ties to even, saturation, the NaN block, -0, the floors`, () => {
      // Inputs by bit pattern: a JavaScript number may not keep a NaN's payload.
      const runBits = (input: number[]) => {
        const x = new Float32Array(Uint32Array.from(input).buffer)
        const got = mxRoundTrip(x, x.length, element)
        expectSameBits(got, reference.mxRoundTrip(x, x.length, element))
        return Array.from(bitsOf(got))
      }
      const bits = (values: number[]) => Array.from(bitsOf(Float32Array.from(values)))
      const run = (values: number[]) => runBits(bits(values))
      const nanBlock = [0x7fc00000, 0x7fc00000, 0x7fc00000, 0x7fc00000]
      if (element === 'e4m3') {
        // amax 400 -> scale 1; 400 ties 384 / 416 -> 384 (even); 17 ties 16 / 18 -> 16; 19 -> 20.
        expect(run([400, 17, 19, -0.5])).toEqual(bits([384, 16, 20, -0.5]))
      } else {
        // amax 5 -> scale 1; 5 ties 4 / 6 -> 4; 0.25 -> 0; 0.75 -> 1; 2.5 -> 2; -0.1 -> -0.
        expect(run([5, 0.25, 0.75, 2.5, -0.1, 1.25])).toEqual(bits([4, 0, 1, 2, -0, 1]))
      }
      for (const special of [Infinity, -Infinity]) expect(run([1, special, -2, 3])).toEqual(nanBlock)
      // NaN of any payload and sign, among negatives, gives the same canonical block.
      for (const nan of [0x7fc00000, 0xffc00000, 0xffc00001, 0x7f800001]) expect(runBits([bits([-1])[0], nan, bits([-2])[0], bits([3])[0]])).toEqual(nanBlock)
      expect(run([0, -0, 0, -0])).toEqual(bits([0, -0, 0, -0]))
      // Float max: the largest scales (e4m3 2^120, e2m1 2^126); the small values underflow to signed zeros.
      const top = run([3.4028234663852886e38, -1, 2 ** -149, -3.4028234663852886e38])
      expect([top[1], top[2]]).toEqual(bits([-0, 0]))
    })

    it(`${element}: property: native == reference on arbitrary bit patterns, any block`, () => {
      fc.assert(fc.property(
        fc.integer({ min: 1, max: 40 }), fc.integer({ min: 0, max: 6 }), fc.integer({ min: 0, max: 2 ** 31 - 1 }), fc.constantFrom(0, 0.05, 0.3),
        (half, blocks, seed, specialRate) => {
          const block = element === 'e2m1' ? 2 * half : half + (seed % 2)
          const rng = makeRng(seed)
          const x = new Float32Array(blocks * block)
          const bits = bitsOf(x)
          const scaleExp = Math.floor(rng() * 276) - 149
          for (let i = 0; i < x.length; i++) {
            if (rng() < specialRate) bits[i] = Math.floor(rng() * 2 ** 32)
            else x[i] = gauss(rng) * 2 ** scaleExp
          }
          expectSameBits(mxRoundTrip(x, block, element), reference.mxRoundTrip(x, block, element))
        }), { numRuns: 400, seed: 20261205 })
    })
  }

  it('refuses bad arguments (NumericsError), in the wrapper and the reference', () => {
    const x = new Float32Array(64)
    const cases: Array<[() => unknown, RegExp]> = [
      [() => mxRoundTrip(new Float64Array(64) as unknown as Float32Array, 32, 'e4m3'), /x must be a Float32Array, got Float64Array/],
      [() => mxRoundTrip(x, 0, 'e4m3'), /block must be an integer >= 1, got 0/],
      [() => mxRoundTrip(x, 1.5, 'e4m3'), /block must be an integer >= 1, got 1.5/],
      [() => mxRoundTrip(x, 48, 'e4m3'), /x has 64 elements, not a multiple of block = 48/],
      [() => mxRoundTrip(x, 1, 'e2m1'), /block must be even for e2m1, got 1/],
      [() => mxRoundTrip(x, 32, 'e5m2' as MxElement), /element must be 'e4m3' or 'e2m1', got "e5m2"/],
      [() => mxRoundTrip(x, 32, 'e4m3', new Float32Array(32)), /out has 32 elements, expected \[length of x\]/],
      [() => mxRoundTrip(x, 32, 'e4m3', [] as unknown as Float32Array), /out must be a Float32Array, got Array/],
      [() => mxRoundTrip(x.subarray(0, 32), 32, 'e4m3', x.subarray(16, 48)), /out overlaps x without being x/],
    ]
    for (const [call, message] of cases) {
      expect(call).toThrow(NumericsError)
      expect(call).toThrow(message)
    }
    expect(() => reference.mxRoundTrip(x, 48, 'e2m1')).toThrow(/^reference.mxRoundTrip: x has 64 elements/)
  })

  it('the raw binding refuses what would read or write outside a buffer', () => {
    const raw = loadNativeKernels()
    const x = new Float32Array(64)
    expect(() => raw.mxRoundTrip(x, 48, 0, new Float32Array(64))).toThrow(RangeError)
    expect(() => raw.mxRoundTrip(x, 32, 0, new Float32Array(32))).toThrow(/out has 32 elements/)
    expect(() => raw.mxRoundTrip(x, 1, 1, new Float32Array(64))).toThrow(/block must be at least 1, and even for e2m1/)
    expect(() => raw.mxRoundTrip(x, 0, 0, new Float32Array(64))).toThrow(RangeError)
    expect(() => raw.mxRoundTrip(x, 32, 2, new Float32Array(64))).toThrow(/element must be 0/)
    expect(() => raw.mxRoundTrip(new Uint16Array(64) as unknown as Float32Array, 32, 0, x)).toThrow(TypeError)
  })
})

describe('decodeBf16Array', () => {
  it(`every one of the 65,536 codes, native == reference == code << 16, at ${THREADS.join(', ')} threads`, () => {
    const copies = Math.ceil(kernelParallelThreshold() / 65536) + 1
    const codes = new Uint16Array(65536 * copies)
    for (let i = 0; i < codes.length; i++) codes[i] = (i * 40503 + Math.floor(i / 65536)) & 0xffff
    const want = reference.decodeBf16Array(codes)
    const w = bitsOf(want)
    for (let i = 0; i < codes.length; i++) if (w[i] !== codes[i] * 65536) expect.fail(`code ${codes[i]} decoded to 0x${w[i].toString(16)}`)
    for (const t of THREADS) expectSameBits(atThreads(t, () => decodeBf16Array(codes)), want)
    const out = new Float32Array(codes.length)
    expect(decodeBf16Array(codes, out)).toBe(out)
    expectSameBits(out, want)
  })

  it('refuses bad arguments', () => {
    const codes = new Uint16Array(8)
    expect(() => decodeBf16Array(new Float32Array(8) as unknown as Uint16Array)).toThrow(/^decodeBf16Array: codes must be a Uint16Array, got Float32Array/)
    expect(() => decodeBf16Array(codes, new Float32Array(7))).toThrow(/out has 7 elements, expected \[length of codes\]/)
    const shared = new ArrayBuffer(64)
    expect(() => decodeBf16Array(new Uint16Array(shared, 0, 8), new Float32Array(shared, 8, 8))).toThrow(/out overlaps codes/)
    expect(() => decodeBf16Array(codes, new Float32Array(7))).toThrow(NumericsError)
    expect(() => loadNativeKernels().decodeBf16Array(codes, new Float32Array(7))).toThrow(RangeError)
  })
})

describe('exactBf16Codes', () => {
  /** Exact bf16 values: every code, in a shuffled order (NaN codes with zero low bits among them), plus NaNs with low bits set. */
  function exactValues (n: number, seed: number): Float32Array {
    const rng = makeRng(seed)
    const bits = new Uint32Array(n)
    const nans = [0x7fc00001, 0xffc00001, 0x7f800001, 0xff80ffff, 0x7fffffff]
    for (let i = 0; i < n; i++) bits[i] = i % 31 === 3 ? nans[i % nans.length] : ((i * 40503) & 0xffff) << 16
    for (let i = n - 1; i > 0; i--) { const j = Math.floor(rng() * (i + 1)); const t = bits[i]; bits[i] = bits[j]; bits[j] = t }
    return new Float32Array(bits.buffer)
  }

  it(`exact values and NaNs of both signs: native == reference at ${THREADS.join(', ')} threads`, () => {
    const values = exactValues(kernelParallelThreshold() + 4099, 5)
    const want = reference.exactBf16Codes(values)
    expect(want).not.toBeNull()
    const u = bitsOf(values)
    for (let i = 0; i < u.length; i++) {
      const expected = (u[i] & 0xffff) === 0 ? u[i] >>> 16 : ((u[i] >>> 16) & 0x8000) | 0x7fc0
      if (want![i] !== expected) expect.fail(`value 0x${u[i].toString(16)} gave code 0x${want![i].toString(16)}`)
    }
    for (const t of THREADS) expect(Buffer.from(atThreads(t, () => exactBf16Codes(values))!.buffer).equals(Buffer.from(want!.buffer))).toBe(true)
    const out = new Uint16Array(values.length)
    expect(exactBf16Codes(values, out)).toBe(out)
  })

  it('one value that is not bf16, anywhere, gives null (native and reference, every thread count)', () => {
    const values = exactValues(kernelParallelThreshold() + 4099, 9)
    const n = values.length
    for (const at of [0, 1, 4095, 4096, 777777, Math.floor(n / 2), Math.floor(n / 3) + 1, n - 1]) {
      const v = values.slice()
      const was = bitsOf(v)[at]
      bitsOf(v)[at] = (was & 0x7f800000) === 0x7f800000 ? 0x3f800001 : was | 1
      expect(reference.exactBf16Codes(v)).toBeNull()
      for (const t of THREADS) expect(atThreads(t, () => exactBf16Codes(v))).toBeNull()
    }
    expect(exactBf16Codes(Float32Array.from([1, 2 ** -136]))).toBeNull()
    expect(exactBf16Codes(Float32Array.from([1, Math.fround(1.1)]))).toBeNull()
    expect(Array.from(exactBf16Codes(new Float32Array(0))!)).toEqual([])
  })

  it('property: native == reference on mostly exact values with a few arbitrary bit patterns', () => {
    fc.assert(fc.property(fc.integer({ min: 0, max: 300 }), fc.integer({ min: 0, max: 2 ** 31 - 1 }), fc.constantFrom(0, 0.002, 0.05),
      (n, seed, rate) => {
        const rng = makeRng(seed)
        const bits = new Uint32Array(n)
        for (let i = 0; i < n; i++) bits[i] = rng() < rate ? Math.floor(rng() * 2 ** 32) : (Math.floor(rng() * 65536) << 16) >>> 0
        const v = new Float32Array(bits.buffer)
        const want = reference.exactBf16Codes(v)
        const got = exactBf16Codes(v)
        if (want === null) expect(got).toBeNull()
        else expect(Array.from(got!)).toEqual(Array.from(want))
      }), { numRuns: 500, seed: 20261205 })
  })

  it('refuses bad arguments', () => {
    expect(() => exactBf16Codes(new Uint16Array(4) as unknown as Float32Array)).toThrow(/^exactBf16Codes: values must be a Float32Array, got Uint16Array/)
    expect(() => exactBf16Codes(new Float32Array(4), new Uint16Array(3))).toThrow(/out has 3 elements, expected \[length of values\]/)
    expect(() => exactBf16Codes(new Float32Array(4), new Uint16Array(3))).toThrow(NumericsError)
    expect(() => loadNativeKernels().exactBf16Codes(new Float32Array(4), new Uint16Array(3))).toThrow(RangeError)
  })
})

describe('the loader: holdMatrix piece by piece == the whole matrix at once', () => {
  // Past two pieces with a partial third, so piece boundaries and a short last piece are covered.
  // The whole-matrix side is the native composition, equal to the reference by the tests above.
  const cols = 4096
  const rows = 2 * (MX_PIECE / cols) + 3
  const same = (a: Uint16Array, b: Uint16Array) => a.length === b.length && Buffer.from(a.buffer, a.byteOffset, a.byteLength).equals(Buffer.from(b.buffer, b.byteOffset, b.byteLength))

  for (const format of ['mxfp8', 'mxfp4'] as const) {
    it(`${format}: float32 and bf16 sources (NaN and Inf among them) give the whole matrix's bf16 codes`, () => {
      const element = format === 'mxfp8' ? 'e4m3' : 'e2m1'
      // Every kind of block, tiled with a period (4,099 blocks) that no piece boundary shares.
      const tile = mxInputs(4099, 32, element, format === 'mxfp8' ? 11 : 12)
      const x = new Float32Array(rows * cols)
      for (let at = 0; at < x.length; at += tile.length) x.set(tile.subarray(0, Math.min(tile.length, x.length - at)), at)
      const fromF32 = holdMatrix({ dtype: 'F32', values: x }, rows, cols, format, 't')
      expect(fromF32.container).toBe('bf16')
      expect(same((fromF32 as { codes: Uint16Array }).codes, exactBf16Codes(mxRoundTrip(x, 32, element))!)).toBe(true)

      const xb = bitsOf(x)
      const codes = new Uint16Array(xb.length)
      for (let i = 0; i < xb.length; i++) codes[i] = xb[i] >>> 16
      const fromBf16 = holdMatrix({ dtype: 'BF16', codes }, rows, cols, format, 't')
      expect(same((fromBf16 as { codes: Uint16Array }).codes, exactBf16Codes(mxRoundTrip(decodeBf16Array(codes), 32, element))!)).toBe(true)
    })
  }
})
