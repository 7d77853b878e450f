// softmaxPool: the compressor's per-channel softmax pooling. Native equals the reference bit for bit,
// a window never depends on the batch, the channel split or the threads, -Inf rows weigh nothing,
// and the result is within a derived float64 bound.
import { describe, it, expect, afterAll } from 'vitest'
import fc from 'fast-check'
import { expF32, getKernelThreads, reference, setKernelThreads, softmaxPool } from '../../src/kernels/index.ts'
import type { PoolOptions } from '../../src/kernels/index.ts'
import { bitReport, gamma, makeRng, mixedF32, U, uniformF32 } from './fixtures.ts'

const defaultThreads = getKernelThreads()
afterAll(() => setKernelThreads(defaultThreads))

/** kv and gate [W, rows, d]; a share of the gates is -Inf (the overlap layout's empty slots). */
function randomPool (rng: () => number, w: number, rows: number, d: number, infRate = 0.1, values = uniformF32) {
  const kv = values(w * rows * d, rng, 2)
  const gate = values(w * rows * d, rng, 4)
  for (let i = 0; i < gate.length; i++) if (rng() < infRate) gate[i] = -Infinity
  return { kv, gate, w, rows, d }
}

type Pool = ReturnType<typeof randomPool>
const run = (p: Pool, o?: PoolOptions) => softmaxPool(p.kv, p.gate, p.w, p.rows, p.d, undefined, o)
const runRef = (p: Pool, o?: PoolOptions) => reference.softmaxPool(p.kv, p.gate, p.w, p.rows, p.d, undefined, o)

const ALL_OPTIONS: PoolOptions[] = [
  {}, { roundWeightsBf16: true }, { roundProductsBf16: true }, { roundOutBf16: true },
  { roundWeightsBf16: true, roundProductsBf16: true, roundOutBf16: true },
]

describe('softmaxPool: native equals the reference bit for bit', () => {
  it('on the compressor shapes (rows 4, 8, 128) and odd ones (rows 1, 3; d 1, 7, 9, 63, 65, 515), every option set', () => {
    const rng = makeRng(501)
    for (const [rows, d] of [[4, 128], [8, 512], [128, 64], [1, 7], [3, 9], [8, 63], [8, 65], [4, 515], [2, 1]] as const) {
      const p = randomPool(rng, 3, rows, d)
      for (const o of ALL_OPTIONS) expect(bitReport(run(p, o), runRef(p, o)), `rows=${rows} d=${d} ${JSON.stringify(o)}`).toBe('identical')
    }
  })

  it('on special values: NaN and +-Inf gates and values, all -Inf windows, huge gate spreads', () => {
    const rng = makeRng(502)
    for (let trial = 0; trial < 10; trial++) {
      const p = randomPool(rng, 4, 8, 19, 0.3, (n, r) => mixedF32(n, r, 0.05))
      for (const o of ALL_OPTIONS) expect(bitReport(run(p, o), runRef(p, o)), `trial ${trial}`).toBe('identical')
    }
  })

  it('holds for random shapes and values (property)', () => {
    fc.assert(fc.property(
      fc.integer({ min: 0, max: 4 }), fc.integer({ min: 1, max: 10 }), fc.integer({ min: 0, max: 150 }),
      fc.integer({ min: 0, max: 2 ** 31 - 1 }), fc.boolean(), fc.boolean(), fc.boolean(),
      (w, rows, d, seed, rw, rp, ro) => {
        const p = randomPool(makeRng(seed), w, rows, d, 0.2, (n, r) => mixedF32(n, r, 0.02))
        const o = { roundWeightsBf16: rw, roundProductsBf16: rp, roundOutBf16: ro }
        return bitReport(run(p, o), runRef(p, o)) === 'identical'
      }), { numRuns: 200 })
  })

  it('gives -Inf rows weight 0 and an all -Inf channel NaN (as torch), exactly', () => {
    // d = 1: rows [-Inf gate, kv 100], [0 gate, kv 3], [0 gate, kv 5] -> (3 + 5) / 2 = 4.
    const y = softmaxPool(Float32Array.from([100, 3, 5]), Float32Array.from([-Infinity, 0, 0]), 1, 3, 1)
    expect(y[0]).toBe(4)
    const allInf = softmaxPool(Float32Array.from([1, 2]), Float32Array.from([-Infinity, -Infinity]), 1, 2, 1)
    expect(new Uint32Array(allInf.buffer)[0]).toBe(0x7fc00000)
    // One row: weight exp(0) / exp(0) = 1, so the row is copied.
    const one = uniformF32(9, makeRng(503))
    expect(bitReport(softmaxPool(one, uniformF32(9, makeRng(504)), 1, 1, 9), one)).toBe('identical')
  })
})

