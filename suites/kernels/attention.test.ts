// attentionMqa: multi-query attention with sinks over one shared K = V table. Native equals the
// reference bit for bit; a query's result never depends on the batch, the head split or the
// threads; the sum order is the documented one; and the result is within a derived float64 bound.
import { describe, it, expect, afterAll } from 'vitest'
import fc from 'fast-check'
import { attentionMqa, getKernelThreads, reference, setKernelThreads, expF32 } from '../../src/kernels/index.ts'
import type { AttentionOptions } from '../../src/kernels/index.ts'
import { dotInKernelOrder } from '../../src/kernels/order.ts'
import { bitReport, gamma, makeRng, mixedF32, U, uniformF32 } from './fixtures.ts'

const defaultThreads = getKernelThreads()
afterAll(() => setKernelThreads(defaultThreads))

interface Case {
  q: Float32Array, t: number, h: number, d: number, kv: Float32Array, n: number
  offsets: Int32Array, keys: Int32Array, sinks: Float32Array, scale: number
}

/** Random queries, each with 0..maxKeys keys drawn from N rows (repeats and any order allowed). */
function randomCase (rng: () => number, t: number, h: number, d: number, n: number, maxKeys: number, values = uniformF32): Case {
  const offsets = new Int32Array(t + 1)
  const keys: number[] = []
  for (let i = 0; i < t; i++) {
    const count = Math.floor(rng() * (maxKeys + 1))
    for (let j = 0; j < count; j++) keys.push(Math.floor(rng() * n))
    offsets[i + 1] = keys.length
  }
  return {
    q: values(t * h * d, rng, 2), t, h, d, kv: values(n * d, rng, 2), n, offsets, keys: Int32Array.from(keys),
    sinks: uniformF32(h, rng, 3), scale: 1 / Math.sqrt(Math.max(d, 1)),
  }
}

/** Sliding-window keys: query i sees rows max(0, i - window + 1) .. i, oldest first. */
function windowCase (rng: () => number, t: number, h: number, d: number, window: number): Case {
  const offsets = new Int32Array(t + 1)
  const keys: number[] = []
  for (let i = 0; i < t; i++) {
    for (let j = Math.max(0, i - window + 1); j <= i; j++) keys.push(j)
    offsets[i + 1] = keys.length
  }
  return { q: uniformF32(t * h * d, rng, 2), t, h, d, kv: uniformF32(t * d, rng, 2), n: t, offsets, keys: Int32Array.from(keys), sinks: uniformF32(h, rng, 3), scale: 1 / Math.sqrt(d) }
}

const run = (c: Case, o?: AttentionOptions) => attentionMqa(c.q, c.t, c.h, c.d, c.kv, c.n, c.offsets, c.keys, c.sinks, c.scale, undefined, o)
const runRef = (c: Case, o?: AttentionOptions) => reference.attentionMqa(c.q, c.t, c.h, c.d, c.kv, c.n, c.offsets, c.keys, c.sinks, c.scale, undefined, o)

const ALL_OPTIONS: AttentionOptions[] = [
  {}, { roundProbsBf16: true }, { roundOutBf16: true }, { roundScoresBf16: true },
  { roundScoresBf16: true, roundProbsBf16: true, roundOutBf16: true },
]

describe('attentionMqa: native equals the reference bit for bit', () => {
  it('on odd shapes (D of 1, 7, 8, 13, 33, 64, 130), empty key lists and every option set', () => {
    const rng = makeRng(301)
    for (const d of [1, 7, 8, 13, 33, 64, 130]) {
      for (const h of [1, 3, 4]) {
        const c = randomCase(rng, 5, h, d, 23, 70)
        for (const o of ALL_OPTIONS) expect(bitReport(run(c, o), runRef(c, o)), `d=${d} h=${h} ${JSON.stringify(o)}`).toBe('identical')
      }
    }
  })

  it('on a 128-row sliding window with the tiny model shape (4 heads x 128)', () => {
    const c = windowCase(makeRng(302), 150, 4, 128, 128)
    expect(bitReport(run(c), runRef(c))).toBe('identical')
    expect(bitReport(run(c, { roundProbsBf16: true, roundOutBf16: true }), runRef(c, { roundProbsBf16: true, roundOutBf16: true }))).toBe('identical')
  })

  it('on special values: infinities and NaN in q, kv and sinks, -Inf sinks, huge scores', () => {
    const rng = makeRng(303)
    for (let trial = 0; trial < 20; trial++) {
      const c = randomCase(rng, 4, 3, 11, 9, 12, (n, r) => mixedF32(n, r, 0.05))
      c.sinks = Float32Array.from([-Infinity, NaN, 1e30].map((v, i) => (trial % 3 === i ? v : c.sinks[i])))
      for (const o of ALL_OPTIONS) expect(bitReport(run(c, o), runRef(c, o)), `trial ${trial} ${JSON.stringify(o)}`).toBe('identical')
    }
  })

  it('holds for random shapes, key lists, values and options (property)', () => {
    fc.assert(fc.property(
      fc.integer({ min: 1, max: 4 }), fc.integer({ min: 1, max: 5 }), fc.integer({ min: 0, max: 40 }), fc.integer({ min: 1, max: 30 }),
      fc.integer({ min: 0, max: 2 ** 31 - 1 }), fc.boolean(), fc.boolean(), fc.boolean(),
      (t, h, d, n, seed, rs, rp, ro) => {
        const c = randomCase(makeRng(seed), t, h, d, n, 40, (len, r) => mixedF32(len, r, 0.02))
        const o = { roundScoresBf16: rs, roundProbsBf16: rp, roundOutBf16: ro }
        return bitReport(run(c, o), runRef(c, o)) === 'identical'
      }), { numRuns: 200 })
  })

  it('gives +0 outputs for a query without keys (all weight on the sink)', () => {
    const c = randomCase(makeRng(304), 1, 2, 9, 4, 0)
    expect(Array.from(new Uint32Array(run(c).buffer))).toEqual(new Array(18).fill(0))
  })
})

