// indexerScores and topkIndices: the lightning indexer's scores (native equals the reference,
// batch and thread invariant, within a derived float64 bound) and its top-k selection.
import { describe, it, expect, afterAll } from 'vitest'
import fc from 'fast-check'
import { getKernelThreads, indexerScores, reference, setKernelThreads, topkIndices } from '../../src/kernels/index.ts'
import { bitReport, gamma, makeRng, mixedF32, U, uniformF32 } from './fixtures.ts'

const defaultThreads = getKernelThreads()
afterAll(() => setKernelThreads(defaultThreads))

interface Case {
  q: Float32Array, t: number, h: number, d: number, entries: Float32Array, n: number, weights: Float32Array, visible: Int32Array
}

function randomCase (rng: () => number, t: number, h: number, d: number, n: number, values = uniformF32): Case {
  return {
    q: values(t * h * d, rng, 1), t, h, d, entries: values(n * d, rng, 1), n, weights: values(t * h, rng, 2),
    visible: Int32Array.from({ length: t }, () => Math.floor(rng() * (n + 1))),
  }
}

const QS = 1 / Math.sqrt(128)
const WS = 0.5
const run = (c: Case) => indexerScores(c.q, c.t, c.h, c.d, c.entries, c.n, c.weights, c.visible, QS, WS)
const runRef = (c: Case) => reference.indexerScores(c.q, c.t, c.h, c.d, c.entries, c.n, c.weights, c.visible, QS, WS)

describe('indexerScores: native equals the reference bit for bit', () => {
  it('on odd shapes (Hi 1..5, Di 1, 7, 8, 9, 128, 129; T not a multiple of the query block)', () => {
    const rng = makeRng(401)
    for (const d of [1, 7, 8, 9, 128, 129]) {
      for (const h of [1, 2, 5]) {
        const c = randomCase(rng, 11, h, d, 70)
        c.visible[0] = 0
        c.visible[1] = c.n
        expect(bitReport(run(c), runRef(c)), `d=${d} h=${h}`).toBe('identical')
      }
    }
  })

  it('on special values (zeros of both signs, infinities, NaN) and on exact ties', () => {
    const rng = makeRng(402)
    for (let trial = 0; trial < 10; trial++) {
      const c = randomCase(rng, 9, 3, 10, 20, (n, r) => mixedF32(n, r, 0.08))
      expect(bitReport(run(c), runRef(c)), `trial ${trial}`).toBe('identical')
    }
  })

  it('holds for random shapes and values (property)', () => {
    fc.assert(fc.property(
      fc.integer({ min: 0, max: 20 }), fc.integer({ min: 1, max: 6 }), fc.integer({ min: 0, max: 40 }), fc.integer({ min: 0, max: 90 }),
      fc.integer({ min: 0, max: 2 ** 31 - 1 }),
      (t, h, d, n, seed) => {
        const c = randomCase(makeRng(seed), t, h, d, n, (len, r) => mixedF32(len, r, 0.02))
        return bitReport(run(c), runRef(c)) === 'identical'
      }), { numRuns: 150 })
  })

  it('scores -Inf exactly from visible[t] on, and relu drops negative dots (+0, not -0)', () => {
    // One head, one dim: score = (w * ws) * (relu(q e) * qs).
    const q = Float32Array.from([1, -1, 2])
    const entries = Float32Array.from([3, -2, 0.5])
    const weights = Float32Array.from([1, -1, 2])
    const out = indexerScores(q, 3, 1, 1, entries, 3, weights, Int32Array.from([3, 2, 0]), 1, 1)
    expect(Array.from(out)).toEqual([3, 0, 0.5, 0, -2, -Infinity, -Infinity, -Infinity, -Infinity])
    // t = 0, n = 1: relu(-2) = +0 times w = 1: +0. t = 1, n = 0: relu(-3) = +0 times -1: -0, plus the +0 start: +0.
    expect(Object.is(out[1], 0)).toBe(true)
    expect(Object.is(out[3], 0)).toBe(true)
  })
})

