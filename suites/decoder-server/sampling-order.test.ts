// The sampler's candidate order (order.ts): the radix sort gives exactly the order of the
// comparator it replaced (value descending, lowest id first on ties) on rows with ties, signed
// zeros, infinities, subnormals and both signs, and puts NaNs last by id. The float32 form gives
// the order of the logits over any temperature the sampler lets it stand in for.
import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import { idsByF32Descending, idsByValueDescending, SMALL_DIGIT_BELOW } from '../../src/engines/decoder/sampling/order.ts'

// The reference: the comparator sort the sampler used before (value descending, lowest id on ties).
function comparatorOrder (values: Float64Array): number[] {
  return Array.from({ length: values.length }, (_, i) => i).sort((a, b) => values[b] - values[a] || a - b)
}

// Values drawn from a small pool so that ties are common, plus any double.
const special = [0, -0, 1, -1, Infinity, -Infinity, Number.MIN_VALUE, -Number.MIN_VALUE, 2.2250738585072014e-308, Number.MAX_VALUE, -Number.MAX_VALUE, 0.5, -0.5]
const value = fc.oneof(fc.constantFrom(...special), fc.double({ noNaN: true }), fc.float({ noNaN: true }).map((f) => f / 0.8))

describe('the sampler\'s candidate order', () => {
  it('equals the comparator sort on random rows', () => {
    fc.assert(fc.property(fc.array(value, { minLength: 1, maxLength: 600 }), (row) => {
      const values = Float64Array.from(row)
      expect(Array.from(idsByValueDescending(values))).toEqual(comparatorOrder(values))
    }), { numRuns: 300, seed: 41 })
  })

  // Both digit widths: DeepSeek-V4's vocabulary (16-bit digits), the small presets' 4,096 and the
  // sizes either side of where the width changes (8-bit digits below it).
  it.each([129_280, 4096, SMALL_DIGIT_BELOW - 1, SMALL_DIGIT_BELOW])('equals it on a vocabulary-sized row (%i ids) of f32 logits over a temperature', (size) => {
    const values = new Float64Array(size)
    let s = 12345
    for (let i = 0; i < values.length; i++) {
      s = (Math.imul(s, 1103515245) + 12345) >>> 0
      // Every 16th entry repeats its neighbour's value: ties across the whole range.
      values[i] = i % 16 === 15 ? values[i - 1] : Math.fround((s / 2 ** 32) * 24 - 12) / 0.7
    }
    expect(Array.from(idsByValueDescending(values))).toEqual(comparatorOrder(values))
  })

  it('treats -0 and +0 as equal, and puts NaNs last by id', () => {
    expect(Array.from(idsByValueDescending(Float64Array.from([-0, 0, -0, 1, -1])))).toEqual([3, 0, 1, 2, 4])
    expect(Array.from(idsByValueDescending(Float64Array.from([NaN, -Infinity, NaN, 2])))).toEqual([3, 1, 0, 2])
    expect(Array.from(idsByValueDescending(new Float64Array(0)))).toEqual([])
  })
})

describe('the float32 keys (idsByF32Descending)', () => {
  // float32 values with ties, signed zeros, infinities, subnormals, NaN of both signs.
  const f32Special = [0, -0, 1, -1, Infinity, -Infinity, 1e-45, -1e-45, 1.1754943508222875e-38, 3.4028234663852886e38, -3.4028234663852886e38, 0.5, -0.5]
  const f32Value = fc.oneof(fc.constantFrom(...f32Special), fc.float(), fc.constant(Number.NaN))
  const asF32 = (row: number[]): Float32Array => {
    const a = Float32Array.from(row)
    // A negative NaN too: its bits, not the value, decide where a sort would put it.
    if (a.length > 2) new Uint32Array(a.buffer)[2] = 0xffc00001
    return a
  }

  it('equals the comparator sort of the same values, NaNs last by id', () => {
    fc.assert(fc.property(fc.array(f32Value, { minLength: 1, maxLength: 600 }), (row) => {
      const values = asF32(row)
      const finite = comparatorOrder(Float64Array.from(values).map((v) => Number.isNaN(v) ? 0 : v)).filter((i) => !Number.isNaN(values[i]))
      const nans = Array.from(values.keys()).filter((i) => Number.isNaN(values[i]))
      expect(Array.from(idsByF32Descending(values))).toEqual([...finite, ...nans])
    }), { numRuns: 300, seed: 42 })
  })

  // What lets the sampler sort the logits instead of logits / temperature (sampler.ts, logitOrderHolds).
  it.each([0.8, 0.7, 1, 1.3, 2, 1e-3, 1e-30, 1e-200])('equals the order of the values over a temperature of %d', (temperature) => {
    fc.assert(fc.property(fc.array(f32Value, { minLength: 1, maxLength: 400 }), (row) => {
      const values = asF32(row)
      const scaled = Float64Array.from(values)
      for (let i = 0; i < scaled.length; i++) scaled[i] /= temperature
      expect(Array.from(idsByF32Descending(values))).toEqual(Array.from(idsByValueDescending(scaled)))
    }), { numRuns: 100, seed: 43 })
  })

  it('where a quotient overflows the orders part, which is why the sampler then sorts the doubles', () => {
    const values = Float32Array.from([3e38, 2e38])
    const scaled = Float64Array.from(values, (v) => v / 1e-300)
    expect(Array.from(idsByF32Descending(values))).toEqual([0, 1])
    expect(Array.from(idsByValueDescending(scaled))).toEqual([0, 1])
    expect(Array.from(idsByValueDescending(Float64Array.from([2e38, 3e38], (v) => v / 1e-300)))).toEqual([0, 1])
    expect(Array.from(idsByF32Descending(Float32Array.from([2e38, 3e38])))).toEqual([1, 0])
  })
})
