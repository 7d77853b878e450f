// The MoE experts stage (native/src/moe_experts.cc, docs/kernels.md "MoE experts"): the native
// moeExperts equals the Math.fround reference (src/kernels/moe-experts.ts) bit for bit, with bf16
// rounding points and without, in every order, for random routes of three picks a token (experts
// with no rows, one row, many), inputs and weights with NaN and infinities, values past the SwiGLU clamp, on 1, 2, 3 and 7 threads
// (the grouped matmuls then split); and bad input is refused before any work.
import { afterAll, describe, expect, it } from 'vitest'
import {
  ACCUMULATION_ORDERS, getKernelThreads, kernelParallelThreshold, moeExperts, reference, setKernelThreads,
} from '../../src/kernels/index.ts'
import { NumericsError } from '../../src/errors.ts'
import { bitReport, bf16Codes, makeRng, mixedF32, uniformF32 } from './fixtures.ts'

const defaultThreads = getKernelThreads()
afterAll(() => setKernelThreads(defaultThreads))

/** A random routing of n tokens to topk distinct experts each (ascending, as the router gives them), with weights. */
function route (n: number, experts: number, topk: number, rng: () => number): { picks: Int32Array, weights: Float32Array } {
  const picks = new Int32Array(n * topk)
  for (let t = 0; t < n; t++) {
    const ids = Array.from({ length: experts }, (_, e) => e).sort(() => rng() - 0.5).slice(0, topk).sort((a, b) => a - b)
    picks.set(ids, t * topk)
  }
  return { picks, weights: uniformF32(n * topk, rng, 1) }
}

/**
 * Experts' bf16 weights; with `specials`, expert 0's gate row 2 holds a NaN (its up row does not:
 * the clamp must keep the NaN) and expert 1's down row 5 an infinity.
 */
function layer (experts: number, hidden: number, inter: number, rng: () => number, specials = false): { gateUps: Uint16Array[], downs: Uint16Array[] } {
  const gateUps = Array.from({ length: experts }, () => bf16Codes(2 * inter * hidden, rng, 0.3))
  const downs = Array.from({ length: experts }, () => bf16Codes(hidden * inter, rng, 0.3))
  if (specials) {
    gateUps[0][2 * hidden + 1] = 0x7fc0
    downs[1][5 * inter + 3] = 0xff80
  }
  return { gateUps, downs }
}

describe('moeExperts: native equals the reference', () => {
  // Three picks a token: the sum of two is the same either way round, of three it is not (in f32).
  it.each(ACCUMULATION_ORDERS)('%s: routes of 0..9 tokens, bf16 and f32 activations, special values', (order) => {
    const rng = makeRng(4200 + ACCUMULATION_ORDERS.indexOf(order))
    const experts = 6
    const hidden = 40
    const inter = 24
    const { gateUps, downs } = layer(experts, hidden, inter, rng, true)
    let finite = 0
    let compared = 0
    for (let n = 0; n <= 9; n++) {
      for (const roundBf16 of [true, false]) {
        // x mixes NaN, infinities and large values; a small limit makes the clamps bite.
        const x = mixedF32(n * hidden, rng, 0.003)
        const { picks, weights } = route(n, experts, 3, rng)
        for (const limit of [0.75, 7]) {
          const ours = moeExperts(x, n, hidden, inter, gateUps, downs, picks, weights, 3, limit, { roundBf16, order })
          const ref = reference.moeExperts(x, n, hidden, inter, gateUps, downs, picks, weights, 3, limit, { roundBf16, order })
          expect(bitReport(ours, ref), `n=${n} roundBf16=${roundBf16} limit=${limit}`).toBe('identical')
          compared += ours.length
          finite += ours.filter(Number.isFinite).length
        }
      }
    }
    expect(compared).toBe(2 * 2 * hidden * 45)
    // The specials reach some outputs, not all: many stay finite, so the arithmetic is compared too.
    expect(finite).toBeGreaterThan(compared / 4)
    expect(finite).toBeLessThan(compared)
  })

  it('the same bits on 1, 2, 3 and 7 threads, with calls large enough to split', () => {
    const rng = makeRng(4210)
    const experts = 5
    const hidden = 256
    const inter = 128
    const n = 12
    const topk = 3
    // The gate_up grouped matmul's work passes the floor under which a call stays on one thread.
    expect(n * topk * hidden * 2 * inter).toBeGreaterThanOrEqual(kernelParallelThreshold())
    const { gateUps, downs } = layer(experts, hidden, inter, rng)
    const x = uniformF32(n * hidden, rng, 1)
    const { picks, weights } = route(n, experts, topk, rng)
    try {
      for (const roundBf16 of [true, false]) {
        const ref = reference.moeExperts(x, n, hidden, inter, gateUps, downs, picks, weights, topk, 10, { roundBf16 })
        for (const threads of [1, 2, 3, 7]) {
          setKernelThreads(threads)
          expect(bitReport(moeExperts(x, n, hidden, inter, gateUps, downs, picks, weights, topk, 10, { roundBf16 }), ref), `threads=${threads} roundBf16=${roundBf16}`).toBe('identical')
        }
      }
    } finally {
      setKernelThreads(defaultThreads)
    }
  })
})

describe('moeExperts: bad input', () => {
  const rng = makeRng(4220)
  const { gateUps, downs } = layer(3, 8, 4, rng)
  const x = new Float32Array(2 * 8)
  const picks = Int32Array.from([0, 2, 1, 2])
  const weights = new Float32Array(4)
  it('refuses an expert id out of range, naming it', () => {
    expect(() => moeExperts(x, 2, 8, 4, gateUps, downs, Int32Array.from([0, 3, 1, 2]), weights, 2, 1)).toThrow(/picks\[1\] = 3 is not an expert id below 3/)
    expect(() => moeExperts(x, 2, 8, 4, gateUps, downs, Int32Array.from([0, -1, 1, 2]), weights, 2, 1)).toThrow(NumericsError)
  })
  it('refuses arrays that do not fit the shapes', () => {
    expect(() => moeExperts(x, 3, 8, 4, gateUps, downs, picks, weights, 2, 1)).toThrow(/x has 16 elements/)
    expect(() => moeExperts(x, 2, 8, 4, [gateUps[0], gateUps[1], new Uint16Array(5)], downs, picks, weights, 2, 1)).toThrow(/gateUps\[2\]/)
    expect(() => moeExperts(x, 2, 8, 4, gateUps, downs.slice(0, 2), picks, weights, 2, 1)).toThrow(/same number of experts/)
    expect(() => moeExperts(x, 2, 8, 4, gateUps, downs, picks, new Float32Array(3), 2, 1)).toThrow(/weights/)
  })
  it('refuses a limit that is not finite and unknown options', () => {
    expect(() => moeExperts(x, 2, 8, 4, gateUps, downs, picks, weights, 2, Number.NaN)).toThrow(/limit must be a finite number/)
    expect(() => moeExperts(x, 2, 8, 4, gateUps, downs, picks, weights, 2, 1, { roundbf16: true } as never)).toThrow(/opts.roundbf16 is not an option/)
    expect(() => moeExperts(x, 2, 8, 4, gateUps, downs, picks, weights, 2, 1, { order: 'packed' as never })).toThrow(/order/)
  })
})
