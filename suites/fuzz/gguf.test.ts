// Fuzzing the GGUF reader (parseGguf, parseGgufHeader on prefixes): any bytes either parse or are a
// GgufError, never another exception or a hang. suites/formats/gguf.test.ts already overwrites
// bytes in place; this adds insertions, deletions, truncations and prefix reads. Fixed seeds.
import fc from 'fast-check'
import { afterAll, describe, expect, it } from 'vitest'
import { GgufError, parseGguf, parseGgufHeader, serializeGguf } from '../../src/formats/gguf/index.ts'
import { SEED, Tally, applyByteEdits, byteEditArb, judge, runs } from './helpers.ts'

const tallies: Tally[] = []
afterAll(() => { for (const t of tallies) console.log(t.line()) })

const valid = serializeGguf({
  metadata: [
    ['general.architecture', { type: 'STRING', value: 'deepseek4' }],
    ['deepseek4.block_count', { type: 'UINT32', value: 43 }],
    ['general.size', { type: 'UINT64', value: 7n }],
    ['tokenizer.ggml.tokens', { type: 'ARRAY', itemType: 'STRING', value: ['a', 'bc', ''] }],
    ['x.scores', { type: 'ARRAY', itemType: 'FLOAT32', value: [1, 2.5] }],
    ['x.flag', { type: 'BOOL', value: true }],
  ],
  tensors: [
    { name: 'a', type: 'F32', dims: [3], data: new Uint8Array(Float32Array.of(1, 2, 3).buffer) },
    { name: 'b', type: 'BF16', dims: [2, 2], data: new Uint8Array(8) },
  ],
})

describe('gguf: parseGguf / parseGgufHeader', () => {
  it('the valid file parses (sanity)', () => {
    expect(parseGguf(valid).tensors).toHaveLength(2)
  })

  it('mutated, truncated and spliced files parse or are a GgufError', () => {
    const t = new Tally('gguf parseGguf, mutated files'); tallies.push(t)
    fc.assert(fc.property(fc.array(byteEditArb, { minLength: 1, maxLength: 4 }), (edits) => {
      const bytes = applyByteEdits(valid, edits)
      judge(t, bytes, () => parseGguf(bytes), GgufError)
    }), { seed: SEED, numRuns: runs(3000) })
  })

  it('header prefixes of mutated files (any file size claimed) parse, ask for more, or are a GgufError', () => {
    const t = new Tally('gguf parseGgufHeader, prefixes'); tallies.push(t)
    fc.assert(fc.property(fc.array(byteEditArb, { maxLength: 3 }), fc.nat(), fc.oneof(fc.nat({ max: 4096 }), fc.constantFrom(0, 2 ** 32, 2 ** 53, Number.MAX_SAFE_INTEGER)), (edits, cut, extra) => {
      const bytes = applyByteEdits(valid, edits)
      const prefix = bytes.subarray(0, cut % (bytes.length + 1))
      judge(t, prefix, () => parseGgufHeader(prefix, bytes.length + extra), GgufError)
    }), { seed: SEED, numRuns: runs(2000) })
  })

  it('random bytes after a GGUF magic are a GgufError', () => {
    const t = new Tally('gguf parseGguf, random bytes after the magic'); tallies.push(t)
    fc.assert(fc.property(fc.uint8Array({ maxLength: 96 }), (tail) => {
      const bytes = new Uint8Array([...Buffer.from('GGUF'), 3, 0, 0, 0, ...tail])
      judge(t, bytes, () => parseGguf(bytes), GgufError)
    }), { seed: SEED, numRuns: runs(2000) })
  })
})
