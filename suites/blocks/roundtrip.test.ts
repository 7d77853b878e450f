// The decoder stores its own prefill as blocks, then serves the same prompt from them: the restored
// cache equals the native cache at the last full boundary in every array, bit for bit, and resuming
// from it gives the native greedy tokens with bit-identical logits.
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { blockPath } from '../../src/decode/store/index.ts'
import { BS, blockTensors, cacheDifferences, greedySteps, nativePrefill, openPrefixCache, prompt, sameBits, tinyModel, type TinyModel } from './helpers.ts'

let model: TinyModel
beforeAll(async () => { model = await tinyModel() })
afterAll(async () => await model.cleanup())

const CASES = [
  { profile: 'f32', lengths: [300, 700, 1100], dtype: 'F32' },
  { profile: 'decoder', lengths: [300, 700, 1100], dtype: 'BF16' },
]

describe.each(CASES)('store after a native prefill, then serve the same prompt ($profile)', ({ profile, lengths, dtype }) => {
  it.each(lengths)('%i tokens: restored == native at the last full boundary, and the resumed greedy run == native', async (n) => {
    const engine = model.engine(profile)
    const tokens = prompt(n, n)
    const boundary = Math.floor(n / BS) * BS
    const { pc } = await openPrefixCache(model, model.scratch(`store-${profile}-${n}`), profile)

    // The decoder's own prefill, chunked at block boundaries, equals a one-shot prefill.
    const stored = await pc.prefillAndStore(engine, tokens)
    const full = nativePrefill(engine, tokens)
    expect(stored.storedBlocks.map((b) => [b.block, b.written])).toEqual(Array.from({ length: boundary / BS }, (_, k) => [k, true]))
    expect(cacheDifferences(stored.cache, full.cache)).toEqual([])
    expect(sameBits(stored.logits, full.logits)).toBe(true)

    // Blocks store exactly what the cache holds: BF16 only where the profile's values are bf16.
    const { tensors, metadata } = await blockTensors(blockPath(pc.store.root, stored.storedBlocks[0].hash))
    // Real arrays only: not the I64 row ranges, the None stand-ins or the zero-width window values.
    const floats = [...tensors.entries()].filter(([name, t]) => t.dtype !== 'I64' && metadata[`${name}_none`] === undefined && metadata[`${name}_zero_dim`] === undefined)
    expect(floats.length).toBeGreaterThan(0)
    for (const [name, t] of floats) expect(`${name} ${t.dtype}`).toBe(`${name} ${dtype}`)

    const hit = await pc.lookup(tokens)
    expect(hit.cachedTokens).toBe(boundary)
    expect(hit.blocks).toBe(boundary / BS)
    expect(hit.reason).toBeUndefined()
    const atBoundary = nativePrefill(engine, tokens.slice(0, boundary))
    expect(cacheDifferences(hit.cache!, atBoundary.cache)).toEqual([])

    // Restore, prefill the tail, greedy 8: the native tokens, every logit bit-identical.
    const tail = engine.prefill(tokens.slice(boundary), hit.cache!, { logits: 'last' })
    const resumed = greedySteps(engine, hit.cache!, tail.logits, 8)
    const native = greedySteps(engine, full.cache, full.logits, 8)
    expect(resumed.tokens).toEqual(native.tokens)
    resumed.logits.forEach((l, i) => expect(sameBits(l, native.logits[i]), `logits of step ${i}`).toBe(true))
    expect(pc.stats).toMatchObject({ lookups: 1, hits: 1, misses: 0, restoredBlocks: boundary / BS, writtenBlocks: boundary / BS })
  })
})

describe('a one-ulp change in a restored array is seen', () => {
  it('the comparison these tests rely on is not blind', async () => {
    const engine = model.engine('f32')
    const a = nativePrefill(engine, prompt(300, 5)).cache
    const b = a.clone()
    const entries = b.layers[1].compressor!.entries.row(3)
    entries[7] = Math.fround(entries[7] * (1 + 2 ** -23))
    expect(cacheDifferences(a, b)).toEqual(['x.layers.1.compressor.compressed_kv bits differ'])
  })
})
