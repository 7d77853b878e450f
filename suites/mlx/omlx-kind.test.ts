// The omlx decoder kind (src/engines/omlx) against blocks oMLX's own prefix-cache code wrote
// (harness/fixtures/mlx/omlx-blocks/, jundot/omlx 1e8a6074 on MLX's CPU: make-prefix-cache-proof.sh).
//   - f32, 777 tokens: the product's path end to end on this side: a live prefill with the capture
//     hook, the capture, the front door's target for `decoder.engine: omlx` (openWriter, writeNext,
//     finalize) into an oMLX directory; its 3 blocks against oMLX's 3, tensor by tensor, every
//     difference printed (two engines' f32: tolerance-based, 1e-5).
//   - mlx-cpu, 301 tokens: the mlx-cpu cache path over MLX's recorded attention inputs, put through
//     the kind's store: bit-identical to oMLX's block but for each window's oldest row (zeros in ours;
//     docs/omlx.md shows from mlx-lm's code that nothing reads it).
//   - oMLX's own blocks in our store: left alone by default (a miss, never quarantined), served with
//     omlxBlocks 'serve'; a bridged block replaces oMLX's file under the same key without a quarantine.
//   - bad config is refused before anything is opened.
import { createSecretKey } from 'node:crypto'
import { cp, mkdir, readdir, stat } from 'node:fs/promises'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { beforeAll, describe, expect, it } from 'vitest'
import { CaptureSession, exportWeights, type Sidecar } from '../../src/capture/index.ts'
import { blockPath, QUARANTINE_DIR } from '../../src/decode/store/index.ts'
import { checkOmlxBlockSize, omlxAlignedBlockSize, omlxEngine, openOmlxStore } from '../../src/engines/omlx/index.ts'
import { omlxTarget } from '../../src/decoders/omlx/target.ts'
import { cacheToBlockPayload } from '../../src/decode/prefix-cache/index.ts'
import { readMlxCpuCacheWeights } from '../../src/capture/mlx-cpu/index.ts'
import { readSafetensors } from '../../src/formats/safetensors/index.ts'
import {
  compareBlocks, describeComparisons, identical, isWindow, omlxBlocks, readBlock, readProof, tokensOf, PROOF_CASES, type Comparison,
} from '../../harness/mlx/compare-blocks.ts'
import { mlxCpuBlockCache, mlxAttnInput } from '../../harness/mlx/mlx-cpu-block.ts'
import { tinyModelForFile } from '../blocks/helpers.ts'
import { envWith, runCli } from '../stack/helpers.ts'

const FX = fileURLToPath(new URL('../../harness/fixtures/', import.meta.url))
const PROOF = readProof(FX)
const held = tinyModelForFile()
let f32Sidecar: Sidecar

beforeAll(async () => {
  f32Sidecar = await exportWeights({ model: held.model.dir, profile: 'f32', out: held.model.scratch('sidecar-f32'), blockSize: 256 })
})

/** An empty directory standing for oMLX's cache directory (oMLX makes it; the kind never does). */
async function omlxDir (name: string): Promise<string> {
  const dir = held.model.scratch(name)
  await mkdir(dir, { recursive: true })
  return dir
}

async function exists (path: string): Promise<boolean> {
  return await stat(path).then(() => true, () => false)
}

