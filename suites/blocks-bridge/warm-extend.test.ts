// Warm-extended prompts (docs/warm-extend.md): the decoder holds blocks for a prefix; the prompt
// grew by a tail. The decoder's cache at the last stored boundary P travels as a carry; the engine
// (decoder profile) and the capture hook both continue from it; the engine prefills only [P, T);
// the writer writes only the blocks past P. The proof is against the decoder's own native prefill
// of the whole prompt (prefillAndStore from token 0, another store): every block identical, the
// restored cache identical, the engine's last logits identical, for one-shot and several chunkings.
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { mkdir, writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import { CaptureSession } from '../../src/capture/index.ts'
import { encodeCarry, mountCarry, parseCarryMeta } from '../../src/capture/carry.ts'
import { compareBlockDirs } from '../../src/decode/store/index.ts'
import { streamBlocks } from '../../src/decode/writer/index.ts'
import { SafetensorsFile } from '../../src/formats/safetensors/index.ts'
import { ModelCache } from '../../src/model/engine/index.ts'
import { readManifest } from '../../src/wire/manifest.ts'
import { BS, bench, cacheDifferences, openStore, prompt, sameBits, type Bench } from './helpers.ts'

let b: Bench
beforeAll(async () => { b = await bench('blocks-warm-extend') })
afterAll(async () => await b.cleanup())

/** Store the first `prefix` tokens natively, then look the whole prompt up: the carry at P and the store. */
async function warmStore (tokens: number[], prefix: number, name: string) {
  const store = await openStore(b, name)
  await store.prefillAndStore(b.engine('decoder'), tokens.slice(0, prefix))
  const hit = await store.lookup(tokens)
  const path = join(b.scratch('carry'), 'carry.safetensors')
  await mkdir(join(path, '..'), { recursive: true })
  await writeFile(path, encodeCarry(hit.cache!, { fingerprint: b.sidecar.fingerprint, profile: 'decoder' }))
  return { store, p: hit.cachedTokens, path }
}

/** Continue from the carry: engine and hook mounted from it, the tail prefilled in chunks of `chunk`. */
async function continueFrom (tokens: number[], carryPath: string, requestId: string, chunk: number) {
  const engine = b.engine('decoder')
  const file = await SafetensorsFile.open(carryPath)
  try {
    const cache = await mountCarry(file, engine.newCache())
    const hookCache = await mountCarry(file, new ModelCache(b.sidecar.kvPath.layers.map((a) => a.makeCache())))
    const root = b.scratch('captures')
    await mkdir(root)
    const session = await CaptureSession.start({ sidecar: b.sidecar, captureRoot: root, requestId, tokenCount: tokens.length, tokens, resume: hookCache })
    const p = cache.tokenCount
    let logits: Float32Array = new Float32Array(0)
    for (let c0 = p; c0 < tokens.length; c0 += chunk) {
      const c1 = Math.min(tokens.length, c0 + chunk)
      logits = engine.prefill(tokens.slice(c0, c1), cache, { attnInputHook: session.onAttentionInput, logits: c1 === tokens.length ? 'last' : 'none', maxChunk: chunk }).logits
    }
    await session.finish()
    return { dir: session.dir, logits, report: session.report() }
  } finally {
    await file.close()
  }
}

describe('a warm-extended prompt bridged from the last stored boundary', () => {
  it('1500 tokens over a stored 700-token prefix: P = 512, 3 new blocks, 5/5 identical to a native prefill of all 1500, for one-shot and chunks of 300 and 97', async () => {
    const T = 1500
    const tokens = prompt(T, 61)
    const native = await openStore(b, 'native')
    const nativeRun = await native.prefillAndStore(b.engine('decoder'), tokens)

    for (const chunk of [T, 300, 97]) {
      const { store, p, path } = await warmStore(tokens, 700, `warm-${chunk}`)
      expect(p).toBe(2 * BS)
      const carry = await SafetensorsFile.open(path)
      expect(parseCarryMeta(carry.metadata, path).tokens).toBe(p)
      await carry.close()

      const run = await continueFrom(tokens, path, `warm-${chunk}`, chunk)
      const manifest = await readManifest(run.dir)
      expect(manifest).toMatchObject({ state: 'done', startToken: p, sealedLength: T })
      // The engine continued exactly: its logits at the last token are the native prefill's, bit for bit.
      expect(sameBits(run.logits, nativeRun.logits)).toBe(true)

      const report = await streamBlocks({ dir: run.dir, target: store, sidecar: b.sidecar, requestId: `warm-${chunk}`, tokens })
      expect(report).toMatchObject({ startToken: p, blocks: 3, written: 3, reused: 0 })
      const verdict = await compareBlockDirs(native.store.root, store.store.root)
      expect(verdict.blocks.flatMap((x) => x.differences)).toEqual([])
      expect(`${verdict.identical}/${verdict.total} identical`).toBe('5/5 identical')

      const restored = await store.lookup(tokens)
      const reference = await native.lookup(tokens)
      expect(restored.cachedTokens).toBe(5 * BS)
      expect(cacheDifferences(restored.cache!, reference.cache!)).toEqual([])
    }
  })

  it('the continued capture moves only what the tail adds: fewer bytes than a capture from 0', async () => {
    const T = 1500
    const tokens = prompt(T, 62)
    const { path } = await warmStore(tokens, 1100, 'warm-bytes')
    const run = await continueFrom(tokens, path, 'warm-bytes', 512)
    const cold = await warmStore(tokens, 0 + BS, 'cold-bytes') // P = 256: almost everything is new
    const coldRun = await continueFrom(tokens, cold.path, 'cold-bytes', 512)
    expect(run.report.payloadBytes).toBeLessThan(coldRun.report.payloadBytes)
    expect(run.report.boundarySnapshots.boundaries).toBe(1) // 1280 only (P = 1024)
    expect(coldRun.report.boundarySnapshots.boundaries).toBe(4) // 512, 768, 1024, 1280
  })

  it('a writer refuses a continued capture whose parent block is not in the store', async () => {
    const T = 900
    const tokens = prompt(T, 63)
    const { path } = await warmStore(tokens, 600, 'warm-orphan')
    const run = await continueFrom(tokens, path, 'warm-orphan', 256)
    const empty = await openStore(b, 'empty')
    await expect(streamBlocks({ dir: run.dir, target: empty, sidecar: b.sidecar, requestId: 'warm-orphan', tokens }))
      .rejects.toThrow(/continues from token 512, but the store no longer holds block 1/)
  })

  it('a session refuses to continue a cache that does not stand at a block boundary below T', async () => {
    const tokens = prompt(600, 64)
    const cache = new ModelCache(b.sidecar.kvPath.layers.map((a) => a.makeCache()))
    cache.tokenCount = 300
    await expect(CaptureSession.start({ sidecar: b.sidecar, captureRoot: b.scratch('refuse'), requestId: 'x', tokenCount: 600, tokens, resume: cache }))
      .rejects.toThrow(/must be a block boundary \(a multiple of 256\) below T = 600/)
  })
})
