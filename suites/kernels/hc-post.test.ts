// The hyper-connections' write-back kernel (hcPost): native == reference bit for bit, in the bf16
// and f32 activation settings, on random values with ties, infinities and NaNs among them, on the
// tiny and V4-Flash widths; and the reference is the engine's loop as it was (a copy kept here, so
// moving the loop into the kernels changed no bit). hcPost and hcCollapse split one token's streams
// and blocks of hidden between threads: 1, 2, 3 and 7 threads give the reference's bits.
import { afterAll, describe, expect, it } from 'vitest'
import { getKernelThreads, kernelParallelThreshold, hcCollapse, hcPost, reference, setKernelThreads } from '../../src/kernels/index.ts'
import { roundBf16 } from '../../src/numerics/bf16.ts'
import { differingBits, mixedValues } from './fixtures.ts'

const fround = Math.fround
const defaultThreads = getKernelThreads()
afterAll(() => setKernelThreads(defaultThreads))

/** The engine's hcPost before 2026-12-02, verbatim but for the rounding helper. */
function engineLoopAsItWas (h: Float32Array, n: number, postIn: Float32Array, combIn: Float32Array, sub: Float32Array, hc: number, hidden: number, bf16: boolean): Float32Array {
  const roundAll = (a: Float32Array, from = 0, to = a.length): void => { if (bf16) for (let i = from; i < to; i++) a[i] = roundBf16(a[i]) }
  const out = new Float32Array(n * hc * hidden)
  const post = new Float32Array(hc)
  const comb = new Float32Array(hc * hc)
  const placed = new Float32Array(hidden)
  const column = new Float32Array(hc)
  for (let t = 0; t < n; t++) {
    post.set(postIn.subarray(t * hc, (t + 1) * hc))
    comb.set(combIn.subarray(t * hc * hc, (t + 1) * hc * hc))
    roundAll(post)
    roundAll(comb)
    const row = t * hc * hidden
    const subOff = t * hidden
    for (let k = 0; k < hc; k++) {
      const o = row + k * hidden
      for (let j = 0; j < hc; j++) column[j] = comb[j * hc + k]
      const pk = post[k]
      for (let d = 0; d < hidden; d++) {
        let acc = fround(column[0] * h[row + d])
        for (let j = 1; j < hc; j++) acc = fround(acc + fround(column[j] * h[row + j * hidden + d]))
        out[o + d] = acc
        placed[d] = fround(pk * sub[subOff + d])
      }
      if (bf16) {
        roundAll(out, o, o + hidden)
        roundAll(placed)
      }
      for (let d = 0; d < hidden; d++) out[o + d] = fround(placed[d] + out[o + d])
      roundAll(out, o, o + hidden)
    }
  }
  return out
}

describe('hcPost', () => {
  for (const [label, n, hc, hidden] of [['tiny widths', 37, 4, 256], ['V4-Flash width', 9, 4, 4096], ['one stream', 5, 1, 24]] as const) {
    for (const bf16 of [true, false]) {
      it(`${label}, ${bf16 ? 'bf16' : 'f32'} activations: native == reference, every bit (specials included)`, () => {
        for (const special of [false, true]) {
          const seed = n * 31 + hidden + (bf16 ? 1 : 0) + (special ? 7 : 0)
          const h = mixedValues(n * hc * hidden, seed, special)
          const post = mixedValues(n * hc, seed + 1, special)
          const comb = mixedValues(n * hc * hc, seed + 2, special)
          const sub = mixedValues(n * hidden, seed + 3, special)
          const native = hcPost(h, n, post, comb, sub, hc, hidden, bf16)
          const ref = reference.hcPost(h, n, post, comb, sub, hc, hidden, bf16)
          expect(differingBits(native, ref)).toBe(0)
          if (!special) expect(differingBits(ref, engineLoopAsItWas(h, n, post, comb, sub, hc, hidden, bf16))).toBe(0)
        }
      })
    }
  }

  it('refuses shapes that do not fit', () => {
    const f = (k: number) => new Float32Array(k)
    expect(() => hcPost(f(10), 1, f(4), f(16), f(2), 4, 2, true)).toThrow(/h has 10 elements, expected \[n \* hc \* hidden\]/)
    expect(() => hcPost(f(8), 1, f(3), f(16), f(2), 4, 2, true)).toThrow(/post has 3 elements/)
    expect(() => hcPost(f(8), 1, f(4), f(16), f(2), 0, 2, true)).toThrow(/hc must be an integer >= 1/)
  })
})

describe('hcPost and hcCollapse on 1, 2, 3 and 7 threads', () => {
  // Shapes past the split threshold (with or without the pool), hidden not a multiple of the
  // kernels' 512-element blocks; n = 1 is a decode step, which now splits too.
  const shapes = [[1, 16, 4100], [3, 8, 6000]] as const
  it('hcPost: one token and a few, bf16 and f32: every thread count gives the reference\'s bits', () => {
    for (const [n, hc, hidden] of shapes) {
      expect(n * hc * hidden * hc).toBeGreaterThan(kernelParallelThreshold())
      for (const bf16 of [true, false]) {
        const seed = n * 131 + hc + (bf16 ? 1 : 0)
        const h = mixedValues(n * hc * hidden, seed, true)
        const post = mixedValues(n * hc, seed + 1, false)
        const comb = mixedValues(n * hc * hc, seed + 2, false)
        const sub = mixedValues(n * hidden, seed + 3, true)
        const ref = reference.hcPost(h, n, post, comb, sub, hc, hidden, bf16)
        for (const threads of [1, 2, 3, 7]) {
          setKernelThreads(threads)
          expect(differingBits(hcPost(h, n, post, comb, sub, hc, hidden, bf16), ref), `n=${n} bf16=${bf16} threads=${threads}`).toBe(0)
        }
      }
    }
  })

  it('hcCollapse: one token and a few, bf16 and f32: every thread count gives the reference\'s bits', () => {
    for (const [n, hc, hidden] of [[1, 64, 16400], [3, 40, 9000]] as const) {
      expect(n * hc * hidden).toBeGreaterThan(kernelParallelThreshold())
      for (const bf16 of [true, false]) {
        const seed = n * 17 + hc + (bf16 ? 1 : 0)
        const h = mixedValues(n * hc * hidden, seed, true)
        const pre = mixedValues(n * hc, seed + 1, false)
        const ref = reference.hcCollapse(h, n, pre, hc, hidden, bf16)
        for (const threads of [1, 2, 3, 7]) {
          setKernelThreads(threads)
          expect(differingBits(hcCollapse(h, n, pre, hc, hidden, bf16), ref), `n=${n} bf16=${bf16} threads=${threads}`).toBe(0)
        }
      }
    }
  })
})