describe('the omlx kind writes the blocks oMLX writes', () => {
  it('f32, 777 tokens, through the front door\'s omlx target: 3 blocks, metadata identical but created_at, every tensor within 1e-5 of oMLX\'s', async () => {
    const c = PROOF.cases['tiny-t777-f32']
    expect(c.checkpoint, 're-run harness/mlx/make-prefix-cache-proof.sh').toBe(held.digest)
    const tokens = tokensOf(FX, PROOF_CASES['tiny-t777-f32'].tokens, c.tokens)
    // The prefill engine's side: a live f32 prefill with the capture hook.
    const captures = held.model.scratch('captures')
    await mkdir(captures, { recursive: true })
    const session = await CaptureSession.start({ sidecar: f32Sidecar, captureRoot: captures, requestId: 'omlx-f32', tokenCount: tokens.length, tokens })
    const engine = held.model.engine('f32')
    engine.prefill(tokens, engine.newCache(), { logits: 'none', attnInputHook: session.onAttentionInput, maxChunk: tokens.length })
    await session.finish()
    // The front door's side: the kind's target, as setup.ts opens it for decoder.engine omlx.
    const dir = await omlxDir('omlx-f32')
    const target = await omlxTarget({ cacheDir: dir, modelName: c.model_name, cfg: held.model.ckpt.config, profile: 'f32', blockSize: c.block_size, log: () => {} })
    target.checkSidecar(f32Sidecar.json)
    const w = await target.openWriter(session.dir, { sidecar: f32Sidecar, requestId: 'omlx-f32', tokens })
    while (await w.writeNext() !== null) { /* one block per step */ }
    const report = await w.finalize()
    expect(report.blocks).toBe(c.boundary / c.block_size)
    const theirs = await omlxBlocks(FX, 'tiny-t777-f32')
    const ours = new Map<string, Awaited<ReturnType<typeof readBlock>>>()
    for (const sub of await readdir(dir)) {
      if (!/^[0-9a-f]$/.test(sub)) continue
      for (const f of await readdir(join(dir, sub))) ours.set(f.replace(/\.safetensors$/, ''), await readBlock(join(dir, sub, f)))
    }
    expect([...ours.keys()].sort(), 'block keys (oMLX\'s chained hashes under its model name)').toEqual([...theirs.keys()].sort())
    const cmps: Comparison[] = []
    for (const [hash, block] of ours) cmps.push(compareBlocks(block, theirs.get(hash)!))
    console.log(describeComparisons('omlx kind, f32 blocks vs oMLX', cmps).join('\n'))
    for (const cmp of cmps) {
      for (const d of [...cmp.metadata, ...cmp.structure]) console.log(`  difference: ${d}`)
      expect(cmp.metadata).toEqual([])
      expect(cmp.structure).toEqual([])
      expect(cmp.exact.filter((e) => !e.identical)).toEqual([])
      for (const t of cmp.tensors) expect(t.readRows.relError, t.name).toBeLessThanOrEqual(1e-5)
    }
  })

  it('mlx-cpu, 301 tokens, through the kind\'s store: bit-identical to oMLX\'s block but each window\'s oldest row', async () => {
    const c = PROOF.cases['tiny-t301-mxq']
    expect(c.checkpoint).toBe(held.digest)
    const cfg = held.model.ckpt.config
    const weights = await readMlxCpuCacheWeights(join(FX, 'mlx/tiny-mxq-cache-weights.safetensors'))
    const inputs = await readSafetensors(join(FX, 'mlx/omlx-blocks/tiny-t301-mxq-attn-inputs.safetensors'))
    const cache = mlxCpuBlockCache(cfg, weights, (layer) => mlxAttnInput(inputs.tensors, cfg, layer, c.boundary), c.boundary)
    const dir = await omlxDir('omlx-mxq')
    const pc = await openOmlxStore({ cacheDir: dir, modelName: c.model_name, cfg, profile: 'decoder', blockSize: c.block_size, log: () => {} })
    expect(pc.storage, 'bf16 blocks, as MLX holds the cache').toBe('bf16-if-exact')
    const [hash] = pc.store.keysFor(tokensOf(FX, PROOF_CASES['tiny-t301-mxq'].tokens, c.tokens))
    await pc.store.put(hash, cacheToBlockPayload(cfg, cache, 0, c.block_size, { storage: pc.storage }), { parentHash: null })
    const theirs = await omlxBlocks(FX, 'tiny-t301-mxq')
    expect([...theirs.keys()]).toEqual([hash])
    const cmp = compareBlocks(await readBlock(blockPath(dir, hash)), theirs.get(hash)!)
    console.log(describeComparisons('omlx kind, mlx-cpu block vs oMLX', [cmp]).join('\n'))
    expect(cmp.metadata).toEqual([])
    expect(cmp.structure).toEqual([])
    expect(identical(cmp, true), 'every bit a query reads').toBe(true)
    for (const t of cmp.tensors) if (!isWindow(t.name)) expect(t.all.identical, t.name).toBe(t.all.elements)
  })
})

