// The embedded decoder's sampler in process: the PRNG against the authors' C reference, greedy as
// before, each filter keeping what it should, the penalties, log-probabilities of the raw
// distribution, and a seeded sample as a pure function of (logits, options, seed).
import { describe, expect, it } from 'vitest'
import { GREEDY, SequenceSampler, Xoshiro128StarStar, argmaxLogit, keptCandidates, logSumExp, rawLogprobs, type SamplingOptions } from '../../src/engines/decoder/sampling/index.ts'

function options (o: Partial<SamplingOptions>): SamplingOptions {
  return { ...GREEDY, ...o }
}

/** A deterministic logits row: a few peaks over a flat floor. */
function row (vocab: number, peaks: Record<number, number>): Float32Array {
  const r = new Float32Array(vocab).fill(-4)
  for (const [t, v] of Object.entries(peaks)) r[Number(t)] = v
  return r
}

function draws (o: SamplingOptions, logits: Float32Array, count: number, seed = 7): number[] {
  // A fresh sampler per draw sequence; no penalties here, so every step sees the same row.
  const s = new SequenceSampler(o, seed)
  return Array.from({ length: count }, () => s.pick(logits).token)
}

describe('xoshiro128** seeded by SplitMix64', () => {
  // The first outputs of Blackman and Vigna's xoshiro128starstar.c with its state from splitmix64.c
  // (two outputs, low word first), compiled with gcc: a reference that shares no code with ours.
  it.each([
    [0, [3737715805, 2584255861, 2876756834, 3286328325, 1553311962, 1625202774]],
    [42, [1776835114, 4165204688, 17111135, 2317295270, 2792088233, 2554630222]],
    [-1, [477689756, 2493998634, 555695776, 607808419, 61340979, 301466976]],
  ])('seed %i gives the C reference\'s outputs', (seed, want) => {
    const g = new Xoshiro128StarStar(seed)
    expect(Array.from({ length: 6 }, () => g.nextUint32())).toEqual(want)
  })

  it('doubles lie in [0, 1) and a bigint seed is the same seed', () => {
    const a = new Xoshiro128StarStar(42)
    const b = new Xoshiro128StarStar(42n)
    for (let i = 0; i < 1000; i++) {
      const u = a.nextDouble()
      expect(u).toBeGreaterThanOrEqual(0)
      expect(u).toBeLessThan(1)
      expect(b.nextDouble()).toBe(u)
    }
  })
})

describe('greedy', () => {
  it('temperature 0 is the argmax, the lowest id on ties, whatever the seed', () => {
    const logits = row(50, { 3: 2, 9: 5, 17: 5 })
    expect(argmaxLogit(logits)).toBe(9)
    expect(draws(GREEDY, logits, 5, 1)).toEqual([9, 9, 9, 9, 9])
    expect(draws(options({ topP: 0.3, minP: 0.5, topK: 2 }), logits, 3, 2)).toEqual([9, 9, 9])
  })

  it('top_k 1 samples nothing but the most likely token at any temperature', () => {
    const logits = row(50, { 3: 2, 9: 2.5, 17: 1 })
    expect(new Set(draws(options({ temperature: 2, topK: 1 }), logits, 200))).toEqual(new Set([9]))
  })
})

