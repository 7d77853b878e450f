// Lookups on prompts other than the one stored: a longer prompt sharing a prefix hits the shared
// blocks only; the exact full-prompt rule leaves out the last block; short prompts miss.
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { DecoderPrefixCache, PrefixCacheEvent } from '../../src/decode/prefix-cache/index.ts'
import { BS, cacheDifferences, nativePrefill, openPrefixCache, prompt, sameBits, tinyModel, type TinyModel } from './helpers.ts'

let model: TinyModel
let pc: DecoderPrefixCache
let events: PrefixCacheEvent[]
const A = prompt(700, 21)
// B shares A's first 600 tokens: blocks 0 and 1 ([0, 512)) are A's, block 2 ([512, 768)) is not.
const B = [...A.slice(0, 600), ...prompt(500, 22)]

beforeAll(async () => {
  model = await tinyModel()
  ;({ pc, events } = await openPrefixCache(model, model.scratch('store'), 'f32'))
  await pc.prefillAndStore(model.engine('f32'), A)
})
afterAll(async () => await model.cleanup())

describe('a longer prompt sharing the prefix', () => {
  it('hits the shared blocks only, restores them exactly, and the continued prefill stores the rest', async () => {
    const engine = model.engine('f32')
    const hit = await pc.lookup(B)
    expect(hit.cachedTokens).toBe(2 * BS)
    expect(hit.blocks).toBe(2)
    expect(hit.reason).toMatch(/^block 2 \(tokens \[512, 768\)\) is not stored$/)
    expect(cacheDifferences(hit.cache!, nativePrefill(engine, B.slice(0, 2 * BS)).cache)).toEqual([])

    const writesBefore = pc.storeStats.writes
    const continued = await pc.prefillAndStore(engine, B, hit.cache!)
    expect(continued.cache).toBe(hit.cache)
    expect(continued.storedBlocks.map((b) => [b.block, b.written])).toEqual([[2, true], [3, true]])
    expect(pc.storeStats.writes - writesBefore).toBe(2)
    const native = nativePrefill(engine, B)
    expect(cacheDifferences(continued.cache, native.cache)).toEqual([])
    expect(sameBits(continued.logits, native.logits)).toBe(true)

    const again = await pc.lookup(B)
    expect(again.cachedTokens).toBe(4 * BS)
    expect(again.reason).toBeUndefined()
    expect(cacheDifferences(again.cache!, nativePrefill(engine, B.slice(0, 4 * BS)).cache)).toEqual([])
  })

  it('a prompt differing inside block 0 misses and says which block is absent', async () => {
    const C = [...A.slice(0, 100), ...prompt(600, 23)]
    const before = pc.stats
    const miss = await pc.lookup(C)
    expect(miss).toEqual({ cachedTokens: 0, cache: null, blocks: 0, reason: 'block 0 (tokens [0, 256)) is not stored' })
    expect(pc.stats.misses).toBe(before.misses + 1)
    expect(pc.stats.hits).toBe(before.hits)
  })
})

describe('the exact full-prompt rule', () => {
  it('when every token is in blocks, the last block is left out so the decoder can prefill a token', async () => {
    const before = pc.stats
    const exact = await pc.lookup(A.slice(0, 2 * BS))
    expect(exact.cachedTokens).toBe(BS)
    expect(exact.blocks).toBe(1)
    expect(exact.reason).toMatch(/all 512 tokens are in blocks, but the decoder must prefill at least one token to produce logits, so block 1 \(the last\) is left out/)
    expect(cacheDifferences(exact.cache!, nativePrefill(model.engine('f32'), A.slice(0, BS)).cache)).toEqual([])
    expect(pc.stats.exactPromptDrops).toBe(before.exactPromptDrops + 1)
    expect(events.filter((e) => e.kind === 'lookup').at(-1)).toMatchObject({ kind: 'lookup', tokens: 512, cachedTokens: 256, blocks: 1 })
  })

  it('verification can turn the rule off and restore every block', async () => {
    const all = await pc.lookup(A.slice(0, 2 * BS), { exactPromptRule: false })
    expect(all.cachedTokens).toBe(2 * BS)
    expect(all.reason).toBeUndefined()
  })

  it('a one-block prompt stored whole is a miss, with the reason', async () => {
    const miss = await pc.lookup(A.slice(0, BS))
    expect(miss.cache).toBeNull()
    expect(miss.cachedTokens).toBe(0)
    expect(miss.reason).toMatch(/all 256 tokens are in blocks/)
  })

  it('one token past a boundary restores the whole chain', async () => {
    const hit = await pc.lookup(A.slice(0, 2 * BS + 1))
    expect(hit.cachedTokens).toBe(2 * BS)
    expect(hit.reason).toBeUndefined()
  })
})

describe('prompts shorter than a block, and stored prompts stored again', () => {
  it('a prompt shorter than one block is a miss that says so', async () => {
    expect(await pc.lookup(A.slice(0, BS - 1))).toEqual({ cachedTokens: 0, cache: null, blocks: 0, reason: 'the 255-token prompt is shorter than one block (256 tokens)' })
  })

  it('storing the same prompt again reuses every block and writes nothing', async () => {
    const before = pc.stats
    const writes = pc.storeStats.writes
    const again = await pc.prefillAndStore(model.engine('f32'), A)
    expect(again.storedBlocks.map((b) => [b.block, b.written])).toEqual([[0, false], [1, false]])
    expect(pc.storeStats.writes).toBe(writes)
    expect(pc.stats.reusedBlocks).toBe(before.reusedBlocks + 2)
  })

  it('refuses a cache that already holds the whole prompt, and bad tokens, with a sentence', async () => {
    const engine = model.engine('f32')
    const cache = nativePrefill(engine, A.slice(0, 300)).cache
    await expect(pc.prefillAndStore(engine, A.slice(0, 300), cache)).rejects.toThrow(/the cache already holds 300 tokens of the 300-token prompt; at least one token must be prefilled/)
    await expect(pc.lookup([1, 2, -3])).rejects.toThrow(/lookup: token 2 is -3, not a non-negative integer token id/)
    await expect(pc.lookup('abc' as unknown as number[])).rejects.toThrow(/lookup: tokens must be an array of token ids/)
  })
})
