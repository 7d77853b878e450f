// The writer trusts nothing it has not checked: a capture for another prompt length or request, a
// sidecar of another geometry or block size, a capture still running or failed, a layer file that
// is not what the manifest lists, a capture without boundary snapshots; each is refused by name
// before any block is written. And finalize catches a block that changed after it was written.
import { existsSync, readFileSync, writeFileSync } from 'node:fs'
import { mkdir } from 'node:fs/promises'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { CaptureSession, exportWeights, type Sidecar } from '../../src/capture/index.ts'
import { blockPath } from '../../src/decode/store/index.ts'
import { BlockWriter, streamBlocks } from '../../src/decode/writer/index.ts'
import { blockStoreTarget, captureFromShare, openCaptureWriter } from '../../src/front/index.ts'
import { errorCode, PD_ERR, PdBridgeError } from '../../src/errors.ts'
import { CaptureFailedError, startShareServer } from '../../src/share/index.ts'
import { BS, bench, capture, openStore, prompt, type Bench } from './helpers.ts'

let b: Bench
let tokens: number[]
let good: Awaited<ReturnType<typeof capture>>
beforeAll(async () => {
  b = await bench('blocks-bridge-refusals')
  tokens = prompt(600, 41)
  good = await capture(b, tokens, { requestId: 'good' })
})
afterAll(async () => await b.cleanup())

async function refused (options: Partial<Parameters<typeof BlockWriter.open>[1]> & { dir?: string }, pattern: RegExp): Promise<void> {
  const target = await openStore(b, 'refused')
  const run = BlockWriter.open(options.dir ?? good.dir, { target, sidecar: b.sidecar, requestId: 'good', tokens, ...options })
  await expect(run).rejects.toThrow(pattern)
  await expect(run).rejects.toBeInstanceOf(PdBridgeError)
  expect(target.store.size).toBe(0)
}

