// Past its size limit the store evicts least recently used blocks (writes and loads count as use;
// the order survives a restart through file mtimes) and never the block it has just written.
import { stat } from 'node:fs/promises'
import { join } from 'node:path'
import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import { blockPath } from '../../src/decode/store/index.ts'
import { BLOCK, blockPayload, openStore, tempDir, tokens } from './helpers.ts'

let dir: string
let cleanup: () => Promise<void>
beforeEach(async () => ({ dir, cleanup } = await tempDir()))
afterEach(async () => await cleanup())

const pause = async (ms: number): Promise<void> => await new Promise((resolve) => setTimeout(resolve, ms))

async function present (hash: string): Promise<boolean> {
  return await stat(blockPath(dir, hash)).then(() => true, () => false)
}

/** The size of one block file (every block of the tiny model has the same size), measured in a side store. */
async function blockSize (): Promise<number> {
  const { store } = await openStore(join(dir, 'probe'))
  const [k] = store.keysFor(tokens(BLOCK))
  return (await store.put(k, blockPayload(0))).bytes
}

describe('LRU eviction under a size limit', () => {
  it('evicts the least recently used block, where a load counts as a use', async () => {
    const size = await blockSize()
    const { store, events } = await openStore(dir, {}, Math.floor(3.5 * size))
    const [a, b, c, d] = store.keysFor(tokens(4 * BLOCK))
    await store.put(a, blockPayload(0))
    await pause(15)
    await store.put(b, blockPayload(1))
    await pause(15)
    await store.put(c, blockPayload(2))
    await pause(15)
    expect(await store.load(a)).not.toBeNull()
    await pause(15)
    await store.put(d, blockPayload(3))
    expect(await present(b)).toBe(false)
    expect(await Promise.all([a, c, d].map(present))).toEqual([true, true, true])
    expect(store.stats).toMatchObject({ evictions: 1, evictedBytes: size })
    expect(events.filter((e) => e.kind === 'evicted').map((e) => e.kind === 'evicted' && e.hash)).toEqual([b])
    expect(store.entries().map((e) => e.hash)).toEqual([c, a, d])
    expect(store.totalBytes).toBe(3 * size)
  })

  it('keeps the order across a restart (a use updates the file mtime)', async () => {
    const size = await blockSize()
    const { store: first } = await openStore(dir)
    const [a, b, c, d] = first.keysFor(tokens(4 * BLOCK))
    for (const [i, k] of [a, b, c].entries()) {
      await first.put(k, blockPayload(i))
      await pause(15)
    }
    expect(await first.load(a)).not.toBeNull()
    await pause(15)
    const { store } = await openStore(dir, {}, Math.floor(3.5 * size))
    expect(store.entries().map((e) => e.hash)).toEqual([b, c, a])
    await store.put(d, blockPayload(3))
    expect(await present(b)).toBe(false)
    expect(await Promise.all([a, c, d].map(present))).toEqual([true, true, true])
  })

  it('never evicts the block just written, even when it alone is over the limit', async () => {
    const size = await blockSize()
    const { store } = await openStore(dir, {}, Math.floor(size / 2))
    const [a, b] = store.keysFor(tokens(2 * BLOCK))
    await store.put(a, blockPayload(0))
    await store.put(b, blockPayload(1))
    expect(await present(a)).toBe(false)
    expect(await present(b)).toBe(true)
    expect(store.size).toBe(1)
  })
})