describe('attentionMqa: a query never depends on the batch, the head split or the threads', () => {
  it('query t of a batch equals the call with that query alone', () => {
    const c = randomCase(makeRng(311), 9, 3, 40, 50, 60)
    const batch = run(c)
    for (let t = 0; t < c.t; t++) {
      const keys = c.keys.subarray(c.offsets[t], c.offsets[t + 1])
      const alone = attentionMqa(c.q.subarray(t * 120, (t + 1) * 120), 1, 3, 40, c.kv, c.n, Int32Array.from([0, keys.length]), keys, c.sinks, c.scale)
      expect(bitReport(alone, batch.subarray(t * 120, (t + 1) * 120)), `t=${t}`).toBe('identical')
    }
  })

  it('head h of an 8-head call equals a 1-head call with that head and its sink', () => {
    const c = randomCase(makeRng(312), 3, 8, 24, 30, 40)
    const all = run(c)
    for (let h = 0; h < 8; h++) {
      const q1 = new Float32Array(3 * 24)
      for (let t = 0; t < 3; t++) q1.set(c.q.subarray((t * 8 + h) * 24, (t * 8 + h + 1) * 24), t * 24)
      const one = attentionMqa(q1, 3, 1, 24, c.kv, c.n, c.offsets, c.keys, c.sinks.subarray(h, h + 1), c.scale)
      for (let t = 0; t < 3; t++) {
        expect(bitReport(one.subarray(t * 24, (t + 1) * 24), all.subarray((t * 8 + h) * 24, (t * 8 + h + 1) * 24)), `t=${t} h=${h}`).toBe('identical')
      }
    }
  })

  it('gives identical bits on 1, 2, 3 and 7 threads, for many queries and for one query (heads split)', () => {
    const many = windowCase(makeRng(313), 300, 4, 128, 128)
    const decode = randomCase(makeRng(314), 1, 16, 128, 2000, 1)
    decode.offsets = Int32Array.from([0, 1500])
    decode.keys = Int32Array.from({ length: 1500 }, (_, j) => (j * 7) % 2000)
    setKernelThreads(1)
    const oneMany = run(many)
    const oneDecode = run(decode)
    expect(bitReport(oneDecode, runRef(decode))).toBe('identical')
    for (const threads of [2, 3, 7]) {
      setKernelThreads(threads)
      expect(bitReport(run(many), oneMany), `many threads=${threads}`).toBe('identical')
      expect(bitReport(run(decode), oneDecode), `decode threads=${threads}`).toBe('identical')
    }
  })
})

