// Blocks written under another geometry (here: the compress rope's YaRN factor 16 instead of 32,
// same weights) are a miss, never a hit; the miss is logged and counted, and `pd-bridge cache
// quarantine` moves those blocks aside so the decoder can store and serve its own.
import { execFile } from 'node:child_process'
import { readFile, readdir, stat } from 'node:fs/promises'
import { join } from 'node:path'
import { promisify } from 'node:util'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { parseDeepseekV4Config, type DeepseekV4Config } from '../../src/model/config.ts'
import { DeepseekV4Engine } from '../../src/model/engine/index.ts'
import { blockPath, readBlockFile } from '../../src/decode/store/index.ts'
import { DecoderPrefixCache, restoreCache, type PrefixCacheEvent } from '../../src/decode/prefix-cache/index.ts'
import { BS, cacheDifferences, nativePrefill, openPrefixCache, prompt, tinyModel, type TinyModel } from './helpers.ts'

const run = promisify(execFile)
const bin = new URL('../../bin/pd-bridge.mjs', import.meta.url).pathname

let model: TinyModel
let variantCfg: DeepseekV4Config
let variantEngine: DeepseekV4Engine
let root: string
let variant: DecoderPrefixCache
let decoder: DecoderPrefixCache
let events: PrefixCacheEvent[]
let foreign: string[]
const P = prompt(700, 31)

async function exists (path: string): Promise<boolean> {
  return await stat(path).then(() => true, () => false)
}

beforeAll(async () => {
  model = await tinyModel()
  const json = JSON.parse(await readFile(join(model.dir, 'config.json'), 'utf8')) as { rope_parameters: { compress: { factor: number } } }
  expect(json.rope_parameters.compress.factor).toBe(32)
  json.rope_parameters.compress.factor = 16
  variantCfg = parseDeepseekV4Config(json)
  variantEngine = DeepseekV4Engine.fromCheckpoint({ ...model.ckpt, config: variantCfg }, 'f32')
  root = model.scratch('store')
  // The variant's prefix cache: same root, model name, profile and block size; another rope table.
  variant = await DecoderPrefixCache.open({ storeRoot: root, modelName: model.dir, cfg: variantCfg, profile: 'f32', blockSize: BS, log: () => {} })
  const stored = await variant.prefillAndStore(variantEngine, P)
  foreign = stored.storedBlocks.map((b) => b.hash)
  ;({ pc: decoder, events } = await openPrefixCache(model, root, 'f32'))
})
afterAll(async () => await model.cleanup())

describe('blocks of another compress rope factor', () => {
  it('carry another geometry fingerprint, and serving them would be wrong', async () => {
    expect(foreign).toHaveLength(2)
    expect(variant.geometryFingerprint).not.toBe(decoder.geometryFingerprint)
    // Same keys (the key knows only the model name and tokens): the fingerprint is all that tells them apart.
    expect(decoder.store.keysFor(P)).toEqual(foreign)
    const payloads = await Promise.all(foreign.map(async (h) => (await readBlockFile(blockPath(root, h))).payload))
    const forced = restoreCache(model.ckpt.config, payloads, BS)
    const diffs = cacheDifferences(forced, nativePrefill(model.engine('f32'), P.slice(0, 2 * BS)).cache)
    expect(diffs).toContain('x.layers.1.compressor.compressed_kv bits differ')
    expect(diffs).toContain('x.layers.2.compressor.compressed_kv bits differ')
  })

  it('are a miss, never a hit: logged as a geometry miss and counted per lookup', async () => {
    const miss = await decoder.lookup(P)
    expect(miss.cache).toBeNull()
    expect(miss.cachedTokens).toBe(0)
    expect(miss.reason).toMatch(new RegExp(`^block 0 \\(${foreign[0]}\\) was built under another geometry: `))
    expect(decoder.stats).toMatchObject({ lookups: 1, hits: 0, misses: 1, geometryMisses: 1 })
    expect(events).toContainEqual(expect.objectContaining({ kind: 'geometry-miss', block: 0, hash: foreign[0] }))
    expect(decoder.storeStats.refused.geometry).toBeGreaterThanOrEqual(1)

    await decoder.lookup([...P, ...prompt(400, 32)])
    expect(decoder.stats).toMatchObject({ lookups: 2, hits: 0, misses: 2, geometryMisses: 2 })
  })

  it('the decoder refuses to store with an engine of another geometry', async () => {
    await expect(decoder.prefillAndStore(variantEngine, P)).rejects.toThrow(/the engine's geometry [0-9a-f]{64} \(profile f32\) is not the store's [0-9a-f]{64}/)
  })

  it('`pd-bridge cache quarantine` moves them aside; then the decoder stores and serves its own blocks', async () => {
    const { stdout } = await run(process.execPath, [bin, 'cache', 'quarantine', root, '--geometry', decoder.geometryFingerprint])
    expect(stdout).toMatch(/moved 2 block\(s\) to /)
    for (const h of foreign) expect(await exists(blockPath(root, h))).toBe(false)
    const [run0] = await readdir(join(root, '_quarantine'))
    for (const h of foreign) expect(await exists(join(root, '_quarantine', run0, h[0], `${h}.safetensors`))).toBe(true)

    const before = decoder.stats.geometryMisses
    const empty = await decoder.lookup(P)
    expect(empty.reason).toBe('block 0 (tokens [0, 256)) is not stored')
    expect(decoder.stats.geometryMisses).toBe(before)

    const engine = model.engine('f32')
    const stored = await decoder.prefillAndStore(engine, P)
    expect(stored.storedBlocks.map((b) => b.written)).toEqual([true, true])
    const hit = await decoder.lookup(P)
    expect(hit.cachedTokens).toBe(2 * BS)
    expect(cacheDifferences(hit.cache!, nativePrefill(engine, P.slice(0, 2 * BS)).cache)).toEqual([])
  })
})