describe('the writer refuses a capture that does not fit the request or the store', () => {
  it('another prompt length, another request id', async () => {
    await refused({ tokens: tokens.slice(0, 599) }, /tokenCount.*600.*599|599.*600/)
    await refused({ requestId: 'other' }, /requestId/)
  })

  it('bad token ids', async () => {
    await refused({ tokens: [...tokens.slice(0, 599), -1] }, /token 599 is -1/)
  })

  it('a sidecar of another profile (geometry) or another block size', async () => {
    const f32: Sidecar = await exportWeights({ model: b.modelDir, profile: 'f32', out: b.scratch('f32-sidecar'), blockSize: BS })
    await refused({ sidecar: f32 }, /profile f32\) gives geometry [0-9a-f]{64}, the store's is [0-9a-f]{64}/)
    const big: Sidecar = await exportWeights({ model: b.modelDir, profile: 'decoder', out: b.scratch('big-sidecar'), blockSize: 512 })
    await refused({ sidecar: big }, /block size 512, the decoder's store 256/)
  })

  it('a capture made without boundary snapshots at the store\'s block size', async () => {
    // A 2048-token block size records no snapshot in 600 tokens; the fingerprint does not cover the block size.
    const big = await exportWeights({ model: b.modelDir, profile: 'decoder', out: b.scratch('sidecar-2048'), blockSize: 2048 })
    const root = b.scratch('captures-2048')
    await mkdir(root)
    const session = await CaptureSession.start({ sidecar: big, captureRoot: root, requestId: 'good', tokenCount: 600 })
    b.engine('decoder').prefill(tokens, b.engine('decoder').newCache(), { logits: 'none', attnInputHook: session.onAttentionInput, maxChunk: 600 })
    await session.finish()
    await refused({ dir: session.dir }, /layer-000\.safetensors: holds no boundary snapshots, the store's blocks need them every 256/)
  })

  it('a capture still running, or failed', async () => {
    const root = b.scratch('captures-open')
    await mkdir(root)
    const session = await CaptureSession.start({ sidecar: b.sidecar, captureRoot: root, requestId: 'good', tokenCount: 600 })
    await refused({ dir: session.dir }, /state: is running/)
    await session.fail(new Error('device lost'))
    await refused({ dir: session.dir }, /state: is failed \(device lost\)/)
  })

  it('a failed capture on the share: refused by the stream, the spool directory removed', async () => {
    const root = b.scratch('captures-failed')
    await mkdir(root)
    const session = await CaptureSession.start({ sidecar: b.sidecar, captureRoot: root, requestId: 'good', tokenCount: 600 })
    await session.fail(new Error('out of device memory'))
    const server = await startShareServer({ root, log: () => {} })
    try {
      const target = await openStore(b, 'share-failed')
      const spoolRoot = b.scratch('spool-failed')
      const run = captureFromShare({ baseUrl: server.url, spoolRoot, pollMs: 20, requestId: 'good', tokenCount: tokens.length, sidecarFingerprint: b.sidecar.fingerprint })
        .then(async (at) => await openCaptureWriter(blockStoreTarget(target), at, { sidecar: b.sidecar, requestId: 'good', tokens }))
      await expect(run).rejects.toBeInstanceOf(CaptureFailedError)
      expect(existsSync(join(spoolRoot, 'good'))).toBe(false)
      expect(target.store.size).toBe(0)
    } finally {
      await server.close()
    }
  })

  it('a layer file that is not what the manifest lists', async () => {
    const c = await capture(b, tokens, { requestId: 'good', root: b.scratch('captures-bad') })
    const path = join(c.dir, 'layer-002.safetensors')
    const bytes = readFileSync(path)
    bytes[bytes.length - 5] ^= 0x01
    writeFileSync(path, bytes)
    await refused({ dir: c.dir }, /layer-002\.safetensors: SHA-256 [0-9a-f]{64} does not match the manifest's/)
    // The front door tells a checksum mismatch from other refusals by this code, not by the message.
    const target = await openStore(b, 'refused-code')
    const err = await BlockWriter.open(c.dir, { target, sidecar: b.sidecar, requestId: 'good', tokens }).catch((e: unknown) => e)
    expect(errorCode(err)).toBe(PD_ERR.CAPTURE_INTEGRITY)
  })

  it('a layer file of another length than the manifest lists: the same code', async () => {
    const c = await capture(b, tokens, { requestId: 'good', root: b.scratch('captures-short') })
    const path = join(c.dir, 'layer-001.safetensors')
    writeFileSync(path, readFileSync(path).subarray(0, 100))
    await refused({ dir: c.dir }, /layer-001\.safetensors: 100 bytes, the manifest lists \d+/)
    const target = await openStore(b, 'refused-code-short')
    const err = await BlockWriter.open(c.dir, { target, sidecar: b.sidecar, requestId: 'good', tokens }).catch((e: unknown) => e)
    expect(errorCode(err)).toBe(PD_ERR.CAPTURE_INTEGRITY)
  })
})

describe('finalize verifies what is on disk', () => {
  it('a block changed after it was written is named, and the report is refused', async () => {
    const target = await openStore(b, 'tampered')
    const writer = await BlockWriter.open(good.dir, { target, sidecar: b.sidecar, requestId: 'good', tokens })
    const [first] = await writer.writeAll()
    const path = blockPath(target.store.root, first.hash)
    const bytes = readFileSync(path)
    bytes[bytes.length - 7] ^= 0x10 // inside the last tensor's data: the header still parses
    writeFileSync(path, bytes)
    await expect(writer.finalize()).rejects.toThrow(new RegExp(`1 of 2 blocks failed verification: block 0 \\(${first.hash}\\): the stored tensors differ from what was built`))
    await expect(writer.writeNext()).rejects.toThrow(/already finalized/)
  })

  it('a compatible block already stored is kept, counted as reused, and verified like the others', async () => {
    const target = await openStore(b, 'twice')
    await streamBlocks({ dir: good.dir, target, sidecar: b.sidecar, requestId: 'good', tokens })
    const again = await streamBlocks({ dir: good.dir, target, sidecar: b.sidecar, requestId: 'good', tokens })
    expect(again).toMatchObject({ blocks: 2, written: 0, reused: 2, verified: 2 })
  })
})