describe('attentionMqa: the documented order of the softmax sum', () => {
  /** The reference's steps with the sink added FIRST to the sum: a plausible other order. */
  function sinkFirst (c: Case): Float32Array {
    const out = new Float32Array(c.t * c.h * c.d)
    const fr = Math.fround
    for (let t = 0; t < c.t; t++) {
      const k0 = c.offsets[t]
      const K = c.offsets[t + 1] - k0
      for (let h = 0; h < c.h; h++) {
        const qOff = (t * c.h + h) * c.d
        const s = Array.from({ length: K }, (_, j) => fr(dotInKernelOrder(c.q, qOff, c.kv, c.keys[k0 + j] * c.d, c.d) * fr(c.scale)))
        const m = s.reduce((a, b) => (b > a ? b : a), c.sinks[h])
        const e = s.map((v) => expF32(fr(v - m)))
        let sum = expF32(fr(c.sinks[h] - m))
        for (const v of e) sum = fr(sum + v)
        for (let d = 0; d < c.d; d++) {
          let acc = 0
          for (let j = 0; j < K; j++) acc = fr(acc + fr(fr(e[j] / sum) * c.kv[c.keys[k0 + j] * c.d + d]))
          out[qOff + d] = acc
        }
      }
    }
    return out
  }

  it('adds the sink last: the sink-first order gives other bits on the same inputs', () => {
    const c = windowCase(makeRng(321), 40, 2, 16, 40)
    const native = run(c)
    expect(bitReport(native, runRef(c))).toBe('identical')
    expect(bitReport(sinkFirst(c), native)).not.toBe('identical')
  })
})

describe('attentionMqa: within a derived bound of float64 attention', () => {
  it('holds |out - exact| <= (2.5 R + 2 gamma_(K+2)) sum_j p_j |v_j| on every output', () => {
    // Error budget (float32, u = 2^-24): each score s_j carries |ds_j| <= scale gamma_L sum_i |q_i k_i|
    // + u |s_j| (dot in the kernel order, then the scale product); s_j - m adds u |s_j - m|; expF32
    // adds at most 0.76 ulp <= 2u relative. So each e_j is within a factor exp(+-D)(1 +- 2u) with
    // D = max (ds_j + u |s_j - m|), R = exp(D)(1 + 2u) - 1, and the ratio p_j = e_j / sum is within
    // 2R (both ends) plus gamma_(K+1) (the sum) and u (the divide). The output's K products and adds
    // add gamma_(K+1) of sum |p_j v_j|. First-order total: (2R + 2 gamma_(K+2)) sum p_j |v_j|; the
    // 2.5 R covers the second-order terms of exp(D).
    const rng = makeRng(331)
    for (const [d, h, maxKeys] of [[16, 2, 30], [128, 4, 140], [57, 3, 300]] as const) {
      const c = randomCase(rng, 6, h, d, 200, maxKeys)
      const out = run(c)
      const L = 1 + Math.floor(d / 8) + 3 + (d % 8)
      const scale32 = Math.fround(c.scale)
      for (let t = 0; t < c.t; t++) {
        const k0 = c.offsets[t]
        const K = c.offsets[t + 1] - k0
        for (let hh = 0; hh < h; hh++) {
          const qOff = (t * h + hh) * d
          const s = new Float64Array(K)
          const sAbs = new Float64Array(K)
          for (let j = 0; j < K; j++) {
            let dot = 0
            let abs = 0
            for (let i = 0; i < d; i++) {
              dot += c.q[qOff + i] * c.kv[c.keys[k0 + j] * d + i]
              abs += Math.abs(c.q[qOff + i] * c.kv[c.keys[k0 + j] * d + i])
            }
            s[j] = dot * scale32
            sAbs[j] = abs * scale32
          }
          const sink = c.sinks[hh]
          const m = Math.max(sink, ...s)
          let D = 0
          for (let j = 0; j < K; j++) D = Math.max(D, gamma(L) * sAbs[j] + U * Math.abs(s[j]) + U * (Math.abs(s[j] - m) + 1e-30))
          D = Math.max(D, U * Math.abs(sink - m))
          const R = Math.exp(D) * (1 + 2 * U) - 1
          const e = Array.from(s, (v) => Math.exp(v - m))
          const sum = e.reduce((a, b) => a + b, 0) + Math.exp(sink - m)
          for (let i = 0; i < d; i++) {
            let exact = 0
            let mass = 0
            for (let j = 0; j < K; j++) {
              const v = c.kv[c.keys[k0 + j] * d + i]
              exact += (e[j] / sum) * v
              mass += (e[j] / sum) * Math.abs(v)
            }
            const bound = (2.5 * R + 2 * gamma(K + 2)) * mass
            expect(Math.abs(out[qOff + i] - exact), `d=${d} t=${t} h=${hh} i=${i}`).toBeLessThanOrEqual(bound)
          }
        }
      }
    }
  })
})

