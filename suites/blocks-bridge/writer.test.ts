// The bridge writes the decoder's blocks from a capture: for prompts of 300, 700 and 1100 tokens
// (not multiples of the 256-token block), the blocks the writer builds from a decoder-profile
// capture equal the blocks the decoder writes itself after its native prefill, tensor by tensor
// (verify-blocks: N/N identical; created_at is the one field it does not compare). Restoring from
// the bridge's blocks, prefilling the tail and decoding greedily gives the native tokens with
// bit-identical logits. The same holds through the share (HTTP, spooled). The writer's held bytes
// drop to zero after every block, and their peak does not grow with the prompt.
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { layerGeometries } from '../../src/capture/index.ts'
import { compareBlockDirs } from '../../src/decode/store/index.ts'
import { BlockWriter, streamBlocks } from '../../src/decode/writer/index.ts'
import { blockStoreTarget, captureFromShare, openCaptureWriter } from '../../src/front/index.ts'
import type { DecoderPrefixCache, PrefillAndStoreResult } from '../../src/decode/prefix-cache/index.ts'
import { startShareServer } from '../../src/share/index.ts'
import { BS, bench, capture, greedySteps, openStore, prompt, sameBits, type Bench } from './helpers.ts'

let b: Bench
beforeAll(async () => { b = await bench('blocks-bridge-writer') })
afterAll(async () => await b.cleanup())

const LENGTHS = [300, 700, 1100]
const peaks = new Map<number, number>()

describe.each(LENGTHS)('%i tokens: bridge-written blocks == the decoder\'s own blocks', (n) => {
  const tokens = prompt(n, n + 7)
  const blocks = Math.floor(n / BS)
  const requestId = `bridge-${n}`
  let native: DecoderPrefixCache
  let stored: PrefillAndStoreResult
  let captured: Awaited<ReturnType<typeof capture>>

  beforeAll(async () => {
    native = await openStore(b, `native-${n}`)
    stored = await native.prefillAndStore(b.engine('decoder'), tokens)
    captured = await capture(b, tokens, { requestId })
  })

  it('from the local capture: N/N identical, every block verified by finalize', async () => {
    const bridged = await openStore(b, `bridged-${n}`)
    const report = await streamBlocks({ dir: captured.dir, target: bridged, sidecar: b.sidecar, requestId, tokens })
    expect(report).toMatchObject({ state: 'done', tokenCount: n, sealedLength: n, blockSize: BS, blocks, written: blocks, reused: 0, verified: blocks })
    const verdict = await compareBlockDirs(native.store.root, bridged.store.root)
    expect(verdict.blocks.flatMap((x) => x.differences)).toEqual([])
    expect(`${verdict.identical}/${verdict.total} identical`).toBe(`${blocks}/${blocks} identical`)
  })

  it('restored from the bridge\'s blocks, then the tail and greedy 8: the native tokens, bit-identical logits', async () => {
    const bridged = await openStore(b, `restore-${n}`)
    await streamBlocks({ dir: captured.dir, target: bridged, sidecar: b.sidecar, requestId, tokens })
    const hit = await bridged.lookup(tokens)
    expect(hit.cachedTokens).toBe(blocks * BS)
    const engine = b.engine('decoder')
    const tail = engine.prefill(tokens.slice(blocks * BS), hit.cache!, { logits: 'last' })
    expect(sameBits(tail.logits, stored.logits)).toBe(true)
    const resumed = greedySteps(engine, hit.cache!, tail.logits, 8)
    const reference = greedySteps(engine, stored.cache.clone(), stored.logits, 8)
    expect(resumed.tokens).toEqual(reference.tokens)
    resumed.logits.forEach((l, i) => expect(sameBits(l, reference.logits[i]), `logits of step ${i}`).toBe(true))
  })

  it('through the share (HTTP, spooled, verified per layer): N/N identical', async () => {
    const server = await startShareServer({ root: captured.root, log: () => {} })
    try {
      const bridged = await openStore(b, `share-${n}`)
      // The front door's own path: the capture source stage spools it, then the writer opens the spool.
      const at = await captureFromShare({ baseUrl: server.url, spoolRoot: b.scratch('spool'), pollMs: 20, requestId, tokenCount: tokens.length, sidecarFingerprint: b.sidecar.fingerprint })
      const writer = await openCaptureWriter(blockStoreTarget(bridged), at, { sidecar: b.sidecar, requestId, tokens })
      const report = await writer.finalize()
      expect(report).toMatchObject({ blocks, written: blocks, verified: blocks })
      // Nothing could be written before the last layer landed: the first block comes after it.
      expect(report.timings.lastLayer).toBeLessThanOrEqual(report.timings.spool)
      expect(report.timings.firstBlockAfterLastLayer).toBeGreaterThanOrEqual(0)
      const verdict = await compareBlockDirs(native.store.root, bridged.store.root)
      expect(`${verdict.identical}/${verdict.total} identical`).toBe(`${blocks}/${blocks} identical`)
    } finally {
      await server.close()
    }
  })

  it('holds one block at a time: nothing between blocks, the same peak whatever the prompt length', async () => {
    const bridged = await openStore(b, `held-${n}`)
    const writer = await BlockWriter.open(captured.dir, { target: bridged, sidecar: b.sidecar, requestId, tokens })
    expect(writer.blockCount).toBe(blocks)
    const heldAfter: number[] = []
    for (let w = await writer.writeNext(); w !== null; w = await writer.writeNext()) heldAfter.push(writer.heldBytes)
    expect(heldAfter).toEqual(Array.from({ length: blocks }, () => 0))
    const report = await writer.finalize()
    expect(report.peakHeldBytes).toBe(writer.peakHeldBytes)
    peaks.set(n, report.peakHeldBytes)
  })
})

describe('the writer\'s peak held bytes', () => {
  it('are the same for 1, 2 and 4 blocks, and under two boundaries\' worth of float32 state', () => {
    expect([...peaks.keys()]).toEqual(LENGTHS)
    expect(new Set(peaks.values()).size).toBe(1)
    // One boundary's state at float32, counted from the geometry: every window (W-1 rows), and per
    // pool this block's bs/r rows, its buffers (allocated for r tokens) and its carries. The writer
    // holds that state and the payload built from it (never larger), plus one read in flight.
    const oneBoundary = layerGeometries(b.sidecar.json).reduce((a, g) => a + g.windowRows * g.headDim +
      g.pools.reduce((c, p) => c + (BS / p.ratio) * p.dim + 2 * p.ratio * (p.overlap ? 2 * p.dim : p.dim) + (p.overlap ? 2 * p.ratio * p.dim : 0), 0), 0) * 4
    const peak = peaks.get(LENGTHS[0])!
    expect(peak).toBeGreaterThan(oneBoundary)
    expect(peak).toBeLessThanOrEqual(2 * oneBoundary)
    console.log(`writer peak held: ${peak} B for 1, 2 and 4 blocks; one boundary at float32: ${oneBoundary} B`)
  })
})
