// The decoder's prefix cache never restores a block whose bytes changed after it was written: a
// flipped bit in a stored block (a real file of a real store, tiny checkpoint, decoder profile) is a
// miss from that block on, with the reason, a counter and an event; the block is in the quarantine;
// the decoder prefills the rest natively and its answer is the native one bit for bit; the block is
// then written again, identical to a clean store's. A block without a digest is refused the same way.
import { readdir, rm } from 'node:fs/promises'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { SafetensorsFile, writeSafetensors, type Tensor } from '../../src/formats/safetensors/index.ts'
import { flipTensorBit } from '../support/flip-bit.ts'
import { QUARANTINE_DIR, blockPath, compareBlockDirs } from '../../src/decode/store/index.ts'
import type { PrefixCacheEvent } from '../../src/decode/prefix-cache/index.ts'
import { BS, cacheDifferences, greedySteps, nativePrefill, openPrefixCache, prompt, sameBits, tinyModel, type TinyModel } from './helpers.ts'

let model: TinyModel
let cleanRoot: string
const T = prompt(700, 77)
beforeAll(async () => {
  model = await tinyModel()
  // The store a decoder with nothing wrong would end with: the reference for rewritten blocks.
  cleanRoot = model.scratch('clean')
  const { pc } = await openPrefixCache(model, cleanRoot, 'decoder')
  await pc.prefillAndStore(model.engine('decoder'), T)
})
afterAll(async () => await model.cleanup())

// Bit 6 of the tensor's first byte.
const flipBit = async (path: string, tensor: string): Promise<void> => await flipTensorBit(path, tensor, 6)

async function quarantined (root: string): Promise<string[]> {
  const out: string[] = []
  const q = join(root, QUARANTINE_DIR)
  for (const run of await readdir(q).catch(() => [])) {
    for (const sub of await readdir(join(q, run))) for (const name of await readdir(join(q, run, sub))) out.push(name.replace('.safetensors', ''))
  }
  return out
}

/** A store with the prompt's two blocks written by the decoder's own write-back; its hashes. */
async function storedPrompt (name: string): Promise<{ root: string, hashes: string[] }> {
  const root = model.scratch(name)
  const { pc } = await openPrefixCache(model, root, 'decoder')
  const { storedBlocks } = await pc.prefillAndStore(model.engine('decoder'), T)
  return { root, hashes: storedBlocks.map((b) => b.hash) }
}

function ofKind<K extends PrefixCacheEvent['kind']> (events: PrefixCacheEvent[], kind: K): Array<Extract<PrefixCacheEvent, { kind: K }>> {
  return events.filter((e): e is Extract<PrefixCacheEvent, { kind: K }> => e.kind === kind)
}

describe('a flipped bit in block 1 of a stored 700-token prompt', () => {
  it('restores block 0 only, says why, counts it, quarantines block 1; the continuation is native bit for bit', async () => {
    const engine = model.engine('decoder')
    const { root, hashes } = await storedPrompt('flip-1')
    await flipBit(blockPath(root, hashes[1]), 'layer_1_sub_1_state_2')
    const { pc, events } = await openPrefixCache(model, root, 'decoder')

    const hit = await pc.lookup(T)
    expect(hit.cachedTokens).toBe(BS)
    expect(hit.blocks).toBe(1)
    expect(hit.reason).toMatch(new RegExp(`^block 1 \\(${hashes[1]}\\) failed its integrity check \\(integrity\\): content hashes to [0-9a-f]{64}, but content_sha256 says [0-9a-f]{64}: the bytes changed after the block was written; quarantined, never served$`))
    expect(pc.stats).toMatchObject({ lookups: 1, hits: 1, integrityMisses: 1, restoredBlocks: 1 })
    expect(pc.storeStats).toMatchObject({ refused: { integrity: 1 }, quarantined: 1 })
    expect(ofKind(events, 'integrity-miss')).toEqual([expect.objectContaining({ block: 1, hash: hashes[1], reason: 'integrity', integrityMisses: 1 })])
    expect(ofKind(events, 'lookup').at(-1)).toMatchObject({ cachedTokens: BS, integrityMisses: 1 })
    expect(await quarantined(root)).toEqual([hashes[1]])

    // The restored 256 tokens are the native cache at 256, and the decoder prefills the rest itself.
    expect(cacheDifferences(hit.cache!, nativePrefill(engine, T.slice(0, BS)).cache)).toEqual([])
    const served = await pc.prefillAndStore(engine, T, hit.cache!)
    const native = nativePrefill(engine, T)
    expect(sameBits(served.logits, native.logits)).toBe(true)
    const a = greedySteps(engine, served.cache, served.logits, 8)
    const b = greedySteps(engine, native.cache, native.logits, 8)
    expect(a.tokens).toEqual(b.tokens)
    a.logits.forEach((l, i) => expect(sameBits(l, b.logits[i]), `step ${i}`).toBe(true))

    // Block 1 is written again, and it is the block a clean store holds; the next lookup uses both.
    expect(served.storedBlocks).toEqual([expect.objectContaining({ block: 1, hash: hashes[1], written: true })])
    expect(await compareBlockDirs(cleanRoot, root)).toMatchObject({ identical: 2, total: 2 })
    expect((await pc.lookup(T)).cachedTokens).toBe(2 * BS)
  })
})