describe('blocks oMLX wrote, in the kind\'s store', () => {
  const c = () => PROOF.cases['tiny-t301-mxq']
  const tokens = () => tokensOf(FX, PROOF_CASES['tiny-t301-mxq'].tokens, c().tokens)
  let dir: string
  beforeAll(async () => {
    dir = await omlxDir('omlx-own')
    await cp(join(FX, 'mlx/omlx-blocks/tiny-t301-mxq'), dir, { recursive: true })
  })

  it('are left alone by default: a miss, never quarantined', async () => {
    const pc = await openOmlxStore({ cacheDir: dir, modelName: c().model_name, cfg: held.model.ckpt.config, profile: 'decoder', blockSize: c().block_size, log: () => {} })
    const found = await pc.lookup([...tokens(), 7], { exactPromptRule: false })
    expect(found.cachedTokens).toBe(0)
    const [hash] = pc.store.keysFor(tokens())
    expect(await exists(blockPath(dir, hash)), 'oMLX\'s file is where oMLX put it').toBe(true)
    expect(await exists(join(dir, QUARANTINE_DIR))).toBe(false)
    expect(pc.store.stats.quarantined).toBe(0)
  })

  it('are served when the user says so (omlxBlocks serve), restoring oMLX\'s cache', async () => {
    const pc = await openOmlxStore({ cacheDir: dir, modelName: c().model_name, cfg: held.model.ckpt.config, profile: 'decoder', blockSize: c().block_size, omlxBlocks: 'serve', log: () => {} })
    const found = await pc.lookup([...tokens(), 7], { exactPromptRule: false })
    expect(found.cachedTokens).toBe(c().boundary)
    expect(found.cache?.tokenCount).toBe(c().boundary)
    expect(pc.store.stats.verified, 'nothing vouched for oMLX\'s bytes: not counted as verified').toBe(0)
  })

  it('a bridged block under the same key replaces oMLX\'s file atomically, nothing quarantined', async () => {
    const own = await omlxDir('omlx-replace')
    await cp(join(FX, 'mlx/omlx-blocks/tiny-t301-mxq'), own, { recursive: true })
    const open = async (omlxBlocks: 'leave' | 'serve') => await openOmlxStore({ cacheDir: own, modelName: c().model_name, cfg: held.model.ckpt.config, profile: 'decoder', blockSize: c().block_size, omlxBlocks, log: () => {} })
    const [hash] = (await open('leave')).store.keysFor(tokens())
    // The payload to bridge: oMLX's own block as our store reads it (the same tokens, the same model).
    const loaded = await (await open('serve')).store.load(hash)
    expect(loaded).not.toBeNull()
    const pc = await open('leave')
    const put = await pc.store.put(hash, loaded!.payload, { parentHash: null })
    expect(put.written).toBe(true)
    expect((await readBlock(blockPath(own, hash))).metadata.content_sha256).toMatch(/^[0-9a-f]{64}$/)
    expect(await exists(join(own, QUARANTINE_DIR))).toBe(false)
    expect((await pc.lookup([...tokens(), 7], { exactPromptRule: false })).cachedTokens, 'ours is served, verified').toBe(c().boundary)
  })
})

describe('the kind refuses what oMLX would never read, before opening anything', () => {
  const cfg = () => held.model.ckpt.config
  it('a missing cache directory, an empty model name, a block size off the window', async () => {
    const base = { cacheDir: await omlxDir('omlx-cfg'), modelName: '/Users/me/models/tiny', cfg: cfg(), profile: 'decoder', blockSize: 512 }
    await expect(openOmlxStore({ ...base, cacheDir: join(base.cacheDir, 'not-mounted') })).rejects.toThrow(/decoder\.cacheDir: is not an existing directory/)
    expect(await exists(join(base.cacheDir, 'not-mounted')), 'never made').toBe(false)
    await expect(openOmlxStore({ ...base, modelName: '' })).rejects.toThrow(/decoder\.modelName/)
    await expect(openOmlxStore({ ...base, blockSize: 320 })).rejects.toThrow(/decoder\.blockSize: 320 is not a multiple of the sliding window \(128\); oMLX aligns this model's blocks to 512/)
    await expect(openOmlxStore({ ...base, omlxBlocks: 'maybe' as 'serve' })).rejects.toThrow(/decoder\.omlxBlocks/)
    // oMLX's blocks carry no keyed digest: serving them cannot go with a deployment's block key.
    await expect(openOmlxStore({ ...base, omlxBlocks: 'serve', authKey: createSecretKey(Buffer.alloc(32, 7)) })).rejects.toThrow(/cannot go with a block key/)
  })

  it('oMLX\'s block size rule: the window multiplied up to at least 512, at most 1024', () => {
    expect(omlxAlignedBlockSize(128)).toBe(512)
    expect(omlxAlignedBlockSize(300)).toBe(600)
    expect(omlxAlignedBlockSize(400)).toBe(800)
    expect(omlxAlignedBlockSize(1024)).toBe(1024)
    expect(omlxEngine.blockSizeFor(cfg())).toBe(omlxAlignedBlockSize(cfg().slidingWindow))
    expect(() => checkOmlxBlockSize(256, 128, [4, 128])).not.toThrow()
    expect(() => checkOmlxBlockSize(384, 128, [4, 256])).toThrow(/pool ratio 256/)
  })
})

describe('serve --decoder omlx', () => {
  it('names the missing flags, and refuses an unmounted cache directory before making anything', async () => {
    const state = held.model.scratch('serve-state')
    const env = envWith(state)
    const bare = await runCli(['serve', '--decoder', 'omlx'], env)
    expect(bare.code).toBe(2)
    expect(bare.stderr).toContain('--decoder omlx: needs --omlx-cache-dir, --omlx-url, --omlx-model-name (docs/omlx.md)')
    const unmounted = await runCli(['serve', '--decoder', 'omlx', '--omlx-cache-dir', join(state, 'not-mounted'), '--omlx-url', 'http://127.0.0.1:9', '--omlx-model-name', '/Users/me/models/tiny'], env)
    expect(unmounted.code).toBe(2)
    expect(unmounted.stderr).toContain('decoder.cacheDir: is not an existing directory')
    expect(await exists(join(state, 'models')), 'no checkpoint made').toBe(false)
    expect(await exists(join(state, 'not-mounted'))).toBe(false)
  })
})