describe('attentionMqa: bad arguments', () => {
  const c = randomCase(makeRng(341), 2, 2, 4, 5, 3)
  const F = (n: number) => new Float32Array(n)
  const cases: Array<[string, () => unknown, RegExp]> = [
    ['q length', () => attentionMqa(F(15), 2, 2, 4, c.kv, 5, c.offsets, c.keys, c.sinks, 1), /q has 15 elements, expected \[T, H, D\] = 2 x 2 x 4 = 16/],
    ['kv length', () => attentionMqa(c.q, 2, 2, 4, F(19), 5, c.offsets, c.keys, c.sinks, 1), /kv has 19 elements, expected \[N, D\] = 5 x 4 = 20/],
    ['offsets length', () => attentionMqa(c.q, 2, 2, 4, c.kv, 5, Int32Array.from([0, 0]), c.keys, c.sinks, 1), /offsets has 2 elements, expected \[T \+ 1\] = 3 = 3/],
    ['offsets[0]', () => attentionMqa(c.q, 2, 2, 4, c.kv, 5, Int32Array.from([1, 1, 1]), Int32Array.from([0]), c.sinks, 1), /offsets\[0\] must be 0, got 1/],
    ['decreasing offsets', () => attentionMqa(c.q, 2, 2, 4, c.kv, 5, Int32Array.from([0, 2, 1]), Int32Array.from([0]), c.sinks, 1), /offsets must be non-decreasing, but offsets\[2\] = 1 < offsets\[1\] = 2/],
    ['offsets end', () => attentionMqa(c.q, 2, 2, 4, c.kv, 5, Int32Array.from([0, 1, 2]), Int32Array.from([0]), c.sinks, 1), /offsets\[T\] = 2 must equal the length of keyIndex, 1/],
    ['key range', () => attentionMqa(c.q, 2, 2, 4, c.kv, 5, Int32Array.from([0, 1, 2]), Int32Array.from([0, 5]), c.sinks, 1), /keyIndex\[1\] = 5 is outside the 5 rows of kv/],
    ['negative key', () => attentionMqa(c.q, 2, 2, 4, c.kv, 5, Int32Array.from([0, 1, 1]), Int32Array.from([-1]), c.sinks, 1), /keyIndex\[0\] = -1 is outside/],
    ['keyIndex type', () => attentionMqa(c.q, 2, 2, 4, c.kv, 5, c.offsets, Array.from(c.keys) as unknown as Int32Array, c.sinks, 1), /keyIndex must be a Int32Array, got Array/],
    ['sinks length', () => attentionMqa(c.q, 2, 2, 4, c.kv, 5, c.offsets, c.keys, F(3), 1), /sinks has 3 elements, expected \[H\] = 2 = 2/],
    ['scale', () => attentionMqa(c.q, 2, 2, 4, c.kv, 5, c.offsets, c.keys, c.sinks, NaN), /scale must be a finite number, got NaN/],
    ['option name', () => attentionMqa(c.q, 2, 2, 4, c.kv, 5, c.offsets, c.keys, c.sinks, 1, undefined, { roundProbs: true } as AttentionOptions), /opts.roundProbs is not an option \(expected roundScoresBf16, roundProbsBf16, roundOutBf16\)/],
    ['option type', () => attentionMqa(c.q, 2, 2, 4, c.kv, 5, c.offsets, c.keys, c.sinks, 1, undefined, { roundOutBf16: 1 as unknown as boolean }), /opts.roundOutBf16 must be a boolean, got number/],
    ['out overlapping q', () => attentionMqa(c.q, 2, 2, 4, c.kv, 5, c.offsets, c.keys, c.sinks, 1, c.q), /out overlaps q in memory/],
  ]
  for (const [name, call, message] of cases) {
    it(`refuses a bad ${name} with a NumericsError naming it`, () => {
      expect(call).toThrow(new RegExp('^attentionMqa: ' + message.source))
    })
  }

  it('refuses the same in the reference, and the raw binding refuses out-of-range keys itself', async () => {
    expect(() => reference.attentionMqa(c.q, 2, 2, 4, c.kv, 5, Int32Array.from([0, 1, 2]), Int32Array.from([0, 5]), c.sinks, 1))
      .toThrow(/^reference.attentionMqa: keyIndex\[1\] = 5 is outside/)
    const { loadNativeKernels } = await import('../../src/kernels/index.ts')
    const raw = loadNativeKernels()
    expect(() => raw.attentionMqa(c.q, 2, 2, 4, c.kv, 5, Int32Array.from([0, 1, 2]), Int32Array.from([0, 5]), c.sinks, 1, 0, F(16)))
      .toThrow(RangeError)
    expect(() => raw.attentionMqa(c.q, 2, 2, 4, c.kv, 5, Int32Array.from([0, 3, 2]), Int32Array.from([0, 1]), c.sinks, 1, 0, F(16)))
      .toThrow(/non-decreasing/)
    expect(() => raw.attentionMqa(c.q, 2 ** 40, 2 ** 20, 4, c.kv, 5, c.offsets, c.keys, c.sinks, 1, 0, F(16)))
      .toThrow(RangeError)
  })
})
