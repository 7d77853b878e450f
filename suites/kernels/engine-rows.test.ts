// Three engine loops moved into native kernels (2026-12-04, issue #16: the decoder's TypeScript
// between kernels did not scale to 16 cores): the hyper-connections' collapse (hcCollapse), the
// per-head unweighted RMSNorm (unweightedNormRows) and the indexer's top-k per query (topkRows).
// For each: native == reference, every bit (specials included), at 1 thread and at the default
// count; and the reference == the engine's loop as it was (a copy kept here) on finite inputs,
// so moving the loop changed no bit of the engine.
import fc from 'fast-check'
import { afterAll, describe, expect, it } from 'vitest'
import { dotInKernelOrder, getKernelThreads, hcCollapse, reference, setKernelThreads, topkIndices, topkRow, topkRows, unweightedNormRows } from '../../src/kernels/index.ts'
import { roundBf16 } from '../../src/numerics/bf16.ts'
import { differingBits, makeRng, mixedValues } from './fixtures.ts'

const fround = Math.fround
const defaultThreads = getKernelThreads()
afterAll(() => setKernelThreads(defaultThreads))

const roundAll = (bf16: boolean) => (a: Float32Array, from = 0, to = a.length): void => { if (bf16) for (let i = from; i < to; i++) a[i] = roundBf16(a[i]) }

/** hyper-connections.ts collapse() before 2026-12-04, per token, verbatim but for the rounding helper. */
function collapseAsItWas (h: Float32Array, n: number, pre: Float32Array, hc: number, hidden: number, bf16: boolean): Float32Array {
  const out = new Float32Array(n * hidden)
  for (let t = 0; t < n; t++) {
    const row = t * hc * hidden
    const o = t * hidden
    const w0 = pre[t * hc]
    for (let d = 0; d < hidden; d++) out[o + d] = fround(w0 * h[row + d])
    for (let j = 1; j < hc; j++) {
      const wj = pre[t * hc + j]
      const src = row + j * hidden
      for (let d = 0; d < hidden; d++) out[o + d] = fround(out[o + d] + fround(wj * h[src + d]))
    }
    roundAll(bf16)(out, o, o + hidden)
  }
  return out
}

/** norms.ts unweightedRmsNormInPlace before 2026-12-04, row by row. */
function normAsItWas (x: Float32Array, rows: number, d: number, eps: number, bf16: boolean): Float32Array {
  const round = bf16 ? roundBf16 : (v: number) => v
  for (let r = 0; r < rows; r++) {
    const off = r * d
    const ss = dotInKernelOrder(x, off, x, off, d)
    const f = round(fround(1 / fround(Math.sqrt(fround(fround(ss / d) + fround(eps))))))
    for (let i = off; i < off + d; i++) x[i] = fround(x[i] * f)
    roundAll(bf16)(x, off, off + d)
  }
  return x
}

function atThreads<T> (n: number, f: () => T): T {
  setKernelThreads(n)
  try { return f() } finally { setKernelThreads(defaultThreads) }
}

describe('hcCollapse', () => {
  for (const [label, n, hc, hidden] of [['tiny widths', 37, 4, 256], ['V4-Flash width, threads', 300, 4, 4096], ['one stream', 5, 1, 24]] as const) {
    for (const bf16 of [true, false]) {
      it(`${label}, ${bf16 ? 'bf16' : 'f32'}: native == reference at 1 and ${defaultThreads} threads; reference == the engine's loop as it was`, () => {
        for (const special of [false, true]) {
          const seed = n * 17 + hidden + (bf16 ? 1 : 0) + (special ? 5 : 0)
          const h = mixedValues(n * hc * hidden, seed, special)
          const pre = mixedValues(n * hc, seed + 1, special)
          const ref = reference.hcCollapse(h, n, pre, hc, hidden, bf16)
          expect(differingBits(atThreads(1, () => hcCollapse(h, n, pre, hc, hidden, bf16)), ref)).toBe(0)
          expect(differingBits(hcCollapse(h, n, pre, hc, hidden, bf16), ref)).toBe(0)
          if (!special) expect(differingBits(ref, collapseAsItWas(h, n, pre, hc, hidden, bf16))).toBe(0)
        }
      })
    }
  }

  it('refuses shapes that do not fit', () => {
    const f = (k: number) => new Float32Array(k)
    expect(() => hcCollapse(f(10), 1, f(4), 4, 2, true)).toThrow(/h has 10 elements, expected \[n \* hc \* hidden\]/)
    expect(() => hcCollapse(f(8), 1, f(3), 4, 2, true)).toThrow(/pre has 3 elements/)
    expect(() => hcCollapse(f(8), 1, f(4), 4, 2, true, f(3))).toThrow(/out has 3 elements/)
    expect(() => hcCollapse(f(8), 1, f(4), 0, 2, true)).toThrow(/hc must be an integer >= 1/)
  })
})

