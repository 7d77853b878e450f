// The index: built by a scan at open, rebuilt by rescan(), and completed on every miss by a look at
// the disk, so blocks another process writes become visible with no patch and no restart.
import { rename, rm, mkdir } from 'node:fs/promises'
import { join } from 'node:path'
import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import { blockPath } from '../../src/decode/store/index.ts'
import { BLOCK, GEOMETRY_B, blockPayload, openStore, payloadDiff, tempDir, tokens } from './helpers.ts'

let dir: string
let cleanup: () => Promise<void>
beforeEach(async () => ({ dir, cleanup } = await tempDir()))
afterEach(async () => await cleanup())

describe('opening a store scans what is already on disk', () => {
  it('indexes every compatible block written before it opened', async () => {
    const { store: writer } = await openStore(dir)
    const keys = writer.keysFor(tokens(3 * BLOCK))
    for (const [b, k] of keys.entries()) await writer.put(k, blockPayload(b))
    const { store } = await openStore(dir)
    expect(store.size).toBe(3)
    expect(store.totalBytes).toBe(writer.totalBytes)
    expect(store.entries().map((e) => e.hash).sort()).toEqual([...keys].sort())
  })
})

describe('a miss checks the disk, so another process\'s blocks are found without a rescan', () => {
  it('serves a block a second store wrote after the first one opened', async () => {
    const { store: decoder } = await openStore(dir)
    const { store: bridge } = await openStore(dir)
    const [k] = bridge.keysFor(tokens(BLOCK))
    expect(await decoder.has(k)).toBe(false)
    await bridge.put(k, blockPayload(0))
    expect(decoder.size).toBe(0)
    expect(await decoder.has(k)).toBe(true)
    expect(decoder.stats.foundOnDisk).toBe(1)
    expect(decoder.stats).toMatchObject({ hits: 1, misses: 1 })
    const loaded = await decoder.load(k)
    expect(payloadDiff(loaded!.payload, blockPayload(0))).toBeNull()
    expect(decoder.size).toBe(1)
  })
})

describe('a lookup checks an indexed block\'s file too', () => {
  it('misses a block deleted since it was indexed, and re-examines one replaced since', async () => {
    const { store, events } = await openStore(dir)
    const [k0, k1] = store.keysFor(tokens(2 * BLOCK))
    await store.put(k0, blockPayload(0))
    await store.put(k1, blockPayload(1))
    await rm(blockPath(dir, k0))
    const { store: foreign } = await openStore(join(dir, 'elsewhere'), { geometryFingerprint: GEOMETRY_B })
    await foreign.put(k1, blockPayload(1))
    await rename(blockPath(join(dir, 'elsewhere'), k1), blockPath(dir, k1))
    expect(await store.has(k0)).toBe(false)
    expect(await store.has(k1)).toBe(false)
    expect(store.size).toBe(0)
    expect(events.filter((e) => e.kind === 'refused')).toMatchObject([{ hash: k1, reason: 'geometry', during: 'lookup' }])
  })
})

describe('rescan() rebuilds the index from disk', () => {
  it('adds new blocks, drops vanished ones and re-reads changed ones', async () => {
    const { store: decoder } = await openStore(dir)
    const { store: bridge } = await openStore(dir)
    const keys = bridge.keysFor(tokens(3 * BLOCK))
    for (const [b, k] of keys.entries()) await bridge.put(k, blockPayload(b))
    expect((await decoder.rescan()).indexed).toBe(3)
    expect(decoder.size).toBe(3)

    await rm(blockPath(dir, keys[0]))
    // Another writer replaces block 1 with one built under another geometry.
    const { store: foreign } = await openStore(join(dir, 'elsewhere'), { geometryFingerprint: GEOMETRY_B })
    await foreign.put(keys[1], blockPayload(1))
    await rename(blockPath(join(dir, 'elsewhere'), keys[1]), blockPath(dir, keys[1]))

    const report = await decoder.rescan()
    expect(report).toMatchObject({ indexed: 1, refused: { geometry: 1 } })
    expect(decoder.entries().map((e) => e.hash)).toEqual([keys[2]])
  })

  it('never indexes a block file outside its hash\'s subdirectory', async () => {
    const { store: bridge } = await openStore(dir)
    const [k] = bridge.keysFor(tokens(BLOCK))
    await bridge.put(k, blockPayload(0))
    const wrong = k[0] === '0' ? '1' : '0'
    await mkdir(join(dir, wrong), { recursive: true })
    await rename(blockPath(dir, k), join(dir, wrong, `${k}.safetensors`))
    const { store } = await openStore(dir)
    expect(store.size).toBe(0)
    expect(await store.has(k)).toBe(false)
  })
})
