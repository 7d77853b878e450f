// Blocks written while the engine runs: a capture with block segments, prefilled chunk by chunk as
// the prefill engine's runner does (flush after every chunk), is written by the segment writer
// between chunks. Every block must be the block the write-after path (the sealed capture's layer
// files through BlockWriter) writes, for several chunk sizes and two block sizes, with and without
// a streaming (spilled) session; blocks must land before the capture is sealed; a partial seal
// writes exactly the prefix's blocks; an engine that dies after chunk k leaves complete, correct
// blocks of a prefix and a writer that refuses to finish, naming the failure.
import { mkdir } from 'node:fs/promises'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { CaptureSession } from '../../src/capture/index.ts'
import { compareBlockDirs } from '../../src/decode/store/index.ts'
import { SegmentBlockWriter, streamBlocks } from '../../src/decode/writer/index.ts'
import { errorCode, PD_ERR } from '../../src/errors.ts'
import { BS, bench, openStore, prompt, type Bench } from './helpers.ts'

let b256: Bench
let b128: Bench
beforeAll(async () => {
  b256 = await bench('blocks-bridge-segments')
  b128 = await bench('blocks-bridge-segments-128', { blockSize: 128 })
})
afterAll(async () => {
  await b256?.cleanup()
  await b128?.cleanup()
})

interface StreamedRun {
  dir: string
  /** Blocks the segment writer had put after each chunk, before the capture was sealed. */
  afterChunk: number[]
  report: Awaited<ReturnType<SegmentBlockWriter['finish']>> | null
  storeRoot: string
  error?: unknown
}

/**
 * Prefill `tokens` in chunks of `chunk` into a segment-publishing session, the segment writer
 * writing between chunks; with `dieAfter`, the session fails after that many chunks.
 */
async function streamed (b: Bench, tokens: number[], o: { requestId: string, chunk: number, bs: number, spill?: boolean, memoryBudgetBytes?: number, dieAfter?: number }): Promise<StreamedRun> {
  const root = b.scratch('captures')
  await mkdir(root, { recursive: true })
  const session = await CaptureSession.start({
    sidecar: b.sidecar, captureRoot: root, requestId: o.requestId, tokenCount: tokens.length, tokens, segments: true, spill: o.spill, memoryBudgetBytes: o.memoryBudgetBytes,
  })
  const target = await openStore(b, `streamed-${o.requestId}`, o.bs)
  const writer = await SegmentBlockWriter.open(session.dir, { target, sidecar: b.sidecar, requestId: o.requestId, tokens })
  const engine = b.engine('decoder')
  const cache = engine.newCache()
  const afterChunk: number[] = []
  let chunks = 0
  for (let c0 = 0; c0 < tokens.length; c0 += o.chunk) {
    const c1 = Math.min(tokens.length, c0 + o.chunk)
    engine.prefill(tokens.slice(c0, c1), cache, { logits: 'none', attnInputHook: session.onAttentionInput, maxChunk: o.chunk })
    await session.flush()
    await writer.writeReady()
    afterChunk.push(writer.blocksWritten)
    chunks++
    if (chunks === o.dieAfter) {
      await session.fail(new Error(`engine died after chunk ${chunks}`))
      try {
        await writer.finish()
      } catch (error) {
        return { dir: session.dir, afterChunk, report: null, storeRoot: target.store.root, error }
      }
      throw new Error('finish accepted a failed capture')
    }
    if (session.sealedLength <= c1) break
  }
  await session.finish()
  return { dir: session.dir, afterChunk, report: await writer.finish(), storeRoot: target.store.root }
}

/** The write-after path on the same sealed capture: its layer files through BlockWriter. */
async function writtenAfter (b: Bench, dir: string, tokens: number[], requestId: string, bs: number): Promise<string> {
  const target = await openStore(b, `after-${requestId}`, bs)
  await streamBlocks({ dir, target, sidecar: b.sidecar, requestId, tokens })
  return target.store.root
}

const CASES = [
  { bs: 256, chunk: 100, spill: false },
  { bs: 256, chunk: 256, spill: true },
  { bs: 128, chunk: 300, spill: false },
]

