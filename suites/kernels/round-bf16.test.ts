// The activation rounding kernel (roundBf16Array): native == reference bit for bit on random bit
// patterns (every exponent, NaNs of both signs, subnormals, ties) and on every length around the
// 8-lane and native-threshold edges, and both equal the scalar f32ToBf16 the numerics are defined by.
import { describe, expect, it } from 'vitest'
import { loadNativeKernels, reference, roundBf16Array } from '../../src/kernels/index.ts'
import { bf16ToF32, f32ToBf16 } from '../../src/numerics/bf16.ts'
import { makeRng } from './fixtures.ts'

function randomBits (n: number, seed: number): Float32Array {
  const rng = makeRng(seed)
  const a = new Float32Array(n)
  const bits = new Uint32Array(a.buffer)
  for (let i = 0; i < n; i++) {
    const r = Math.floor(rng() * 2 ** 32) >>> 0
    // Every eighth value an exact tie (low half 0x8000) and every sixteenth a NaN or Inf pattern.
    bits[i] = i % 16 === 3 ? (r | 0x7f800000) >>> 0 : i % 8 === 5 ? ((r & 0xffff0000) | 0x8000) >>> 0 : r
  }
  return a
}

describe('roundBf16Array', () => {
  it('native equals the reference on 1M random bit patterns, every bit', () => {
    const a = randomBits(1 << 20, 7)
    const native = Float32Array.from(a)
    loadNativeKernels().roundBf16Array(native)
    const ref = reference.roundBf16Array(Float32Array.from(a))
    const nb = new Uint32Array(native.buffer)
    const rb = new Uint32Array(ref.buffer)
    let differ = 0
    for (let i = 0; i < nb.length; i++) if (nb[i] !== rb[i]) differ++
    expect(differ).toBe(0)
    // And the reference is the scalar conversion (NaN sign kept, quiet).
    const src = new Uint32Array(a.buffer)
    for (let i = 0; i < 4096; i++) {
      const want = new Uint32Array(Float32Array.of(bf16ToF32(f32ToBf16(a[i]))).buffer)[0]
      expect(rb[i], `input 0x${src[i].toString(16)}`).toBe(want)
    }
  })

  it('rounds only [from, to) and gives the same bits on every length and offset around the edges', () => {
    for (const n of [1, 7, 8, 9, 8191, 8192, 8193, 20_000]) {
      for (const from of [0, 1, 3]) {
        const a = randomBits(n + 8, n + from)
        const to = Math.min(a.length, from + n)
        const got = roundBf16Array(Float32Array.from(a), from, to)
        const want = reference.roundBf16Array(Float32Array.from(a), from, to)
        expect(Buffer.compare(Buffer.from(got.buffer), Buffer.from(want.buffer)), `n=${n} from=${from}`).toBe(0)
        expect(Buffer.compare(Buffer.from(got.buffer, 0, from * 4), Buffer.from(a.buffer, 0, from * 4))).toBe(0)
        expect(Buffer.compare(Buffer.from(got.buffer, to * 4), Buffer.from(a.buffer, to * 4))).toBe(0)
      }
    }
  })

  it('refuses a range outside the array and a non-Float32Array', () => {
    expect(() => roundBf16Array(new Float32Array(4), 2, 5)).toThrow(/not a range/)
    expect(() => roundBf16Array(new Float32Array(4), 3, 2)).toThrow(/not a range/)
    expect(() => roundBf16Array(new Float64Array(4) as unknown as Float32Array)).toThrow(/Float32Array/)
  })
})