describe('unweightedNormRows', () => {
  for (const [label, rows, d] of [['V4-Flash heads (512), threads', 64 * 40, 512], ['tiny heads (64)', 33, 64], ['a tail past the 8 lanes', 9, 77]] as const) {
    for (const bf16 of [true, false]) {
      it(`${label}, ${bf16 ? 'bf16' : 'f32'}: native == reference at 1 and ${defaultThreads} threads; reference == the engine's loop as it was`, () => {
        for (const special of [false, true]) {
          const x = mixedValues(rows * d, rows + d + (bf16 ? 3 : 0) + (special ? 11 : 0), special)
          const eps = 1e-6
          const ref = reference.unweightedNormRows(x.slice(), rows, d, eps, bf16)
          expect(differingBits(atThreads(1, () => unweightedNormRows(x.slice(), rows, d, eps, bf16)), ref)).toBe(0)
          expect(differingBits(unweightedNormRows(x.slice(), rows, d, eps, bf16), ref)).toBe(0)
          if (!special) expect(differingBits(ref, normAsItWas(x.slice(), rows, d, eps, bf16))).toBe(0)
        }
      })
    }
  }

  it('normalises in place and returns x; an all-zero row stays zero (eps > 0)', () => {
    const x = new Float32Array([3, 4, 0, 0])
    expect(unweightedNormRows(x, 2, 2, 0.5, false)).toBe(x)
    const r = fround(1 / fround(Math.sqrt(13))) // mean(9, 16) + 0.5
    expect(Array.from(x)).toEqual([fround(3 * r), fround(4 * r), 0, 0])
  })

  it('refuses bad arguments', () => {
    expect(() => unweightedNormRows(new Float32Array(5), 2, 2, 1e-6, true)).toThrow(/x has 5 elements/)
    expect(() => unweightedNormRows(new Float32Array(4), 2, 0, 1e-6, true)).toThrow(/d must be an integer >= 1/)
    expect(() => unweightedNormRows(new Float32Array(4), 2, 2, NaN, true)).toThrow(/eps must be a finite number/)
  })
})

describe('topkRows', () => {
  const pool = [0, -0, 1, -1, 0.5, 2, Infinity, -Infinity, NaN]

  function check (scores: Float32Array, rows: number, stride: number, lengths: Int32Array, k: number): void {
    const ref = reference.topkRows(scores, rows, stride, lengths, k)
    for (const native of [atThreads(1, () => topkRows(scores, rows, stride, lengths, k)), topkRows(scores, rows, stride, lengths, k)]) {
      expect(Array.from(native.counts)).toEqual(Array.from(ref.counts))
      expect(Array.from(native.indices)).toEqual(Array.from(ref.indices))
    }
    for (let r = 0; r < rows; r++) {
      const row = scores.subarray(r * stride, r * stride + lengths[r])
      expect(Array.from(topkRow(ref, r))).toEqual(Array.from(topkIndices(row, Math.min(k, lengths[r]), { order: 'index' })))
    }
  }

  it('property: the same picks as topkIndices per row, ties, signed zeros, infinities and NaN among the scores', () => {
    fc.assert(fc.property(
      fc.integer({ min: 0, max: 6 }), fc.integer({ min: 0, max: 40 }), fc.integer({ min: 0, max: 45 }), fc.integer({ min: 0, max: 2 ** 31 - 1 }),
      (rows, stride, k, seed) => {
        const rng = makeRng(seed)
        const scores = new Float32Array(rows * stride)
        for (let i = 0; i < scores.length; i++) scores[i] = rng() < 0.6 ? pool[Math.floor(rng() * pool.length)] : rng() - 0.5
        const lengths = Int32Array.from({ length: rows }, () => Math.floor(rng() * (stride + 1)))
        check(scores, rows, stride, lengths, k)
      }), { numRuns: 300, seed: 20261204 })
  })

  it('the indexer\'s shape: 256 queries over 4,096 entries, top 512, visible growing by query (threads)', () => {
    const rows = 256
    const stride = 4096
    const rng = makeRng(7)
    const scores = new Float32Array(rows * stride)
    for (let i = 0; i < scores.length; i++) scores[i] = fround(Math.floor(rng() * 4000) / 64) // many ties
    const lengths = Int32Array.from({ length: rows }, (_, i) => Math.min(stride, 16 * (i + 1)))
    check(scores, rows, stride, lengths, 512)
  })

  it('refuses bad arguments', () => {
    expect(() => topkRows(new Float32Array(5), 2, 2, new Int32Array(2), 1)).toThrow(/scores has 5 elements/)
    expect(() => topkRows(new Float32Array(4), 2, 2, new Int32Array(1), 1)).toThrow(/lengths has 1 elements/)
    expect(() => topkRows(new Float32Array(4), 2, 2, Int32Array.from([1, 3]), 1)).toThrow(/lengths\[1\] = 3 is not within \[0, stride = 2\]/)
    expect(() => topkRows(new Float32Array(4), 2, 2, new Int32Array(2), -1)).toThrow(/k must be a non-negative integer/)
  })
})
