// A capture can only be filed under the prompt it was computed over: its manifest carries the
// digest of its token ids (tokensSha256), and the block writer compares it with the digest of the
// ids it is about to key the blocks under, before a single key is chained. Another prompt of the
// same length, or a capture that names no digest, is refused with nothing written; locally and from
// the share alike.
import { createHash } from 'node:crypto'
import { mkdir } from 'node:fs/promises'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { CaptureSession } from '../../src/capture/index.ts'
import { CaptureManifestError } from '../../src/wire/manifest.ts'
import { BlockWriter, streamBlocks } from '../../src/decode/writer/index.ts'
import { blockStoreTarget, captureFromShare, openCaptureWriter } from '../../src/front/index.ts'
import { startShareServer } from '../../src/share/index.ts'
import { BS, bench, capture, openStore, prompt, type Bench } from './helpers.ts'

let b: Bench
let tokens: number[]
let good: Awaited<ReturnType<typeof capture>>
beforeAll(async () => {
  b = await bench('blocks-bridge-tokens')
  tokens = prompt(600, 43)
  good = await capture(b, tokens, { requestId: 'good' })
})
afterAll(async () => await b.cleanup())

function digest (ids: number[]): string {
  const buf = Buffer.alloc(ids.length * 4)
  ids.forEach((t, i) => buf.writeUInt32LE(t, i * 4))
  return createHash('sha256').update(buf).digest('hex')
}

/** A target whose keysFor is counted: the writer must refuse before it chains any key. */
async function countingTarget (name: string): Promise<{ target: Awaited<ReturnType<typeof openStore>>, keyed: () => number }> {
  const target = await openStore(b, name)
  let calls = 0
  const keysFor = target.store.keysFor.bind(target.store)
  target.store.keysFor = (ids, extra) => {
    calls++
    return keysFor(ids, extra)
  }
  return { target, keyed: () => calls }
}

describe('the manifest carries the digest of the captured ids', () => {
  it('SHA-256 of the ids as little-endian uint32, and the matching prompt writes its blocks', async () => {
    expect(good.manifest.tokensSha256).toBe(digest(tokens))
    const target = await openStore(b, 'match')
    const report = await streamBlocks({ dir: good.dir, target, sidecar: b.sidecar, requestId: 'good', tokens })
    expect(report).toMatchObject({ blocks: 2, written: 2, verified: 2 })
  })
})

describe('the writer refuses before any block is keyed', () => {
  it('another prompt of the same length: a CaptureManifestError naming tokensSha256 and both digests', async () => {
    const other = [...tokens]
    other[450] = (other[450] + 1) % 512 // inside block 1: the store has nothing to confuse it with
    const { target, keyed } = await countingTarget('other-prompt')
    const run = BlockWriter.open(good.dir, { target, sidecar: b.sidecar, requestId: 'good', tokens: other })
    await expect(run).rejects.toBeInstanceOf(CaptureManifestError)
    await expect(run).rejects.toMatchObject({ field: 'tokensSha256' })
    await expect(run).rejects.toThrow(`manifest tokensSha256: is ${digest(tokens)}, but the 600 token ids the blocks would be keyed under hash to ${digest(other)}: the capture was computed over another prompt`)
    expect(keyed()).toBe(0)
    expect(target.store.size).toBe(0)
  })

  it('a capture that names no digest (made without its ids)', async () => {
    const root = b.scratch('captures-no-digest')
    await mkdir(root)
    const session = await CaptureSession.start({ sidecar: b.sidecar, captureRoot: root, requestId: 'bare', tokenCount: tokens.length })
    b.engine('decoder').prefill(tokens, b.engine('decoder').newCache(), { logits: 'none', attnInputHook: session.onAttentionInput, maxChunk: tokens.length })
    const m = await session.finish()
    expect(m.tokensSha256).toBeUndefined()
    const { target, keyed } = await countingTarget('no-digest')
    await expect(BlockWriter.open(session.dir, { target, sidecar: b.sidecar, requestId: 'bare', tokens })).rejects.toThrow(/manifest tokensSha256: is missing: the capture does not say which token ids it was computed over/)
    expect(keyed()).toBe(0)
    expect(target.store.size).toBe(0)
  })

  it('from the share too: the spooled manifest keeps the digest, and the writer refuses the other prompt', async () => {
    const server = await startShareServer({ root: good.root, log: () => {} })
    try {
      const other = [...tokens].reverse()
      const { target, keyed } = await countingTarget('share-other')
      const run = captureFromShare({ baseUrl: server.url, spoolRoot: b.scratch('spool'), pollMs: 20, requestId: 'good', tokenCount: other.length, sidecarFingerprint: b.sidecar.fingerprint })
        .then(async (at) => await openCaptureWriter(blockStoreTarget(target), at, { sidecar: b.sidecar, requestId: 'good', tokens: other }))
      await expect(run).rejects.toMatchObject({ field: 'tokensSha256' })
      expect(keyed()).toBe(0)
      expect(target.store.size).toBe(0)
    } finally {
      await server.close()
    }
  })

  it('CaptureSession.start refuses ids of another length than T', async () => {
    const root = b.scratch('captures-length')
    await mkdir(root)
    await expect(CaptureSession.start({ sidecar: b.sidecar, captureRoot: root, requestId: 'len', tokenCount: BS, tokens: tokens.slice(0, BS - 1) })).rejects.toThrow(/255 token ids given for a 256-token capture/)
  })
})
