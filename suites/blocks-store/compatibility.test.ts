// A block is served only under the layout it was written for: another model, block size, layer
// types, sub composition, payload layout or geometry is a miss, counted by reason and logged.
import { truncate, readFile, writeFile } from 'node:fs/promises'
import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import { SafetensorsFile, writeSafetensors, type Tensor } from '../../src/formats/safetensors/index.ts'
import { blockContentDigest, blockPath, type IncompatibleReason, type StoreEvent, type StoreLayout } from '../../src/decode/store/index.ts'
import { BLOCK, GEOMETRY_A, GEOMETRY_B, blockPayload, openStore, tempDir, tinyLayout, tokens } from './helpers.ts'

let dir: string
let cleanup: () => Promise<void>
beforeEach(async () => ({ dir, cleanup } = await tempDir()))
afterEach(async () => await cleanup())

/** Write block 0 under the default tiny layout and return its key. */
async function writeDefaultBlock (): Promise<string> {
  const { store } = await openStore(dir)
  const [k] = store.keysFor(tokens(BLOCK))
  await store.put(k, blockPayload(0))
  return k
}

const cases: { name: string, layout: Partial<StoreLayout>, reason: IncompatibleReason, detail: RegExp }[] = [
  { name: 'another model name', layout: { modelName: '/models/other' }, reason: 'model', detail: /model "\/models\/tiny-dsv4", expected "\/models\/other"/ },
  { name: 'another block size', layout: { blockSize: 32 }, reason: 'block-size', detail: /block size 16, expected 32/ },
  { name: 'other layer types', layout: { layerCacheTypes: ['RotatingKVCache', 'CacheList', 'RotatingKVCache', 'CacheList'] }, reason: 'layer-types', detail: /layer 2 is CacheList, expected RotatingKVCache/ },
  { name: 'another layer count', layout: { layerCacheTypes: ['RotatingKVCache', 'CacheList', 'CacheList'] }, reason: 'layer-count', detail: /4 cache layers, expected 3/ },
  { name: 'another geometry fingerprint', layout: { geometryFingerprint: GEOMETRY_B }, reason: 'geometry', detail: new RegExp(`geometry ${GEOMETRY_A}, expected ${GEOMETRY_B}`) },
  { name: 'another sub composition', layout: { cachelistSubtypes: { ...tinyLayout().cachelistSubtypes, 2: ['RotatingKVCache', 'PoolingCache:3'] } }, reason: 'signature', detail: /cache_signature/ },
  { name: 'another payload layout', layout: { payloadLayout: 'split_recurrent_v1' }, reason: 'signature', detail: /"payload_layout":"embedded"/ },
]

describe('a block written under another layout is a miss, counted and logged', () => {
  for (const c of cases) {
    it(`refuses ${c.name}, at scan and at lookup`, async () => {
      const k = await writeDefaultBlock()
      const { store, events } = await openStore(dir, c.layout)
      expect(store.size).toBe(0)
      expect(await store.has(k)).toBe(false)
      expect(await store.load(k)).toBeNull()
      expect(store.stats.misses).toBe(2)
      // Once at the scan, once for each lookup that looked at the file.
      expect(store.stats.refused[c.reason]).toBe(3)
      const refusals = events.filter((e): e is Extract<StoreEvent, { kind: 'refused' }> => e.kind === 'refused')
      expect(refusals.map((e) => e.during)).toEqual(['scan', 'lookup', 'lookup'])
      for (const e of refusals) {
        expect(e).toMatchObject({ hash: k, reason: c.reason })
        expect(e.detail).toMatch(c.detail)
      }
      const restored = await store.restore(tokens(BLOCK))
      expect(restored.ok).toBe(false)
    })
  }

  it('serves the same block under its own layout (the cases above differ only in the layout)', async () => {
    const k = await writeDefaultBlock()
    const { store, events } = await openStore(dir)
    expect(await store.has(k)).toBe(true)
    expect(events.filter((e) => e.kind === 'refused')).toEqual([])
  })
})

