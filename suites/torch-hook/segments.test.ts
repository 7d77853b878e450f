// Blocks written while the torch engine runs: the torch capture hook (pool_capture.py --segments
// --step, Debian's CPU torch as a child process) is fed recorded attention inputs chunk by chunk and
// publishes each block segment from inside the hook as the last layer passes its boundary (before
// the chunk's flush), as serve_prefill.py does with `stream_blocks`; between
// chunks the TypeScript SegmentBlockWriter writes what is listed. Every block must be the block the
// write-after path (the same capture's layer files through BlockWriter) writes, byte for byte, for
// chunk sizes 100/256/300 and block sizes 128/256, and each segment file must be byte-identical to
// the TypeScript publisher's on the same inputs (one format, two writers). Then a partial seal, an
// engine that dies after chunk 3, and one flipped bit in one segment value, which must show.
import { spawn } from 'node:child_process'
import { once } from 'node:events'
import { cp, mkdir, readdir, readFile, writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import { createInterface } from 'node:readline'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { CaptureSession } from '../../src/capture/index.ts'
import { compareBlockDirs } from '../../src/decode/store/index.ts'
import { SegmentBlockWriter, streamBlocks } from '../../src/decode/writer/index.ts'
import { errorCode, PD_ERR } from '../../src/errors.ts'
import { serializeSafetensors, tensorFrom, type Tensor } from '../../src/formats/safetensors/index.ts'
import { sha256Hex } from '../../src/wire/manifest.ts'
import { parseSegmentIndex, SEGMENT_INDEX_FILE } from '../../src/wire/segment-file.ts'
import { bench, openStore, prompt, type Bench } from '../blocks-bridge/helpers.ts'
import { nativeRun, replay } from '../capture/helpers.ts'
import { POOL_CAPTURE, torchAvailability, TORCH_PYTHON } from './python.ts'

const torch = torchAvailability()

/** A prompt's recorded attention inputs, as files pool_capture.py reads. */
interface Recorded {
  tokens: number[]
  inputs: Float32Array[]
  hidden: number
  inputsFile: string
  tokensFile: string
}

async function record (b: Bench, tokens: number[], name: string): Promise<Recorded> {
  const engine = b.engine('decoder')
  const hidden = engine.config.hiddenSize
  const { inputs } = nativeRun(engine, tokens)
  const tensors = new Map<string, Tensor>(inputs.map((x, i) => [`oneshot.layers.${i}.attn_input`, tensorFrom('F32', [tokens.length, hidden], x)]))
  const dir = b.scratch(name)
  await mkdir(dir, { recursive: true })
  const inputsFile = join(dir, 'attn-inputs.safetensors')
  const tokensFile = join(dir, 'tokens.json')
  await writeFile(inputsFile, serializeSafetensors(tensors))
  await writeFile(tokensFile, JSON.stringify(tokens))
  return { tokens, inputs, hidden, inputsFile, tokensFile }
}

interface StreamedRun {
  dir: string
  /** Blocks the segment writer had put after each chunk, before the capture was sealed. */
  afterChunk: number[]
  /** Segments the hook itself had published after each chunk, before the chunk's flush. */
  fromHook: number[]
  report: Awaited<ReturnType<SegmentBlockWriter['finish']>> | null
  storeRoot: string
  error?: unknown
}

/**
 * The torch hook prefills `r` in chunks of `chunk`, publishing segments; after each chunk it waits
 * while the segment writer writes what is listed. With `failAfter` it seals failed after that chunk.
 */
async function torchStreamed (b: Bench, r: Recorded, o: { requestId: string, chunk: number, bs: number, budget?: number, failAfter?: number }): Promise<StreamedRun> {
  const root = b.scratch('torch-captures')
  await mkdir(root, { recursive: true })
  const dir = join(root, o.requestId)
  const args = [POOL_CAPTURE, '--sidecar', b.sidecar.dir, '--attn-inputs', r.inputsFile, '--capture-root', root, '--request-id', o.requestId,
    '--tokens', r.tokensFile, '--chunks', String(o.chunk), '--segments', '--step']
  if (o.budget !== undefined) args.push('--budget', String(o.budget))
  if (o.failAfter !== undefined) args.push('--fail-after', String(o.failAfter))
  const child = spawn(TORCH_PYTHON, args, { stdio: ['pipe', 'pipe', 'pipe'] })
  let stderr = ''
  child.stderr.on('data', (d: Buffer) => { stderr += d.toString() })
  const closed = once(child, 'close')
  const target = await openStore(b, `torch-streamed-${o.requestId}`, o.bs)
  let writer: SegmentBlockWriter | undefined
  const afterChunk: number[] = []
  const fromHook: number[] = []
  try {
    for await (const line of createInterface({ input: child.stdout })) {
      const msg = JSON.parse(line) as { chunk?: number, fromHook?: number }
      if (msg.chunk === undefined) continue
      fromHook.push(msg.fromHook ?? -1)
      writer ??= await SegmentBlockWriter.open(dir, { target, sidecar: b.sidecar, requestId: o.requestId, tokens: r.tokens })
      await writer.writeReady()
      afterChunk.push(writer.blocksWritten)
      child.stdin.write('\n')
    }
    const [code] = await closed as [number | null]
    expect(code, stderr).toBe(o.failAfter === undefined ? 0 : 1)
  } finally {
    if (child.exitCode === null) child.kill()
  }
  const w = writer ?? await SegmentBlockWriter.open(dir, { target, sidecar: b.sidecar, requestId: o.requestId, tokens: r.tokens })
  if (o.failAfter !== undefined) {
    try {
      await w.finish()
    } catch (error) {
      return { dir, afterChunk, fromHook, report: null, storeRoot: target.store.root, error }
    }
    throw new Error('finish accepted a failed capture')
  }
  return { dir, afterChunk, fromHook, report: await w.finish(), storeRoot: target.store.root }
}

/** The write-after path on a sealed capture: its layer files through BlockWriter. */
async function writtenAfter (b: Bench, dir: string, tokens: number[], requestId: string, bs: number): Promise<string> {
  const target = await openStore(b, `after-${requestId}`, bs)
  await streamBlocks({ dir, target, sidecar: b.sidecar, requestId, tokens })
  return target.store.root
}

/** The TypeScript hook's segments on the same inputs (published at the seal: the bytes do not depend on when). */
async function tsSegmentsDir (b: Bench, r: Recorded, requestId: string, chunk: number): Promise<string> {
  const root = b.scratch('ts-captures')
  await mkdir(root, { recursive: true })
  const session = await CaptureSession.start({ sidecar: b.sidecar, captureRoot: root, requestId, tokenCount: r.tokens.length, tokens: r.tokens, segments: true })
  replay(r.inputs, r.hidden, chunk, session.onAttentionInput)
  await session.finish()
  return session.dir
}

async function segmentFiles (dir: string): Promise<string[]> {
  return (await readdir(dir)).filter((f) => /^segment-\d{6}\.safetensors$/.test(f)).sort()
}

/** Flip the lowest bit of the first value of tensor `name` in a segment, and re-list its digest (a writer that got one value wrong). */
async function flipOneBit (dir: string, file: string, name: string): Promise<void> {
  const bytes = new Uint8Array(await readFile(join(dir, file)))
  const n = Number(new DataView(bytes.buffer).getBigUint64(0, true))
  const header = JSON.parse(new TextDecoder().decode(bytes.subarray(8, 8 + n))) as Record<string, { data_offsets: [number, number] }>
  const at = header[name]
  if (at === undefined) throw new Error(`${file} holds no tensor ${name}`)
  bytes[8 + n + at.data_offsets[0]] ^= 1
  await writeFile(join(dir, file), bytes)
  const index = parseSegmentIndex(await readFile(join(dir, SEGMENT_INDEX_FILE), 'utf8'), SEGMENT_INDEX_FILE)
  const entry = index.segments.find((e) => e.file === file)
  if (entry === undefined) throw new Error(`${file} is not listed`)
  entry.sha256 = sha256Hex(bytes)
  await writeFile(join(dir, SEGMENT_INDEX_FILE), JSON.stringify(index, null, 2) + '\n')
}

if (!torch.ok) console.warn(`\n*** suites/torch-hook/segments SKIPPED: ${torch.why} (see parity.test.ts).\n`)

describe.skipIf(!torch.ok)('the torch hook publishes block segments chunk by chunk', () => {
  const T = 700
  let b256: Bench
  let b128: Bench
  const recorded = new Map<Bench, Recorded>()
  beforeAll(async () => {
    b256 = await bench('torch-segments')
    b128 = await bench('torch-segments-128', { blockSize: 128 })
    for (const b of [b256, b128]) recorded.set(b, await record(b, prompt(T, 707), 'inputs'))
  })
  afterAll(async () => {
    await b256?.cleanup()
    await b128?.cleanup()
  })

  // Each child process costs seconds: a case's streamed run and its write-after store are made once
  // and reused by the later tests (made on demand when a test runs alone).
  const cases = new Map<string, Promise<{ run: StreamedRun, after: string, requestId: string }>>()
  function streamedCase (bs: number, chunk: number): Promise<{ run: StreamedRun, after: string, requestId: string }> {
    const key = `${bs}-${chunk}`
    let c = cases.get(key)
    if (c === undefined) {
      const b = bs === 256 ? b256 : b128
      const r = recorded.get(b) as Recorded
      const requestId = `torch-seg-${key}`
      c = torchStreamed(b, r, { requestId, chunk, bs }).then(async (run) => ({ run, requestId, after: await writtenAfter(b, run.dir, r.tokens, requestId, bs) }))
      cases.set(key, c)
    }
    return c
  }

  const CASES = [
    { bs: 256, chunk: 100 },
    { bs: 256, chunk: 300 },
    { bs: 128, chunk: 256 },
  ]

  it.each(CASES)('block size $bs, chunks of $chunk: every block equals the write-after block, written before the seal; segments equal the TypeScript hook\'s', async ({ bs, chunk }) => {
    const b = bs === 256 ? b256 : b128
    const r = recorded.get(b) as Recorded
    const { run, after, requestId } = await streamedCase(bs, chunk)
    const blocks = Math.floor(T / bs)
    expect(run.report).toMatchObject({ state: 'done', sealedLength: T, blocks, written: blocks, verified: blocks })
    // After chunk i, every block whose boundary the chunk passed was already written.
    expect(run.afterChunk).toEqual(run.afterChunk.map((_, i) => Math.floor(Math.min(T, (i + 1) * chunk) / bs)))
    // The hook published them itself as the last layer passed each boundary, not the chunk's flush after it.
    expect(run.fromHook).toEqual(run.afterChunk)
    const verdict = await compareBlockDirs(after, run.storeRoot)
    expect(verdict.blocks.flatMap((x) => x.differences)).toEqual([])
    expect(`${verdict.identical}/${verdict.total} identical`).toBe(`${blocks}/${blocks} identical`)
    // One format, two writers: the TypeScript hook's segments on the same inputs, byte for byte.
    const ts = await tsSegmentsDir(b, r, requestId, chunk)
    const files = await segmentFiles(run.dir)
    expect(files).toEqual(await segmentFiles(ts))
    expect(files.length).toBe(blocks)
    for (const f of [...files, SEGMENT_INDEX_FILE]) {
      expect(Buffer.compare(await readFile(join(run.dir, f)), await readFile(join(ts, f))), f).toBe(0)
    }
  })

  it('one flipped bit in one segment value makes exactly that block differ from the write-after block', async () => {
    const r = recorded.get(b256) as Recorded
    const { run, after, requestId } = await streamedCase(256, 300)
    const flipped = `${run.dir}-flipped`
    await cp(run.dir, flipped, { recursive: true })
    await flipOneBit(flipped, 'segment-000001.safetensors', 'layers.0.boundary.512.window')
    const target = await openStore(b256, 'flipped', 256)
    const writer = await SegmentBlockWriter.open(flipped, { target, sidecar: b256.sidecar, requestId, tokens: r.tokens })
    await writer.finish()
    const verdict = await compareBlockDirs(after, target.store.root)
    expect(verdict.blocks.map((x) => x.status).sort()).toEqual(['different', 'identical'])
  })

  it('a capture the memory budget seals at T\' writes exactly the prefix\'s blocks, equal to the write-after ones', async () => {
    const b = b256
    const r = await record(b, prompt(1100, 21), 'inputs-1100')
    const run = await torchStreamed(b, r, { requestId: 'torch-seg-partial', chunk: 128, bs: 256, budget: 1160000 })
    const sealed = run.report?.sealedLength ?? 0
    expect(run.report?.state).toBe('partial')
    expect(sealed).toBeLessThan(1100)
    const blocks = Math.floor(sealed / 256)
    expect(blocks).toBeGreaterThan(0)
    expect(run.report).toMatchObject({ blocks, written: blocks, verified: blocks })
    expect(await segmentFiles(run.dir)).toHaveLength(blocks)
    const after = await writtenAfter(b, run.dir, r.tokens, 'torch-seg-partial', 256)
    const verdict = await compareBlockDirs(after, run.storeRoot)
    expect(`${verdict.identical}/${verdict.total} identical`).toBe(`${blocks}/${blocks} identical`)
  })

  it('an engine that dies after chunk 3: the writer refuses to finish (capture failed), and what it wrote is a prefix of correct blocks', async () => {
    const r = recorded.get(b256) as Recorded
    const run = await torchStreamed(b256, r, { requestId: 'torch-seg-dies', chunk: 200, bs: 256, failAfter: 3 })
    expect(errorCode(run.error)).toBe(PD_ERR.CAPTURE_FAILED)
    expect(String(run.error)).toMatch(/engine died after chunk 3/)
    // 600 tokens passed: blocks 0 and 1 were written, each complete.
    expect(run.afterChunk).toEqual([0, 1, 2])
    // The same prompt captured in full by the torch hook and written after: the streamed blocks are its first two, bit for bit.
    const { after } = await streamedCase(256, 100)
    const verdict = await compareBlockDirs(after, run.storeRoot)
    expect(verdict.blocks.filter((x) => x.status === 'identical').length).toBe(2)
    expect(verdict.blocks.filter((x) => x.status === 'different' || x.status === 'only-b')).toEqual([])
  })
})
