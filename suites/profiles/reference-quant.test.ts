import { describe, expect, it } from 'vitest'
import fc from 'fast-check'
import { NumericsError } from '../../src/errors.ts'
import {
  bf16Fp4RoundTrip, fp8NopeRoundTrip, getProfile, hadamardTransform, indexerFp4RoundTrip, referenceQuantHooks,
} from '../../src/model/profiles/index.ts'
import { bf16ToF32, roundBf16 } from '../../src/numerics/bf16.ts'
import { fp8RoundTripBlocks } from '../../src/numerics/round-trip.ts'

const bitsOf = (x: Float32Array) => [...new Uint32Array(x.buffer, x.byteOffset, x.length)]
// Cached activations are bf16 values: draw finite bf16 codes and ordinary sizes.
const bf16Value = fc.integer({ min: 0, max: 0xffff }).filter((c) => (c & 0x7f80) !== 0x7f80).map(bf16ToF32)
const ordinary = fc.float({ min: -50, max: 50, noNaN: true }).map(roundBf16)
const row = (n: number) => fc.array(fc.oneof(bf16Value, ordinary), { minLength: n, maxLength: n }).map((a) => new Float32Array(a))
const boundedRow = (n: number) => row(n).map((r) => r.map((v) => (Math.abs(v) < 2 ** 120 ? v : 1)))