describe('blocks that are not servable for what they are, not for the layout', () => {
  async function rewrite (k: string, change: (meta: Record<string, string>) => void): Promise<void> {
    const f = await SafetensorsFile.open(blockPath(dir, k))
    const tensors: Record<string, Tensor> = {}
    for (const name of f.tensors.keys()) tensors[name] = await f.read(name)
    const meta = { ...f.metadata }
    await f.close()
    change(meta)
    await writeSafetensors(blockPath(dir, k), tensors, meta)
  }

  // Blocks written before the geometry fingerprint left cache_signature (it is its own key, as oMLX's
  // signature has no such field) carry it in both places.
  function withGeometryInSignature (geometry: string) {
    return (m: Record<string, string>): void => {
      const sig = JSON.parse(m.cache_signature) as Record<string, unknown>
      const keys = Object.keys({ ...sig, geometry_fingerprint: geometry }).sort()
      m.cache_signature = JSON.stringify(Object.fromEntries(keys.map((key) => [key, key === 'geometry_fingerprint' ? geometry : sig[key]])))
      m.content_sha256 = blockContentDigestOf(m)
    }
  }
  let tensorsOf: Array<{ name: string } & Tensor> = []
  const blockContentDigestOf = (m: Record<string, string>): string => blockContentDigest(m, tensorsOf)

  it('serves an older block whose signature also holds its own geometry, refuses one holding another', async () => {
    const k = await writeDefaultBlock()
    const f = await SafetensorsFile.open(blockPath(dir, k))
    tensorsOf = []
    for (const name of f.tensors.keys()) tensorsOf.push({ name, ...(await f.read(name)) })
    await f.close()
    await rewrite(k, withGeometryInSignature(GEOMETRY_A))
    expect(await (await openStore(dir)).store.has(k)).toBe(true)
    await rewrite(k, withGeometryInSignature(GEOMETRY_B))
    const { store } = await openStore(dir)
    expect(store.stats.refused.signature).toBe(1)
    expect(await store.has(k)).toBe(false)
  })

  it('refuses an unreadable format version', async () => {
    const k = await writeDefaultBlock()
    await rewrite(k, (m) => { m.omlx_cache_format_version = '2' })
    const { store } = await openStore(dir)
    expect(store.stats.refused.format).toBe(1)
    expect(await store.has(k)).toBe(false)
  })

  it('refuses a block whose block_hash is not its file name', async () => {
    const k = await writeDefaultBlock()
    await rewrite(k, (m) => { m.block_hash = 'f'.repeat(64) })
    const { store, events } = await openStore(dir)
    expect(store.stats.refused.hash).toBe(1)
    expect(events.find((e) => e.kind === 'refused')).toMatchObject({ detail: `file is named ${k} but block_hash is ${'f'.repeat(64)}` })
  })

  it('refuses a partial block (token_count below the block size)', async () => {
    const k = await writeDefaultBlock()
    await rewrite(k, (m) => { m.token_count = '15' })
    const { store } = await openStore(dir)
    expect(store.stats.refused['token-count']).toBe(1)
  })

  it('counts a truncated file as unreadable and never indexes it', async () => {
    const k = await writeDefaultBlock()
    const size = (await readFile(blockPath(dir, k))).length
    await truncate(blockPath(dir, k), size - 3)
    const { store, events } = await openStore(dir)
    expect(store.size).toBe(0)
    expect(store.stats.unreadable).toBe(1)
    expect(events.find((e) => e.kind === 'unreadable')).toMatchObject({ problem: expect.stringMatching(/truncated/) })
  })

  it('counts garbage under a block name as unreadable', async () => {
    const k = await writeDefaultBlock()
    await writeFile(blockPath(dir, k), 'not a safetensors file')
    const { store } = await openStore(dir)
    expect(store.size).toBe(0)
    expect(store.stats.unreadable).toBe(1)
  })
})