describe('sampling', () => {
  it('is a pure function of (logits, options, seed): the same seed repeats, another seed differs', () => {
    const logits = row(64, { 1: 1, 2: 1.2, 3: 0.8, 4: 1.1 })
    const o = options({ temperature: 1 })
    expect(draws(o, logits, 100, 5)).toEqual(draws(o, logits, 100, 5))
    expect(draws(o, logits, 100, 5)).not.toEqual(draws(o, logits, 100, 6))
    // Choice 1 of seed 5 is choice 0 of seed 6.
    const c1 = new SequenceSampler(o, 5, 1)
    expect(Array.from({ length: 100 }, () => c1.pick(logits).token)).toEqual(draws(o, logits, 100, 6))
  })

  it('draws tokens about as often as their softmax probability at temperature 1', () => {
    const logits = row(8, { 0: 0, 1: Math.log(2), 2: Math.log(3), 3: Math.log(4) })
    const n = 20_000
    const counts = new Array(8).fill(0)
    for (const t of draws(options({ temperature: 1 }), logits, n)) counts[t]++
    const z = Math.exp(logSumExp(logits))
    for (let t = 0; t < 8; t++) {
      const p = Math.exp(logits[t]) / z
      // Four standard deviations of a binomial count: the seed is fixed, so this never flakes.
      expect(Math.abs(counts[t] - n * p), `token ${t}`).toBeLessThan(4 * Math.sqrt(n * p * (1 - p)) + 1)
    }
  })

  it('a low temperature sharpens and a high one flattens', () => {
    const logits = row(8, { 0: 1, 1: 0 })
    const share = (temperature: number): number => draws(options({ temperature }), logits, 4000).filter((t) => t === 0).length / 4000
    expect(share(0.25)).toBeGreaterThan(share(1))
    expect(share(1)).toBeGreaterThan(share(2))
  })

  it('top_k keeps the k largest, top_p the smallest prefix reaching p, min_p tokens at least min_p as likely as the first', () => {
    const scaled = Float64Array.from([0, Math.log(4), Math.log(2), Math.log(2), Math.log(1)])
    // Sorted: 1 (4), 2 (2), 3 (2, a tie: the lower id first), 0 (1), 4 (1); total 10.
    expect(keptCandidates(scaled, { topK: 3, topP: 1, minP: 0 }).ids).toEqual([1, 2, 3])
    expect(keptCandidates(scaled, { topK: 0, topP: 0.4, minP: 0 }).ids).toEqual([1])
    expect(keptCandidates(scaled, { topK: 0, topP: 0.41, minP: 0 }).ids).toEqual([1, 2])
    expect(keptCandidates(scaled, { topK: 0, topP: 0.8, minP: 0 }).ids).toEqual([1, 2, 3])
    expect(keptCandidates(scaled, { topK: 0, topP: 1, minP: 0.5 }).ids).toEqual([1, 2, 3])
    expect(keptCandidates(scaled, { topK: 0, topP: 1, minP: 0.51 }).ids).toEqual([1])
    // In order: top_k 4 leaves 1, 2, 3, 0 (total 9); top_p 0.85 of those keeps 1, 2, 3 (8 of 9; 0.9 would need 0 too); min_p 0.6 keeps 1.
    expect(keptCandidates(scaled, { topK: 4, topP: 0.85, minP: 0 }).ids).toEqual([1, 2, 3])
    expect(keptCandidates(scaled, { topK: 4, topP: 0.9, minP: 0 }).ids).toEqual([1, 2, 3, 0])
    expect(keptCandidates(scaled, { topK: 4, topP: 0.85, minP: 0.6 }).ids).toEqual([1])
  })

  it('never draws a token the filters removed', () => {
    const logits = row(32, { 5: 3, 6: 2.9, 7: 2.8, 8: 1 })
    expect(new Set(draws(options({ temperature: 1.5, topK: 2 }), logits, 500))).toEqual(new Set([5, 6]))
    expect(new Set(draws(options({ temperature: 1, minP: 0.5 }), logits, 500))).toEqual(new Set([5, 6, 7]))
  })
})

describe('penalties', () => {
  it('frequency and presence penalties push a sequence off the token it keeps choosing', () => {
    const logits = row(16, { 2: 1, 3: 0.6 })
    const plain = new SequenceSampler(GREEDY, 0)
    expect([0, 1, 2].map(() => plain.pick(logits).token)).toEqual([2, 2, 2])
    // After one 2, its logit is 1 - 0.5 = 0.5 < 0.6: 3 next, then 2 and 3 alternate as counts grow.
    const freq = new SequenceSampler(options({ frequencyPenalty: 0.5 }), 0)
    expect([0, 1, 2, 3].map(() => freq.pick(logits).token)).toEqual([2, 3, 2, 3])
    const presence = new SequenceSampler(options({ presencePenalty: 0.5 }), 0)
    // Both penalised once: 0.5 vs 0.1, so 2 for good.
    expect([0, 1, 2, 3].map(() => presence.pick(logits).token)).toEqual([2, 3, 2, 2])
    // A negative penalty rewards repetition.
    const negative = new SequenceSampler(options({ frequencyPenalty: -2 }), 0)
    expect([0, 1, 2].map(() => negative.pick(logits).token)).toEqual([2, 2, 2])
  })
})

describe('log-probabilities', () => {
  it('are the log-softmax of the raw logits, before penalties and temperature, top ones in order', () => {
    const logits = row(40, { 4: 3, 11: 2, 12: 2, 30: 1 })
    const s = new SequenceSampler(options({ temperature: 1.7, frequencyPenalty: 1, logprobs: true, topLogprobs: 3 }), 11)
    let total = 0
    for (let i = 0; i < logits.length; i++) total += Math.exp(rawLogprobs(logits, i, 0).chosen.logprob)
    expect(Math.abs(total - 1)).toBeLessThan(1e-12)
    for (let step = 0; step < 5; step++) {
      const pick = s.pick(logits)
      const lp = pick.logprobs
      expect(lp?.chosen).toEqual({ token: pick.token, logprob: logits[pick.token] - logSumExp(logits) })
      expect(lp?.top.map((t) => t.token)).toEqual([4, 11, 12])
      expect(lp?.top[0].logprob).toBe(logits[4] - logSumExp(logits))
    }
    expect(new SequenceSampler(GREEDY, 0).pick(logits).logprobs).toBeUndefined()
  })
})
