// Cache geometry and reused seeds: blocks in the decoder's store built under another geometry are
// counted (and moved aside with fix, never deleted); documents whose leading blocks were cached under
// another geometry are flagged from the seed ledger before they are used as needles or benchmarks.
import { readdir, readFile, stat, writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { DecoderPrefixCache } from '../../src/decode/prefix-cache/index.ts'
import { blockPath } from '../../src/decode/store/index.ts'
import { Geometry } from '../../src/wire/geometry.ts'
import { ConfigError } from '../../src/errors.ts'
import { loadCheckpoint } from '../../src/model/checkpoint/index.ts'
import { parseDeepseekV4Config } from '../../src/model/config.ts'
import { DeepseekV4Engine } from '../../src/model/engine/index.ts'
import { getProfile } from '../../src/model/profiles/index.ts'
import { documentBlockHashes, runGate, SeedLedger, seededPrompt } from '../../verify/gate/index.ts'
import { makeDeployment, type Deployment } from './helpers.ts'

let d: Deployment
let foreign: string[]
let own: string[]
let geometry: string
let oldGeometry: string

beforeAll(async () => {
  d = await makeDeployment('store')
  const ckpt = await loadCheckpoint(d.modelDir)
  geometry = Geometry.fromConfig(ckpt.config, getProfile('decoder')).fingerprint
  // Blocks the decoder stored before the window change: compress YaRN factor 16, same weights and model name.
  const json = await d.configJson()
  json.rope_parameters.compress.factor = 16
  const oldCfg = parseDeepseekV4Config(json)
  oldGeometry = Geometry.fromConfig(oldCfg, getProfile('decoder')).fingerprint
  const old = await DecoderPrefixCache.open({ storeRoot: d.storeDir, modelName: d.modelDir, cfg: oldCfg, profile: 'decoder', blockSize: 256, log: () => {} })
  foreign = (await old.prefillAndStore(DeepseekV4Engine.fromCheckpoint({ ...ckpt, config: oldCfg }, 'decoder'), seededPrompt(1, 600, 512))).storedBlocks.map((b) => b.hash)
  const current = await DecoderPrefixCache.open({ storeRoot: d.storeDir, modelName: d.modelDir, cfg: ckpt.config, profile: 'decoder', blockSize: 256, log: () => {} })
  own = (await current.prefillAndStore(DeepseekV4Engine.fromCheckpoint(ckpt, 'decoder'), seededPrompt(2, 300, 512))).storedBlocks.map((b) => b.hash)
})
afterAll(async () => await d.cleanup())

async function exists (path: string): Promise<boolean> {
  return await stat(path).then(() => true, () => false)
}

describe('blocks of another geometry in the decoder\'s store', () => {
  it('fail the gate on the store, with counts by geometry', async () => {
    expect([foreign.length, own.length]).toEqual([2, 1])
    const r = await runGate(d.options({ store: d.storeDir }))
    const fails = r.findings.filter((f) => f.status === 'fail')
    expect(fails.map((f) => [f.file, f.field])).toEqual([[d.storeDir, 'geometry_fingerprint']])
    expect(fails[0].message).toBe(`2 of 3 block(s) were built under another geometry (2 under ${oldGeometry.slice(0, 16)}); the decoder's is ${geometry.slice(0, 16)}: they are refused as hits but stay on disk; move them aside with --fix (rename, never delete)`)
    expect(r.store).toMatchObject({ blocks: 3, matching: 1, foreign: new Map([[oldGeometry, 2]]) })
  })

  it('of other models are not counted when --model-name names the decoder\'s', async () => {
    const r = await runGate(d.options({ store: d.storeDir, modelName: 'another-model' }))
    expect(r.store).toMatchObject({ blocks: 0, otherModels: 3 })
    expect(r.verdict.pass).toBe(true)
  })

  it('--fix moves exactly them into _quarantine (renamed, not deleted); then the store passes', async () => {
    const before = await Promise.all(foreign.map(async (h) => await readFile(blockPath(d.storeDir, h))))
    const fixed = await runGate(d.options({ store: d.storeDir, fix: true }))
    expect(fixed.verdict.pass).toBe(true)
    expect(fixed.findings.find((f) => f.check === 'store')?.message).toMatch(/^moved 2 block\(s\) of other geometries \(2 under [0-9a-f]{16}\) to .*_quarantine.* \(renamed, not deleted\); kept 1$/)
    const [run] = await readdir(join(d.storeDir, '_quarantine'))
    for (const [i, h] of foreign.entries()) {
      expect(await exists(blockPath(d.storeDir, h))).toBe(false)
      expect(Buffer.compare(await readFile(join(d.storeDir, '_quarantine', run, h[0], `${h}.safetensors`)), before[i])).toBe(0)
    }
    expect(await exists(blockPath(d.storeDir, own[0]))).toBe(true)
    const again = await runGate(d.options({ store: d.storeDir }))
    expect(again.findings.filter((f) => f.check === 'store').map((f) => [f.status, f.message])).toEqual([['pass', `1 block(s), all under the decoder's geometry ${geometry.slice(0, 16)}`]])
  })
})

describe('the seed ledger', () => {
  it('block hashes are shared exactly as far as two documents share full blocks', () => {
    const a = seededPrompt(3, 1000, 512)
    const b = [...a.slice(0, 700), ...seededPrompt(4, 300, 512)]
    const ha = documentBlockHashes(a, 256)
    const hb = documentBlockHashes(b, 256)
    expect([ha.length, hb.length]).toEqual([3, 3])
    expect(hb.slice(0, 2)).toEqual(ha.slice(0, 2))
    expect(hb[2]).not.toBe(ha[2])
    // The block size is part of the chain: the same tokens at another size share nothing.
    expect(documentBlockHashes(a, 128)[1]).not.toBe(ha[0])
    expect(() => documentBlockHashes([1, -2], 1)).toThrow('tokens: token 1 is -2, not a token id')
  })

  it('records documents, finds reuse under another geometry, and survives a reopen', async () => {
    const file = join(d.root, 'ledger', 'seeds.json')
    const ledger = await SeedLedger.open(file)
    expect(ledger.entries).toEqual([])
    const earlier = seededPrompt(5, 2000, 512)
    await ledger.record('needle seed 301 (before the window change)', earlier, oldGeometry, 256)
    await ledger.record('bench seed 9', seededPrompt(9, 600, 512), geometry, 100)
    const reopened = await SeedLedger.open(file)
    expect(reopened.entries.map((e) => [e.label, e.tokens, e.blocks.length, e.blockSize])).toEqual([
      ['needle seed 301 (before the window change)', 2000, 7, 256], ['bench seed 9', 600, 6, 100],
    ])
    expect(await readdir(join(d.root, 'ledger'))).toEqual(['seeds.json'])

    const retest = [...earlier.slice(0, 1500), ...seededPrompt(6, 800, 512)]
    const reuses = reopened.foreignReuses(retest, geometry)
    expect(reuses.map((r) => [r.entry.label, r.sharedBlocks, r.sharedTokens])).toEqual([['needle seed 301 (before the window change)', 5, 1280]])
    expect(reopened.reuses(retest, oldGeometry)[0].sameGeometry).toBe(true)
    expect(reopened.reuses(seededPrompt(7, 2000, 512), geometry)).toEqual([])
  })

  it('a malformed ledger is a ConfigError naming the file and field', async () => {
    const file = join(d.root, 'bad-ledger.json')
    await writeFile(file, JSON.stringify({ format: 'pd-bridge-seed-ledger/1', entries: [{ label: 'x', geometry: 'abc', blockSize: 2, tokens: 4, blocks: [], recordedAt: '' }] }))
    const e = await SeedLedger.open(file).catch((x: unknown) => x)
    expect(e).toBeInstanceOf(ConfigError)
    expect((e as ConfigError).message).toBe(`${file}: entries.0.geometry: must be 64 lowercase hex digits (a geometry fingerprint)`)
    await writeFile(file, '{"format": "other"}')
    expect(((await SeedLedger.open(file).catch((x: unknown) => x)) as Error).message).toBe(`${file}: format: is "other", expected pd-bridge-seed-ledger/1`)
  })

  it('the gate flags a document that reuses a prefix cached under another geometry, by file', async () => {
    const file = join(d.root, 'gate-ledger.json')
    const ledger = await SeedLedger.open(file)
    const earlier = seededPrompt(8, 1024, 512)
    await ledger.record('needle seed 301', earlier, oldGeometry, 256)
    const reused = join(d.root, 'reused.json')
    const fresh = join(d.root, 'fresh.txt')
    await writeFile(reused, JSON.stringify([...earlier.slice(0, 600), ...seededPrompt(10, 600, 512)]))
    await writeFile(fresh, seededPrompt(11, 700, 512).join(' '))
    const r = await runGate(d.options({ ledger: file, documents: [reused, fresh] }))
    const seeds = r.findings.filter((f) => f.check === 'seeds')
    expect(seeds.map((f) => [f.status, f.file])).toEqual([['pass', file], ['fail', reused], ['pass', fresh]])
    expect(seeds[1].message).toBe(`shares its first 512 tokens (2 block(s) of 256) with "needle seed 301", cached under another geometry ${oldGeometry.slice(0, 16)}: the decoder may serve those tokens from old blocks; use a fresh seed`)
    expect(seeds[0].message).toBe('1 document(s) recorded; 1 cached under another geometry ("needle seed 301"): never reuse their prefixes as needles or benchmarks')
  })
})
