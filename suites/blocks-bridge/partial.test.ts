// A partial capture (sealed at T' < T by the memory budget) writes the full blocks inside [0, T')
// only, each identical to the decoder's own; the decoder then restores them, prefills the rest
// natively (writing its own blocks for it) and ends exactly where a native prefill ends: same cache,
// same logits, same greedy tokens, and in the end the same store.
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { compareBlockDirs } from '../../src/decode/store/index.ts'
import { streamBlocks } from '../../src/decode/writer/index.ts'
import { BS, bench, cacheDifferences, capture, greedySteps, openStore, prompt, sameBits, type Bench } from './helpers.ts'

let b: Bench
beforeAll(async () => { b = await bench('blocks-bridge-partial') })
afterAll(async () => await b.cleanup())

describe('a partial capture', () => {
  const T = 1100
  const tokens = prompt(T, 21)

  it('writes only the prefix\'s full blocks; the decoder prefills the rest natively with identical results', async () => {
    const engine = b.engine('decoder')
    const native = await openStore(b, 'native')
    const stored = await native.prefillAndStore(engine, tokens)

    // 128-token chunks hold every layer until the end, so this budget seals a prefix of 2 full blocks and a bit.
    const c = await capture(b, tokens, { requestId: 'partial', memoryBudgetBytes: 1160000, maxChunk: 128 })
    const sealed = c.manifest.sealedLength
    expect(c.manifest.state).toBe('partial')
    expect(sealed).toBeGreaterThanOrEqual(2 * BS)
    expect(sealed).toBeLessThan(3 * BS)

    const bridged = await openStore(b, 'bridged')
    const report = await streamBlocks({ dir: c.dir, target: bridged, sidecar: b.sidecar, requestId: 'partial', tokens })
    expect(report).toMatchObject({ state: 'partial', tokenCount: T, sealedLength: sealed, blocks: 2, written: 2, verified: 2 })
    const early = await compareBlockDirs(native.store.root, bridged.store.root)
    expect(early.blocks.map((x) => x.status)).toEqual(expect.arrayContaining(['identical', 'identical', 'only-a', 'only-a']))
    expect(early.blocks.filter((x) => x.status === 'identical').length).toBe(2)
    expect(early.blocks.filter((x) => x.status === 'different' || x.status === 'only-b')).toEqual([])

    const hit = await bridged.lookup(tokens)
    expect(hit.cachedTokens).toBe(2 * BS)
    const resumed = await bridged.prefillAndStore(engine, tokens, hit.cache!)
    expect(resumed.storedBlocks.map((s) => [s.block, s.written])).toEqual([[2, true], [3, true]])
    expect(cacheDifferences(resumed.cache, stored.cache)).toEqual([])
    expect(sameBits(resumed.logits, stored.logits)).toBe(true)
    const a = greedySteps(engine, resumed.cache, resumed.logits, 8)
    const n = greedySteps(engine, stored.cache, stored.logits, 8)
    expect(a.tokens).toEqual(n.tokens)
    a.logits.forEach((l, i) => expect(sameBits(l, n.logits[i]), `logits of step ${i}`).toBe(true))
    const late = await compareBlockDirs(native.store.root, bridged.store.root)
    expect(`${late.identical}/${late.total} identical`).toBe('4/4 identical')
  })

  it('sealed before the first boundary: no block, an empty but verified report', async () => {
    const c = await capture(b, prompt(700, 22), { requestId: 'tiny-prefix', memoryBudgetBytes: 250_000, maxChunk: 64 })
    expect(c.manifest.state).toBe('partial')
    expect(c.manifest.sealedLength).toBeLessThan(BS)
    const bridged = await openStore(b, 'none')
    const report = await streamBlocks({ dir: c.dir, target: bridged, sidecar: b.sidecar, requestId: 'tiny-prefix', tokens: prompt(700, 22) })
    expect(report).toMatchObject({ state: 'partial', blocks: 0, written: 0, verified: 0, bytes: 0 })
    expect(bridged.store.size).toBe(0)
  })
})