describe.each(CASES)('block size $bs, chunks of $chunk, spill $spill', ({ bs, chunk, spill }) => {
  it('every block streamed equals the write-after block; blocks land before the seal', async () => {
    const b = bs === BS ? b256 : b128
    const T = 700
    const tokens = prompt(T, bs + chunk)
    const requestId = `seg-${bs}-${chunk}-${String(spill)}`
    const run = await streamed(b, tokens, { requestId, chunk, bs, spill })
    const blocks = Math.floor(T / bs)
    expect(run.report).toMatchObject({ state: 'done', sealedLength: T, blocks, written: blocks, verified: blocks })
    // After chunk i, every block whose boundary the chunk passed was already written.
    expect(run.afterChunk).toEqual(run.afterChunk.map((_, i) => Math.floor(Math.min(T, (i + 1) * chunk) / bs)))
    const after = await writtenAfter(b, run.dir, tokens, requestId, bs)
    const verdict = await compareBlockDirs(after, run.storeRoot)
    expect(verdict.blocks.flatMap((x) => x.differences)).toEqual([])
    expect(`${verdict.identical}/${verdict.total} identical`).toBe(`${blocks}/${blocks} identical`)
  })
})

describe('a partial seal and a failure mid-stream', () => {
  it('a capture the memory budget seals at T\' writes exactly the prefix\'s blocks, equal to the write-after ones', async () => {
    const tokens = prompt(1100, 21)
    const run = await streamed(b256, tokens, { requestId: 'seg-partial', chunk: 128, bs: BS, memoryBudgetBytes: 1160000 })
    const sealed = run.report?.sealedLength ?? 0
    expect(run.report?.state).toBe('partial')
    expect(sealed).toBeLessThan(1100)
    const blocks = Math.floor(sealed / BS)
    expect(blocks).toBeGreaterThan(0)
    expect(run.report).toMatchObject({ blocks, written: blocks, verified: blocks })
    const after = await writtenAfter(b256, run.dir, tokens, 'seg-partial', BS)
    const verdict = await compareBlockDirs(after, run.storeRoot)
    expect(`${verdict.identical}/${verdict.total} identical`).toBe(`${blocks}/${blocks} identical`)
  })

  it('an engine that dies after chunk 3: the writer refuses to finish (capture failed), and what it wrote is a prefix of correct blocks', async () => {
    const tokens = prompt(700, 33)
    const run = await streamed(b256, tokens, { requestId: 'seg-dies', chunk: 200, bs: BS, dieAfter: 3 })
    expect(errorCode(run.error)).toBe(PD_ERR.CAPTURE_FAILED)
    expect(String(run.error)).toMatch(/engine died after chunk 3/)
    // 600 tokens passed: blocks 0 and 1 were written, each complete.
    expect(run.afterChunk).toEqual([0, 1, 2])
    // The same prompt captured in full and written after: the streamed blocks are its first two, bit for bit.
    const whole = await streamed(b256, tokens, { requestId: 'seg-whole', chunk: 700, bs: BS })
    const after = await writtenAfter(b256, whole.dir, tokens, 'seg-whole', BS)
    const verdict = await compareBlockDirs(after, run.storeRoot)
    expect(verdict.blocks.filter((x) => x.status === 'identical').length).toBe(2)
    expect(verdict.blocks.filter((x) => x.status === 'different' || x.status === 'only-b')).toEqual([])
  })

  it('segments of another prompt are never keyed: the writer refuses before writing', async () => {
    const tokens = prompt(600, 41)
    const root = b256.scratch('captures')
    await mkdir(root, { recursive: true })
    const session = await CaptureSession.start({ sidecar: b256.sidecar, captureRoot: root, requestId: 'seg-other', tokenCount: tokens.length, tokens, segments: true })
    const target = await openStore(b256, 'other')
    const other = tokens.slice()
    other[300] = (other[300] + 1) % 512
    await expect(SegmentBlockWriter.open(session.dir, { target, sidecar: b256.sidecar, requestId: 'seg-other', tokens: other })).rejects.toThrow(/tokensSha256/)
    await session.fail(new Error('test over'))
    expect(target.store.size).toBe(0)
  })
})
