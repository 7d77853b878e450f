// The batch memory budget's estimate of a sequence's cache is an upper bound of what its ModelCache
// really holds (typed arrays' bytes, capacity included) at that many tokens, and not a loose one.
import { beforeAll, describe, expect, it } from 'vitest'
import { cacheBytesAt, sequenceBytes, stepBytesAt } from '../../src/engines/decoder/memory-budget.ts'
import { DeepseekV4Engine } from '../../src/model/engine/index.ts'
import { tinyCheckpoint } from '../support/checkpoints.ts'

let engine: DeepseekV4Engine

beforeAll(async () => {
  engine = await DeepseekV4Engine.load(tinyCheckpoint(), 'decoder')
})

describe('sequence memory estimate', () => {
  it('bounds the cache held after prefill and decode, within 2.5x of it', () => {
    const cfg = engine.config
    const cache = engine.newCache()
    let held = 0
    for (const [prefill, decode] of [[1, 0], [4, 3], [130, 2], [600, 9], [1100, 0]]) {
      const tokens = Array.from({ length: prefill - cache.tokenCount }, (_, i) => (i * 13) % 500 + 2)
      if (tokens.length > 0) engine.prefill(tokens, cache, { logits: 'none' })
      for (let i = 0; i < decode; i++) engine.decode(7, cache)
      held = cache.heldBytes
      const bound = cacheBytesAt(cfg, cache.tokenCount)
      expect(held, `${cache.tokenCount} tokens`).toBeLessThanOrEqual(bound)
      expect(bound, `${cache.tokenCount} tokens`).toBeLessThan(2.5 * held)
    }
    expect(held).toBeGreaterThan(0)
  })

  it('a request costs its cache at prompt + max_tokens plus its step buffers, growing with both', () => {
    const cfg = engine.config
    expect(sequenceBytes(cfg, 100, 50)).toBe(cacheBytesAt(cfg, 150) + stepBytesAt(cfg, 150))
    expect(sequenceBytes(cfg, 100, 5000)).toBeGreaterThan(sequenceBytes(cfg, 100, 50))
    expect(sequenceBytes(cfg, 5000, 50)).toBeGreaterThan(sequenceBytes(cfg, 100, 50))
  })
})