describe('fp8NopeRoundTrip: window rows and main-pool entries', () => {
  it('quantises each 64-block of the nope dims with its own scale and leaves the rope dims alone', () => {
    const x = new Float32Array(192)
    // Block 0: amax 448 -> scale 1; 300 -> 288 (step 32), 1.03 -> 1, 0.001 -> 2^-9 (the e4m3 subnormal step).
    x.set([448, 300, 1.03, 0.001], 0)
    // Block 1: amax 0.001 -> scale 2^-18; 0.001 * 2^18 = 262.1 -> 256, so 2^-10 (a shared scale would give 2^-9).
    x[64] = 0.001
    // Rope dims: values no fp8 grid holds, must come back bit for bit.
    x.set([0.1, -1e-30, 12345.678], 128)
    const y = fp8NopeRoundTrip(x, 128)
    expect([...y.subarray(0, 4)]).toEqual([448, 288, 1, 2 ** -9])
    expect(y[64]).toBe(2 ** -10)
    expect(bitsOf(y.subarray(128))).toEqual(bitsOf(x.subarray(128)))
  })

  it('equals src/numerics fp8RoundTripBlocks(nope, 64) and is idempotent, in place or not', () => {
    fc.assert(fc.property(boundedRow(128), (x) => {
      const y = fp8NopeRoundTrip(x, 64)
      const inPlace = Float32Array.from(x)
      fp8NopeRoundTrip(inPlace, 64, inPlace)
      const again = fp8NopeRoundTrip(y, 64)
      const spec = fp8RoundTripBlocks(x.subarray(0, 64), 64)
      return bitsOf(y.subarray(0, 64)).join() === bitsOf(spec).join() &&
        bitsOf(inPlace).join() === bitsOf(y).join() && bitsOf(again).join() === bitsOf(y).join()
    }), { numRuns: 300 })
  })

  it('refuses nope dims that are not whole 64-blocks inside the row', () => {
    expect(() => fp8NopeRoundTrip(new Float32Array(128), 48)).toThrow(NumericsError)
    expect(() => fp8NopeRoundTrip(new Float32Array(128), 192)).toThrow(/nope dims 192 must be a multiple of 64 within the row's 128 values/)
    expect(() => fp8NopeRoundTrip(new Float32Array(128), 64, new Float32Array(64))).toThrow(/out has 64 elements, expected 128/)
  })
})

describe('bf16Fp4RoundTrip: the quantising half of the indexer trip', () => {
  it('rounds to bf16, then to e2m1 blocks of 32 (ties to even)', () => {
    const x = new Float32Array(64)
    // Block 0: amax 6 -> scale 1. 0.25 -> 0, 0.75 -> 1, 2.5 -> 2, 5 -> 4, 1.3 (bf16 1.296875) -> 1.5, -3.5 -> -4.
    // 1.2500001 is above the 1.25 tie as float32 (-> 1.5) but bf16 makes it exactly 1.25, a tie -> 1.
    x.set([6, 0.25, 0.75, 2.5, 5, 1.3, -3.5, 1.2500001])
    // Block 1: amax 0.7 -> scale 2^ceil(log2(0.7/6)) = 1/8; 0.7 (bf16 0.69921875) / (1/8) = 5.59 -> 6 -> 0.75.
    x[32] = 0.7
    const y = bf16Fp4RoundTrip(x)
    expect([...y.subarray(0, 8)]).toEqual([6, 0, 1, 2, 4, 1.5, -4, 1])
    expect(y[32]).toBe(0.75)
  })

  it('gives bf16 values and is idempotent', () => {
    fc.assert(fc.property(boundedRow(128), (x) => {
      const y = bf16Fp4RoundTrip(x)
      return y.every((v) => Object.is(roundBf16(v), v)) && bitsOf(bf16Fp4RoundTrip(y)).join() === bitsOf(y).join()
    }), { numRuns: 300 })
  })

  it('refuses rows that are not whole 32-blocks', () => {
    expect(() => bf16Fp4RoundTrip(new Float32Array(48))).toThrow(/row of 48 values is not a whole number of 32-value blocks/)
  })
})

describe('indexerFp4RoundTrip: Hadamard, bf16, fp4', () => {
  it('maps 8 * e_0 to all 0.75 and 8 * e_1 to alternating +-0.75 (n = 128)', () => {
    // 8 * fround(1/sqrt(128)) = 0.7071068 -> bf16 0.70703125 -> scale 1/8 -> 5.66 -> e2m1 6 -> 0.75.
    const e0 = new Float32Array(128); e0[0] = 8
    const e1 = new Float32Array(128); e1[1] = 8
    expect(indexerFp4RoundTrip(e0).every((v) => v === 0.75)).toBe(true)
    expect(indexerFp4RoundTrip(e1).every((v, i) => v === (i % 2 === 0 ? 0.75 : -0.75))).toBe(true)
  })

  it('equals bf16Fp4RoundTrip(hadamardTransform(x)) bit for bit, in place too', () => {
    fc.assert(fc.property(boundedRow(128), (x) => {
      const y = indexerFp4RoundTrip(x)
      const inPlace = Float32Array.from(x)
      indexerFp4RoundTrip(inPlace, inPlace)
      const composed = bf16Fp4RoundTrip(hadamardTransform(x))
      return bitsOf(y).join() === bitsOf(composed).join() && bitsOf(inPlace).join() === bitsOf(y).join()
    }), { numRuns: 200 })
  })

  it('refuses rows that are not a power of two or not whole 32-blocks', () => {
    expect(() => indexerFp4RoundTrip(new Float32Array(96))).toThrow(/not a power of two/)
    expect(() => indexerFp4RoundTrip(new Float32Array(16))).toThrow(/not a whole number of 32-value blocks/)
  })
})

describe('referenceQuantHooks: the switches an engine reads', () => {
  const headDim = 128
  const ropeDim = 64
  const sample = (n: number) => new Float32Array(n).map((_, i) => Math.fround(Math.cos(i * 0.7) * 3))

  it('is null when every switch is off (the four base profiles)', () => {
    expect(referenceQuantHooks(getProfile('decoder').referenceQuant, headDim, ropeDim)).toBeNull()
  })

  it('applies each round trip in place where it is on', () => {
    const hooks = referenceQuantHooks(getProfile('decoder+refquant').referenceQuant, headDim, ropeDim)!
    const w = sample(headDim); hooks.windowRow(w)
    const p = sample(headDim); hooks.poolEntry(p)
    const ix = sample(128); hooks.indexerVector(ix)
    expect(bitsOf(w)).toEqual(bitsOf(fp8NopeRoundTrip(sample(headDim), 64)))
    expect(bitsOf(p)).toEqual(bitsOf(fp8NopeRoundTrip(sample(headDim), 64)))
    expect(bitsOf(ix)).toEqual(bitsOf(indexerFp4RoundTrip(sample(128))))
    expect(bitsOf(w)).not.toEqual(bitsOf(sample(headDim)))
  })

  it('leaves rows untouched where a switch is off', () => {
    const hooks = referenceQuantHooks({ windowFp8: true, mainPoolFp8: false, indexerFp4: false }, headDim, ropeDim)!
    const p = sample(headDim); hooks.poolEntry(p)
    const ix = sample(128); hooks.indexerVector(ix)
    expect(bitsOf(p)).toEqual(bitsOf(sample(headDim)))
    expect(bitsOf(ix)).toEqual(bitsOf(sample(128)))
  })

  it('refuses a nope width that is not whole 64-blocks', () => {
    expect(() => referenceQuantHooks({ windowFp8: true, mainPoolFp8: false, indexerFp4: false }, 128, 96)).toThrow(/128 - 96 must be a non-negative multiple of 64/)
    expect(referenceQuantHooks({ windowFp8: false, mainPoolFp8: false, indexerFp4: true }, 128, 96)).not.toBeNull()
  })
})