describe('softmaxPool: a window never depends on the batch, the channel split or the threads', () => {
  it('window w of a batch equals the call with that window alone', () => {
    const p = randomPool(makeRng(511), 6, 8, 200)
    const batch = run(p)
    const size = 8 * 200
    for (let w = 0; w < 6; w++) {
      const alone = softmaxPool(p.kv.subarray(w * size, (w + 1) * size), p.gate.subarray(w * size, (w + 1) * size), 1, 8, 200)
      expect(bitReport(alone, batch.subarray(w * 200, (w + 1) * 200)), `w=${w}`).toBe('identical')
    }
  })

  it('gives identical bits on 1, 2, 3 and 7 threads (many windows, and one wide window split by channels)', () => {
    const many = randomPool(makeRng(512), 600, 8, 128)
    const wide = randomPool(makeRng(513), 1, 128, 8192)
    setKernelThreads(1)
    const oneMany = run(many)
    const oneWide = run(wide)
    expect(bitReport(oneWide, runRef(wide))).toBe('identical')
    for (const threads of [2, 3, 7]) {
      setKernelThreads(threads)
      expect(bitReport(run(many), oneMany), `many threads=${threads}`).toBe('identical')
      expect(bitReport(run(wide), oneWide), `wide threads=${threads}`).toBe('identical')
    }
  })
})

describe('softmaxPool: the documented order', () => {
  it('sums weights and products row by row: a pairwise (tree) sum gives other bits', () => {
    const p = randomPool(makeRng(521), 20, 8, 16, 0)
    const native = run(p)
    const fr = Math.fround
    const tree = new Float32Array(p.w * p.d)
    const pairwise = (v: number[]): number => (v.length === 1 ? v[0] : fr(pairwise(v.slice(0, v.length / 2)) + pairwise(v.slice(v.length / 2))))
    for (let w = 0; w < p.w; w++) {
      for (let c = 0; c < p.d; c++) {
        const g = Array.from({ length: 8 }, (_, r) => p.gate[(w * 8 + r) * p.d + c])
        const m = g.reduce((a, b) => (b > a ? b : a))
        const e = g.map((x) => expF32(fr(x - m)))
        const sum = pairwise(e)
        tree[w * p.d + c] = pairwise(e.map((x, r) => fr(fr(x / sum) * p.kv[(w * 8 + r) * p.d + c])))
      }
    }
    expect(bitReport(native, runRef(p))).toBe('identical')
    expect(bitReport(tree, native)).not.toBe('identical')
  })
})

describe('softmaxPool: within a derived bound of float64 pooling', () => {
  it('holds |y - exact| <= (2.5 R + 2 gamma_(rows+2)) sum_r p_r |kv_r| on every output', () => {
    // g_r - m rounds once (u |g_r - m|), expF32 adds at most 0.76 ulp <= 2u relative, so each e_r is
    // within exp(+-D)(1 +- 2u), D = u max |g_r - m|, R = exp(D)(1 + 2u) - 1; p_r = e_r / sum is then
    // within 2R plus gamma_(rows+1) (sum, divide); the weighted sum adds gamma_(rows+1) of
    // sum |p_r kv_r|. The 2.5 R covers second-order terms.
    const rng = makeRng(531)
    for (const [rows, d] of [[8, 64], [4, 33], [128, 16]] as const) {
      const p = randomPool(rng, 5, rows, d, 0.1)
      const y = run(p)
      for (let w = 0; w < p.w; w++) {
        for (let c = 0; c < d; c++) {
          const g = Array.from({ length: rows }, (_, r) => p.gate[(w * rows + r) * d + c])
          const v = Array.from({ length: rows }, (_, r) => p.kv[(w * rows + r) * d + c])
          const m = Math.max(...g)
          const e = g.map((x) => Math.exp(x - m))
          const sum = e.reduce((a, b) => a + b, 0)
          let exact = 0
          let mass = 0
          let D = 0
          for (let r = 0; r < rows; r++) {
            exact += (e[r] / sum) * v[r]
            mass += (e[r] / sum) * Math.abs(v[r])
            if (g[r] > -Infinity) D = Math.max(D, U * Math.abs(g[r] - m))
          }
          const R = Math.exp(D) * (1 + 2 * U) - 1
          expect(Math.abs(y[w * d + c] - exact), `rows=${rows} w=${w} c=${c}`).toBeLessThanOrEqual((2.5 * R + 2 * gamma(rows + 2)) * mass)
        }
      }
    }
  })
})

describe('softmaxPool: bad arguments', () => {
  it('refuses wrong shapes, zero rows, unknown options and overlapping outputs', () => {
    const kv = new Float32Array(24)
    const gate = new Float32Array(24)
    expect(() => softmaxPool(kv, gate.subarray(1), 2, 3, 4)).toThrow(/^softmaxPool: gate has 23 elements, expected \[W, rows, d\] = 2 x 3 x 4 = 24/)
    expect(() => softmaxPool(new Float32Array(0), new Float32Array(0), 2, 0, 4)).toThrow(/^softmaxPool: rows must be at least 1, got 0/)
    expect(() => softmaxPool(kv, gate, 2, 3, 4, undefined, { roundOut: true } as PoolOptions)).toThrow(/^softmaxPool: opts.roundOut is not an option/)
    expect(() => softmaxPool(kv, gate, 2, 3, 4, kv.subarray(0, 8))).toThrow(/^softmaxPool: out overlaps kv in memory/)
    expect(() => reference.softmaxPool(kv, gate, 2, 3, 4, new Float32Array(7))).toThrow(/^reference.softmaxPool: out has 7 elements, expected \[W, d\] = 2 x 4 = 8/)
  })
})
