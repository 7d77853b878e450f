// The sampler's candidate order (order.ts): the radix sort gives exactly the order of the
// comparator it replaced (value descending, lowest id first on ties) on rows with ties, signed
// zeros, infinities, subnormals and both signs, and puts NaNs last by id.
import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import { idsByValueDescending, SMALL_DIGIT_BELOW } from '../../src/engines/decoder/sampling/order.ts'

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
