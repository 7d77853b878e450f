// The writer's builder threads (src/decode/writer/build-pool.ts): blocks read, built and encoded
// on other threads, put in the store in order by the writer's own. The blocks must be the ones
// the decoder writes itself after its native prefill (verify-blocks: N/N identical, created_at
// aside), whatever the number of threads; a build that fails fails the writer with the reason and
// leaves the blocks before it; the store takes an encoded block only when it would serve it.
import { cp, readFile, rm } from 'node:fs/promises'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { blockPath, compareBlockDirs, encodeBlockFile, writeBlockFile } from '../../src/decode/store/index.ts'
import { DecoderPrefixCache } from '../../src/decode/prefix-cache/index.ts'
import { deriveBlockKey } from '../../src/config/block-key.ts'
import { SafetensorsFile } from '../../src/formats/safetensors/index.ts'
import { BlockWriter, streamBlocks } from '../../src/decode/writer/index.ts'
import { BS, bench, capture, openStore, prompt, type Bench } from './helpers.ts'

let b: Bench
const n = 1300
const tokens = prompt(n, 1307)
const blocks = Math.floor(n / BS)
const requestId = 'builders-1300'
let native: DecoderPrefixCache
let captured: Awaited<ReturnType<typeof capture>>

beforeAll(async () => {
  b = await bench('blocks-bridge-builders')
  native = await openStore(b, 'native')
  await native.prefillAndStore(b.engine('decoder'), tokens)
  captured = await capture(b, tokens, { requestId })
})
afterAll(async () => await b.cleanup())

describe.each([1, 2, 3])('%i builder thread(s)', (builders) => {
  it('writes the decoder\'s own blocks, N/N identical, every one verified', async () => {
    const bridged = await openStore(b, `bridged-${builders}`)
    const report = await streamBlocks({ dir: captured.dir, target: bridged, sidecar: b.sidecar, requestId, tokens, builders })
    expect(report).toMatchObject({ state: 'done', blocks, written: blocks, reused: 0, verified: blocks })
    // The work was done on the threads: nothing read or built here, the wait for them timed instead.
    expect(report.timings).toMatchObject({ read: 0, build: 0 })
    expect(report.timings.builderBuild).toBeGreaterThan(0)
    expect(report.timings.buildWait).toBeGreaterThanOrEqual(0)
    const verdict = await compareBlockDirs(native.store.root, bridged.store.root)
    expect(verdict.blocks.flatMap((x) => x.differences)).toEqual([])
    expect(`${verdict.identical}/${verdict.total} identical`).toBe(`${blocks}/${blocks} identical`)
  })
})

it('with a block key the threads stamp the keyed digest the decoder stamps: N/N identical to a keyed native store, served by one', async () => {
  const key = deriveBlockKey('builders-test-key').key
  const keyed = async (name: string): Promise<DecoderPrefixCache> =>
    await DecoderPrefixCache.open({ storeRoot: b.scratch(name), modelName: b.modelDir, cfg: b.ckpt.config, profile: 'decoder', blockSize: BS, engine: b.engine('decoder'), log: () => {}, authKey: key })
  const nativeKeyed = await keyed('native-keyed')
  await nativeKeyed.prefillAndStore(b.engine('decoder'), tokens)
  const bridged = await keyed('bridged-keyed')
  // finalize re-reads every block through the keyed store: each keyed digest is checked there.
  const report = await streamBlocks({ dir: captured.dir, target: bridged, sidecar: b.sidecar, requestId, tokens, builders: 2 })
  expect(report).toMatchObject({ blocks, written: blocks, verified: blocks })
  const verdict = await compareBlockDirs(nativeKeyed.store.root, bridged.store.root)
  expect(verdict.blocks.flatMap((x) => x.differences)).toEqual([])
  expect(verdict.identical).toBe(blocks)
  const f = await SafetensorsFile.open(blockPath(bridged.store.root, bridged.store.keysFor(tokens)[0]))
  await f.close()
  expect(f.metadata.content_hmac_sha256).toMatch(/^[0-9a-f]{64}$/)
  expect(bridged.storeStats).toMatchObject({ refused: {}, quarantined: 0 })
})

it('a second run over the same store reuses every block, as the single-thread writer does', async () => {
  const store = await openStore(b, 'reuse')
  await streamBlocks({ dir: captured.dir, target: store, sidecar: b.sidecar, requestId, tokens })
  const again = await streamBlocks({ dir: captured.dir, target: store, sidecar: b.sidecar, requestId, tokens, builders: 2 })
  expect(again).toMatchObject({ blocks, written: 0, reused: blocks, verified: blocks })
})

it('a build that fails fails the writer with the reason, and nothing past it is put', async () => {
  const dir = b.scratch('capture-copy')
  await cp(captured.dir, dir, { recursive: true })
  const store = await openStore(b, 'fails')
  const writer = await BlockWriter.open(dir, { target: store, sidecar: b.sidecar, requestId, tokens, builders: 2 })
  // Gone after the writer checked it: the threads open the files themselves, at the first step.
  await rm(join(dir, captured.manifest.layers[1].file))
  await expect(writer.writeNext()).rejects.toThrow(/block 0 could not be built: .*(ENOENT|no such file)/)
  await writer.close()
  expect(store.store.size).toBe(0)
})

it('encodeBlockFile gives the very bytes writeBlockFile writes', async () => {
  const hash = native.store.keysFor(tokens)[2]
  const loaded = await native.store.load(hash)
  const root = b.scratch('encode')
  const layout = native.store.layout
  const parent = native.store.keysFor(tokens)[1]
  await writeBlockFile(root, layout, hash, loaded!.payload, 1234.5, parent)
  const encoded = encodeBlockFile(layout, hash, loaded!.payload, 1234.5, parent)
  expect(Buffer.from(encoded.bytes).equals(await readFile(blockPath(root, hash)))).toBe(true)
})

it('the store takes an encoded block only under the key it was encoded for', async () => {
  const keys = native.store.keysFor(tokens)
  const loaded = await native.store.load(keys[0])
  const store = await openStore(b, 'encoded')
  const wrong = encodeBlockFile(store.store.layout, keys[1], loaded!.payload, 0, null)
  await expect(store.store.putEncoded(keys[0], wrong)).rejects.toThrow(/not one this store serves/)
  expect(await store.store.has(keys[0])).toBe(false)
  const right = encodeBlockFile(store.store.layout, keys[0], loaded!.payload, 0, null)
  expect(await store.store.putEncoded(keys[0], right)).toMatchObject({ written: true })
  expect(await store.store.putEncoded(keys[0], right)).toMatchObject({ written: false })
  expect((await store.store.load(keys[0]))?.info.hash).toBe(keys[0])
})

it('refuses a bad number of threads', async () => {
  await expect(BlockWriter.open(captured.dir, { target: native, sidecar: b.sidecar, requestId, tokens, builders: -1 })).rejects.toThrow(/builders must be a non-negative integer/)
  await expect(BlockWriter.open(captured.dir, { target: native, sidecar: b.sidecar, requestId, tokens, builders: 1.5 })).rejects.toThrow(/builders must be a non-negative integer/)
})
