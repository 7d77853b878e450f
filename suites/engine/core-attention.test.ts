// Core attention over several sequences in one kernel call (a batched decode step's attention):
// each sequence's outputs are bit-identical to its call alone, wherever its keys sit in the shared
// table, and whether or not the table has room for the picked entries.
import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import { activationRounding } from '../../src/model/engine/activation.ts'
import { coreAttention, type AttentionQueries } from '../../src/model/engine/core-attention.ts'
import { firstBitDifference } from './helpers.ts'

const HEADS = 2
const D = 8
const WINDOW = 4

/** One sequence's queries, window keys (positions keyBase..start+n-1) and pooled entries. */
interface Sequence {
  n: number
  start: number
  keyBase: number
  q: Float32Array
  keys: Float32Array
  entries: Float32Array
  /** null: a count per query (HCA), else explicit ascending picks (CSA). */
  picks: Int32Array[] | null
}

const values = (count: number): fc.Arbitrary<Float32Array> =>
  fc.array(fc.float({ min: -4, max: 4, noNaN: true }), { minLength: count, maxLength: count }).map((v) => Float32Array.from(v))

const sequence: fc.Arbitrary<Sequence> = fc.record({
  n: fc.integer({ min: 1, max: 3 }), start: fc.integer({ min: 0, max: 9 }), extra: fc.integer({ min: 0, max: 2 }),
  entryCount: fc.integer({ min: 0, max: 4 }), explicit: fc.boolean(),
}).chain(({ n, start, extra, entryCount, explicit }) => {
  const keyBase = Math.max(0, Math.max(0, start - WINDOW + 1) - extra)
  const keyCount = start + n - keyBase
  const picks = explicit
    ? fc.array(fc.subarray([...Array(entryCount).keys()]).map((p) => Int32Array.from(p)), { minLength: n, maxLength: n })
    : fc.constant(null)
  return fc.record({
    n: fc.constant(n), start: fc.constant(start), keyBase: fc.constant(keyBase),
    q: values(n * HEADS * D), keys: values(keyCount * D), entries: values(entryCount * D), picks,
  })
})

function queriesOf (s: Sequence, keyRow: number): AttentionQueries {
  const count = s.entries.length / D
  return {
    n: s.n, start: s.start, keyRow, keyBase: s.keyBase, entries: s.entries,
    entriesFor: (i) => s.picks === null ? Math.min(count, i + s.start) : s.picks[i],
  }
}

/** The sequences in one call: keys packed in order into a table with `room` spare rows. */
function together (seqs: Sequence[], room: number): Float32Array {
  const keyRows = seqs.reduce((sum, s) => sum + s.keys.length / D, 0)
  const table = new Float32Array((keyRows + room) * D).fill(Number.NaN)
  const queries: AttentionQueries[] = []
  let row = 0
  for (const s of seqs) {
    table.set(s.keys, row * D)
    queries.push(queriesOf(s, row))
    row += s.keys.length / D
  }
  const q = new Float32Array(seqs.reduce((sum, s) => sum + s.q.length, 0))
  let at = 0
  for (const s of seqs) {
    q.set(s.q, at)
    at += s.q.length
  }
  return coreAttention({ q, heads: HEADS, headDim: D, window: WINDOW, sinks: Float32Array.of(0.5, -1), table, keyRows, sequences: queries }, activationRounding('bf16'))
}

describe('coreAttention over several sequences', () => {
  it('gives each sequence the bits of its call alone, with or without room for the entries in the table', () => {
    fc.assert(fc.property(fc.array(sequence, { minLength: 1, maxLength: 4 }), fc.integer({ min: 0, max: 20 }), (seqs, room) => {
      const batched = together(seqs, room)
      let at = 0
      for (const s of seqs) {
        const alone = together([s], 0)
        expect(firstBitDifference(batched.subarray(at, at + alone.length), alone)).toBe(-1)
        at += alone.length
      }
      expect(at).toBe(batched.length)
    }), { numRuns: 200 })
  })
})
