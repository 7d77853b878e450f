// A batched decode step (decodeBatch: several sequences, each with its own cache, in one pass over
// the weights) gives each sequence exactly the bits of its solo decode, whatever else is in the
// batch, in what order, and at which positions: logits and every cache tensor.
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { DeepseekV4Engine, type ModelCache } from '../../src/model/engine/index.ts'
import { argmaxRow, cacheBitDifferences, firstBitDifference, readFixture, tinyCheckpoint } from './helpers.ts'

const PROFILES = ['decoder', 'f32']
// Prompt lengths around the compressors' windows (4 and 128) and the sliding window (128).
const LENGTHS = [1, 3, 4, 17, 127, 128, 130, 290]
const STEPS = 9

let dispose = () => {}
const engines = new Map<string, DeepseekV4Engine>()
let ids: number[] = []

beforeAll(async () => {
  const made = await tinyCheckpoint()
  dispose = made.dispose
  ids = (await readFixture('ref-tiny-t301-f32')).ids
  for (const profile of PROFILES) engines.set(profile, DeepseekV4Engine.fromCheckpoint(made.ckpt, profile))
})
afterAll(() => dispose())

/** A small seeded generator (mulberry32), so the batches are random but the same on every run. */
function random (seed: number): () => number {
  let a = seed >>> 0
  return () => {
    a = (a + 0x6D2B79F5) >>> 0
    let t = a
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
}

interface Sequence { batched: ModelCache, solo: ModelCache, logits: Float32Array, steps: number }

for (const profile of PROFILES) {
  describe(`${profile}: decodeBatch equals solo decode`, () => {
    it(`sequences of ${LENGTHS.join(', ')} prompt tokens, random subsets in random order for ${STEPS} steps: logits and caches bit for bit`, () => {
      const engine = engines.get(profile)!
      const vocab = engine.config.vocabSize
      const next = random(41)
      const seqs: Sequence[] = LENGTHS.map((n, i) => {
        const prompt = ids.slice(i, i + n)
        const batched = engine.newCache()
        const logits = engine.prefill(prompt, batched).logits
        const solo = engine.newCache()
        engine.prefill(prompt, solo, { logits: 'none' })
        return { batched, solo, logits, steps: 0 }
      })
      let batchedRows = 0
      for (let step = 0; step < STEPS; step++) {
        // Each sequence is in this step's batch with probability 2/3, at a random place.
        const batch = seqs.filter(() => next() < 2 / 3).sort(() => next() - 0.5)
        if (batch.length === 0) continue
        const tokens = batch.map((s) => argmaxRow(s.logits, 0, vocab))
        const out = engine.decodeBatch(tokens, batch.map((s) => s.batched))
        expect(out.length).toBe(batch.length * vocab)
        batch.forEach((s, i) => {
          const alone = engine.decode(tokens[i], s.solo)
          const row = out.slice(i * vocab, (i + 1) * vocab)
          expect(firstBitDifference(row, alone), `step ${step}, sequence of ${s.batched.tokenCount} tokens, row ${i} of ${batch.length}`).toBe(-1)
          s.logits = row
          s.steps++
        })
        batchedRows += batch.length
      }
      expect(batchedRows).toBeGreaterThan(STEPS * 2)
      for (const s of seqs) {
        expect(s.batched.tokenCount).toBe(s.solo.tokenCount)
        expect(cacheBitDifferences(s.batched, s.solo)).toEqual([])
      }
    })
  })
}

describe('decodeBatch refusals', () => {
  it('refuses a cache given twice, mismatched lengths and an empty batch', () => {
    const engine = engines.get('decoder')!
    const cache = engine.newCache()
    engine.prefill([1, 2, 3], cache, { logits: 'none' })
    expect(() => engine.decodeBatch([4, 5], [cache, cache])).toThrow(/a cache appears twice/)
    expect(() => engine.decodeBatch([4], [cache, engine.newCache()])).toThrow(/1 tokens for 2 caches/)
    expect(() => engine.decodeBatch([], [])).toThrow(/the batch is empty/)
    expect(() => engine.decodeBatch([engine.config.vocabSize], [cache])).toThrow(/not a token id/)
    expect(cache.tokenCount).toBe(3)
  })
})