describe('indexerScores: a query never depends on the batch or the threads', () => {
  it('query t of a batch equals the call with that query alone', () => {
    const c = randomCase(makeRng(411), 13, 4, 33, 60)
    const batch = run(c)
    for (let t = 0; t < c.t; t++) {
      const alone = indexerScores(c.q.subarray(t * 132, (t + 1) * 132), 1, 4, 33, c.entries, c.n,
        c.weights.subarray(t * 4, (t + 1) * 4), c.visible.subarray(t, t + 1), QS, WS)
      expect(bitReport(alone, batch.subarray(t * c.n, (t + 1) * c.n)), `t=${t}`).toBe('identical')
    }
  })

  it('gives identical bits on 1, 2, 3 and 7 threads on a call large enough to split', () => {
    const rng = makeRng(412)
    const c = randomCase(rng, 203, 4, 128, 700)
    setKernelThreads(1)
    const one = run(c)
    expect(bitReport(one, runRef(c))).toBe('identical')
    for (const threads of [2, 3, 7]) {
      setKernelThreads(threads)
      expect(bitReport(run(c), one), `threads=${threads}`).toBe('identical')
    }
  })
})

describe('indexerScores: one query (decode) splits its entries between threads', () => {
  it('gives the reference\'s bits on 1, 2, 3 and 7 threads for 1 and 3 queries over 3,000 entries', () => {
    for (const t of [1, 3]) {
      const c = randomCase(makeRng(430 + t), t, 8, 128, 3000)
      c.visible[0] = 2999
      const ref = runRef(c)
      for (const threads of [1, 2, 3, 7]) {
        setKernelThreads(threads)
        expect(bitReport(run(c), ref), `t=${t} threads=${threads}`).toBe('identical')
      }
    }
  })
})

describe('indexerScores: the heads are summed in order', () => {
  it('reversing the head order gives other bits on the same inputs', () => {
    const c = randomCase(makeRng(421), 8, 6, 16, 40)
    c.visible.fill(40)
    const native = run(c)
    const reversed = new Float32Array(native.length)
    const fr = Math.fround
    for (let t = 0; t < c.t; t++) {
      for (let n = 0; n < c.n; n++) {
        let acc = 0
        for (let h = c.h - 1; h >= 0; h--) {
          // relu(dot) in the kernel order: the reference with one head and unit weights and scales
          const relu = reference.indexerScores(c.q.subarray((t * c.h + h) * 16, (t * c.h + h + 1) * 16), 1, 1, 16,
            c.entries.subarray(n * 16, (n + 1) * 16), 1, Float32Array.of(1), Int32Array.of(1), 1, 1)[0]
          acc = fr(acc + fr(fr(c.weights[t * c.h + h] * fr(WS)) * fr(relu * fr(QS))))
        }
        reversed[t * c.n + n] = acc
      }
    }
    expect(bitReport(reversed, native)).not.toBe('identical')
  })
})

describe('indexerScores: within a derived bound of float64 scores', () => {
  it('holds |score - exact| <= sum_h |w_h| qs (gamma_L S_h + 4u relu(d_h)) + gamma_Hi sum_h |term_h|', () => {
    // Each dot carries gamma_L * S_h (S_h = sum_i |q_i e_i|, kernel order); relu is 1-Lipschitz; the
    // three products (w * ws, relu * qs, their product) add at most 3u relative, rounded up to 4u;
    // the sequential head sum adds gamma_Hi of the sum of |terms|.
    const rng = makeRng(431)
    for (const [h, d] of [[4, 128], [8, 128], [3, 37]] as const) {
      const c = randomCase(rng, 5, h, d, 50)
      c.visible.fill(50)
      const out = run(c)
      const L = 1 + Math.floor(d / 8) + 3 + (d % 8)
      const qs = Math.fround(QS)
      const ws = Math.fround(WS)
      for (let t = 0; t < c.t; t++) {
        for (let n = 0; n < c.n; n++) {
          let exact = 0
          let bound = 0
          let mass = 0
          for (let hh = 0; hh < h; hh++) {
            let dot = 0
            let S = 0
            for (let i = 0; i < d; i++) {
              const p = c.q[(t * h + hh) * d + i] * c.entries[n * d + i]
              dot += p
              S += Math.abs(p)
            }
            const w = c.weights[t * h + hh] * ws
            const term = w * Math.max(dot, 0) * qs
            exact += term
            mass += Math.abs(term)
            bound += Math.abs(w) * qs * (gamma(L) * S + 4 * U * Math.max(dot, 0))
          }
          bound += gamma(h) * mass
          expect(Math.abs(out[t * c.n + n] - exact), `t=${t} n=${n}`).toBeLessThanOrEqual(bound)
        }
      }
    }
  })
})

