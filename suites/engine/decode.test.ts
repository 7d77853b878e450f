// Decoding token by token after a prefill is the same computation as a longer prefill, bit for bit.
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { DeepseekV4Engine } from '../../src/model/engine/index.ts'
import { argmaxRow, cacheBitDifferences, firstBitDifference, readFixture, tinyCheckpoint } from './helpers.ts'

const PROFILES = ['f32', 'hf-bf16', 'prefill', 'decoder+refquant']

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

for (const profile of PROFILES) {
  describe(`${profile}: prefill 290 then 11 decode steps equals a one-shot prefill of 301`, () => {
    it('every cache tensor, and each step\'s logits equal that position\'s one-shot logits', () => {
      const engine = engines.get(profile)!
      const vocab = engine.config.vocabSize
      const whole = engine.newCache()
      const all = engine.prefill(ids, whole, { logits: { tail: 11 } }).logits
      const cache = engine.newCache()
      engine.prefill(ids.slice(0, 290), cache, { logits: 'none' })
      for (let t = 290; t < 301; t++) {
        const step = engine.decode(ids[t], cache)
        expect(firstBitDifference(step, all.subarray((t - 290) * vocab, (t - 289) * vocab)), `position ${t}`).toBe(-1)
      }
      expect(cache.tokenCount).toBe(301)
      expect(cacheBitDifferences(cache, whole)).toEqual([])
    })
  })
}

describe('greedy generation', () => {
  it('is prefill then argmax (lowest id on ties) fed back k times, leaving prompt + k tokens in the cache', () => {
    const engine = engines.get('f32')!
    const vocab = engine.config.vocabSize
    const prompt = ids.slice(0, 40)
    const cache = engine.newCache()
    const got = engine.greedy(prompt, 5, cache)
    const manual = engine.newCache()
    let logits = engine.prefill(prompt, manual).logits
    const want: number[] = []
    for (let i = 0; i < 5; i++) {
      want.push(argmaxRow(logits, 0, vocab))
      logits = engine.decode(want[i], manual)
    }
    expect(got).toEqual(want)
    expect(cache.tokenCount).toBe(45)
    expect(cacheBitDifferences(cache, manual)).toEqual([])
  })

  it('continues from a given cache: greedy on a 30-token cache with 10 more prompt tokens equals greedy on all 40', () => {
    const engine = engines.get('f32')!
    const cache = engine.newCache()
    engine.prefill(ids.slice(0, 30), cache, { logits: 'none' })
    expect(engine.greedy(ids.slice(30, 40), 4, cache)).toEqual(engine.greedy(ids.slice(0, 40), 4))
  })
})