describe('a flipped bit in block 0', () => {
  it('is a miss of the whole prompt, and a native prefill from empty gives the native logits', async () => {
    const engine = model.engine('decoder')
    const { root, hashes } = await storedPrompt('flip-0')
    await flipBit(blockPath(root, hashes[0]), 'layer_0_state_0')
    const { pc } = await openPrefixCache(model, root, 'decoder')
    const miss = await pc.lookup(T)
    expect(miss).toMatchObject({ cachedTokens: 0, cache: null, blocks: 0 })
    expect(miss.reason).toMatch(/^block 0 \([0-9a-f]{64}\) failed its integrity check \(integrity\)/)
    expect(pc.stats).toMatchObject({ misses: 1, integrityMisses: 1 })
    const served = await pc.prefillAndStore(engine, T)
    expect(sameBits(served.logits, nativePrefill(engine, T).logits)).toBe(true)
    expect(await compareBlockDirs(cleanRoot, root)).toMatchObject({ identical: 2, total: 2 })
  })
})

describe('a block written before digests (no content_sha256)', () => {
  it('is refused as unverifiable at open, quarantined, and counted as an integrity miss by the lookup', async () => {
    const { root, hashes } = await storedPrompt('old')
    const path = blockPath(root, hashes[1])
    const f = await SafetensorsFile.open(path)
    const tensors: Record<string, Tensor> = {}
    for (const name of f.tensors.keys()) tensors[name] = await f.read(name)
    const { content_sha256: _dropped, ...meta } = f.metadata
    await f.close()
    await rm(path)
    await writeSafetensors(path, tensors, meta)

    const { pc, events } = await openPrefixCache(model, root, 'decoder')
    expect(pc.storeStats).toMatchObject({ refused: { unverified: 1 }, quarantined: 1 })
    const hit = await pc.lookup(T)
    expect(hit.cachedTokens).toBe(BS)
    // Quarantined at the scan, so the lookup finds nothing under the key: a plain "not stored".
    expect(hit.reason).toMatch(/^block 1 \(tokens \[256, 512\)\) is not stored$/)
    expect(ofKind(events, 'refused')).toEqual([expect.objectContaining({ hash: hashes[1], reason: 'unverified', during: 'scan' })])
    expect(await quarantined(root)).toEqual([hashes[1]])
  })

  it('one that appears after the scan (another process copied it in) is an integrity miss at the lookup', async () => {
    const { root, hashes } = await storedPrompt('old-late')
    const { pc, events } = await openPrefixCache(model, root, 'decoder')
    const path = blockPath(root, hashes[1])
    const f = await SafetensorsFile.open(path)
    const tensors: Record<string, Tensor> = {}
    for (const name of f.tensors.keys()) tensors[name] = await f.read(name)
    const { content_sha256: _dropped, ...meta } = f.metadata
    await f.close()
    await rm(path)
    await writeSafetensors(path, tensors, meta)
    const hit = await pc.lookup(T)
    expect(hit.cachedTokens).toBe(BS)
    expect(hit.reason).toMatch(/^block 1 \([0-9a-f]{64}\) has no content digest and cannot be verified \(unverified\)/)
    expect(pc.stats.integrityMisses).toBe(1)
    expect(ofKind(events, 'integrity-miss')).toHaveLength(1)
    expect(await quarantined(root)).toEqual([hashes[1]])
  })
})