describe('indexerScores: bad arguments', () => {
  const c = randomCase(makeRng(441), 2, 2, 3, 4)
  it('refuses wrong shapes, visible counts and scales with messages naming them', () => {
    expect(() => indexerScores(c.q, 2, 2, 3, c.entries, 4, c.weights, Int32Array.from([0, 5]), 1, 1))
      .toThrow(/^indexerScores: visible\[1\] = 5 is outside \[0, N = 4\]/)
    expect(() => indexerScores(c.q, 2, 2, 3, c.entries, 4, c.weights.subarray(1), c.visible, 1, 1))
      .toThrow(/^indexerScores: weights has 3 elements, expected \[T, Hi\] = 2 x 2 = 4/)
    expect(() => indexerScores(c.q, 2, 2, 3, c.entries, 4, c.weights, c.visible, Infinity, 1))
      .toThrow(/^indexerScores: qScale must be a finite number, got Infinity/)
    expect(() => reference.indexerScores(c.q, 2, 2, 3, c.entries.subarray(1), 4, c.weights, c.visible, 1, 1))
      .toThrow(/^reference.indexerScores: entries has 11 elements, expected \[N, Di\] = 4 x 3 = 12/)
  })
})

/** The top-k oracle: sort all pickable indices by (score desc, index asc), keep k. */
function oracle (s: Float32Array, k: number): number[] {
  const idx = Array.from(s.keys()).filter((i) => s[i] > -Infinity)
  idx.sort((a, b) => (s[a] !== s[b] ? s[b] - s[a] : a - b))
  return idx.slice(0, k)
}

describe('topkIndices: the k best, ties to the lower index, -Inf and NaN never picked', () => {
  it('matches a full-sort oracle on random rows with many ties (property)', () => {
    fc.assert(fc.property(
      fc.array(fc.constantFrom(-Infinity, -1, -0, 0, 0.5, 1, 2, Infinity, NaN), { maxLength: 60 }), fc.integer({ min: 0, max: 70 }),
      (values, k) => {
        const s = Float32Array.from(values)
        const got = Array.from(topkIndices(s, k))
        const want = oracle(s, k)
        const byIndex = Array.from(topkIndices(s, k, { order: 'index' }))
        return JSON.stringify(got) === JSON.stringify(want) && JSON.stringify(byIndex) === JSON.stringify([...want].sort((a, b) => a - b))
      }), { numRuns: 500 })
  })

  it('keeps the lower index on a tie at the cut, treats +0 and -0 as one score', () => {
    expect(Array.from(topkIndices(Float32Array.from([1, 3, 3, 3, 2]), 2))).toEqual([1, 2])
    expect(Array.from(topkIndices(Float32Array.from([-0, 0, -0]), 2))).toEqual([0, 1])
    expect(Array.from(topkIndices(Float32Array.from([-Infinity, NaN, -Infinity]), 3))).toEqual([])
    expect(Array.from(topkIndices(Float32Array.from([5, 4]), 0))).toEqual([])
    expect(Array.from(topkIndices(Float32Array.from([0, 1, 2, 3, 4, 5, 6, 7]), 3, { order: 'index' }))).toEqual([5, 6, 7])
  })

  it('picks from indexer rows: never an entry past visible[t]', () => {
    const c = randomCase(makeRng(451), 10, 4, 16, 30)
    const scores = run(c)
    for (let t = 0; t < c.t; t++) {
      const picked = topkIndices(scores.subarray(t * 30, (t + 1) * 30), 8)
      expect(picked.length).toBe(Math.min(8, c.visible[t]))
      for (const i of picked) expect(i).toBeLessThan(c.visible[t])
    }
  })
})
