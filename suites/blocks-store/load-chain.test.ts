// loadChain: a prefix lookup's loads, with the files read a few blocks ahead. It must serve what
// load() one by one would, in order, stop at the first block not served, and count, touch and
// refuse exactly as those loads would: nothing past the first miss is counted or touched, a
// corrupt block mid-chain is refused and quarantined as load() does. readAll (one read of a file's
// data) gives what per-tensor reads give.
import { stat, unlink, utimes } from 'node:fs/promises'
import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import { SafetensorsFile } from '../../src/formats/safetensors/index.ts'
import { blockPath } from '../../src/decode/store/index.ts'
import { flipTensorBit } from '../support/flip-bit.ts'
import { BLOCK, blockPayload, openStore, payloadDiff, tempDir, tokens } from './helpers.ts'

let dir: string
let cleanup: () => Promise<void>
beforeEach(async () => ({ dir, cleanup } = await tempDir()))
afterEach(async () => await cleanup())

const BLOCKS = 12

async function chainStore (): Promise<{ keys: string[] }> {
  const { store } = await openStore(dir)
  const keys = store.keysFor(tokens(BLOCKS * BLOCK))
  for (const [b, k] of keys.entries()) await store.put(k, blockPayload(b))
  return { keys }
}

/** Files' mtimes, which touch() moves: what the LRU order is read from. */
async function mtimes (keys: string[]): Promise<number[]> {
  return await Promise.all(keys.map(async (k) => await stat(blockPath(dir, k)).then((s) => s.mtimeMs, () => -1)))
}

describe('BlockStore.loadChain', () => {
  it('serves every block of a whole chain in order, as load() does, and counts them alike', async () => {
    const { keys } = await chainStore()
    const chained = (await openStore(dir)).store
    const single = (await openStore(dir)).store
    const got = await chained.loadChain(keys)
    expect(got.map((b) => b.hash)).toEqual(keys)
    for (const [b, block] of got.entries()) {
      expect(payloadDiff(block.payload, blockPayload(b))).toBeNull()
      const one = await single.load(keys[b])
      expect(payloadDiff(block.payload, one!.payload)).toBeNull()
    }
    expect(chained.stats).toEqual(single.stats)
  })

  it('stops at the first missing block: nothing past it is counted or touched', async () => {
    const { keys } = await chainStore()
    await unlink(blockPath(dir, keys[5]))
    const old = Date.now() / 1000 - 3600
    for (const k of keys) await utimes(blockPath(dir, k), old, old).catch(() => {})
    const before = await mtimes(keys)
    const { store } = await openStore(dir)
    const got = await store.loadChain(keys)
    expect(got.map((b) => b.hash)).toEqual(keys.slice(0, 5))
    const after = await mtimes(keys)
    for (let i = 0; i < 5; i++) expect(after[i]).toBeGreaterThan(before[i])
    for (let i = 6; i < BLOCKS; i++) expect(after[i]).toBe(before[i])
    const s = store.stats
    expect([s.hits, s.misses, s.verified]).toEqual([5, 1, 5])
  })

  it('refuses and quarantines a corrupt block mid-chain as load() does, and serves the blocks before it', async () => {
    const { keys } = await chainStore()
    const path = blockPath(dir, keys[3])
    await flipTensorBit(path, 'layer_0_state_0')
    const { store } = await openStore(dir)
    const got = await store.loadChain(keys)
    expect(got).toHaveLength(3)
    const s = store.stats
    expect(s.quarantined).toBe(1)
    expect(Object.values(s.refused).reduce((a, b) => a + b, 0)).toBe(1)
    expect(s.hits).toBe(3)
    await expect(stat(path)).rejects.toThrow()
  })

  it('an empty chain loads nothing; a malformed key is refused before any read', async () => {
    const { store } = await openStore(dir)
    expect(await store.loadChain([])).toEqual([])
    await expect(store.loadChain(['not-a-key'])).rejects.toThrow(/64 lowercase hex digits/)
  })
})

describe('SafetensorsFile.readAll', () => {
  it('gives every tensor as read() gives it, each in its own buffer', async () => {
    const { keys } = await chainStore()
    const f = await SafetensorsFile.open(blockPath(dir, keys[2]))
    try {
      const all = await f.readAll()
      expect([...all.keys()]).toEqual([...f.tensors.keys()])
      const buffers = new Set<ArrayBufferLike>()
      for (const [name, t] of all) {
        expect(t).toEqual(await f.read(name))
        expect(t.data.byteOffset).toBe(0)
        buffers.add(t.data.buffer)
      }
      expect(buffers.size).toBe(all.size)
    } finally {
      await f.close()
    }
    await expect(f.readAll()).rejects.toThrow(/file is closed/)
  })
})
