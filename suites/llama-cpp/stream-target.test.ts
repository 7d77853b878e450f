// llama.cpp's writer while the engine runs (src/engines/llama-cpp/target/segment-writer.ts): a
// capture with block segments, fed chunk by chunk with our f32 engine's own attention inputs (the
// hook's order; flush after every chunk, as the prefill engine's runner does), is staged by the
// segment writer between chunks and becomes the state at S at the seal. The state file must be
// byte-identical to the one the write-after writer (LlamaCppStateWriter on the same sealed capture)
// writes, for several chunk sizes and two block sizes, and for a partial seal; blocks are staged
// before the seal and nothing reaches the decoder's store before it; an engine that fails mid-stream
// leaves the store untouched and a writer that refuses to finish; the staging directory is removed
// on every path (finish, failure, close).
import { existsSync, mkdirSync, readdirSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { CaptureSession, exportWeights, type Sidecar } from '../../src/capture/index.ts'
import { errorCode, PD_ERR } from '../../src/errors.ts'
import { stateGeometry, type LlamaCppStateGeometry } from '../../src/engines/llama-cpp/state/index.ts'
import { LlamaCppStateStore } from '../../src/engines/llama-cpp/store/index.ts'
import { LlamaCppSegmentWriter, LlamaCppStateWriter, type LlamaCppWriterReport } from '../../src/engines/llama-cpp/target/index.ts'
import { loadCheckpoint, type LoadedCheckpoint } from '../../src/model/checkpoint/index.ts'
import { DeepseekV4Engine } from '../../src/model/engine/index.ts'
import { fixtureTokens, nativeRun } from '../capture/helpers.ts'
import { Checkpoints } from './helpers.ts'

const S = 512
/** Seals a 512-token capture fed in chunks of 128 short of S (the budget target.test.ts calibrated). */
const PARTIAL_BUDGET = 1_200_000

const checkpoints = new Checkpoints()
let ckpt: LoadedCheckpoint
let g: LlamaCppStateGeometry
let captured: number[]
let inputs: Float32Array[]
const sidecars = new Map<number, Sidecar>()
let n = 0
const fresh = (name: string): string => join(checkpoints.dir, `${name}-${n++}`)

beforeAll(async () => {
  const made = await checkpoints.get('tiny-mirror')
  ckpt = await loadCheckpoint(made.model)
  for (const bs of [128, 256]) sidecars.set(bs, await exportWeights({ model: made.model, profile: 'f32', out: fresh(`sidecar-${bs}`), blockSize: bs }))
  g = stateGeometry(ckpt.config, { kvCacheType: 'F32', flashAttention: false })
  captured = fixtureTokens(S)
  inputs = nativeRun(DeepseekV4Engine.fromCheckpoint(ckpt, 'f32'), captured).inputs
})

afterAll(() => checkpoints.dispose())

function openStore (bs: number): LlamaCppStateStore {
  return LlamaCppStateStore.open({ dir: fresh('states'), modelName: 'tiny-mirror', blockSize: bs, geometry: g })
}

interface StreamedRun {
  dir: string
  store: LlamaCppStateStore
  /** Blocks staged after each chunk, before the seal. */
  afterChunk: number[]
  /** States in the decoder's store after each chunk (none before the seal). */
  storedAfterChunk: number[]
  stagingPath: string
  report: (LlamaCppWriterReport & { sealedLength: number }) | null
  error?: unknown
}

/** Feed the capture in chunks of `chunk`, the segment writer staging between chunks; `dieAfter`: the engine fails after that many chunks. */
async function streamed (requestId: string, o: { bs: number, chunk: number, memoryBudgetBytes?: number, dieAfter?: number }): Promise<StreamedRun> {
  const sidecar = sidecars.get(o.bs) as Sidecar
  const root = fresh('captures')
  mkdirSync(root, { recursive: true })
  const session = await CaptureSession.start({ sidecar, captureRoot: root, requestId, tokenCount: S, tokens: captured, segments: true, memoryBudgetBytes: o.memoryBudgetBytes })
  const store = openStore(o.bs)
  const writer = await LlamaCppSegmentWriter.open(session.dir, { store, cfg: ckpt.config, sidecar, requestId, tokens: captured })
  const hidden = ckpt.config.hiddenSize
  const run: StreamedRun = { dir: session.dir, store, afterChunk: [], storedAfterChunk: [], stagingPath: writer.stagingPath, report: null }
  let chunks = 0
  for (let c0 = 0; c0 < S; c0 += o.chunk) {
    const c1 = Math.min(S, c0 + o.chunk)
    inputs.forEach((x, layer) => session.onAttentionInput(layer, c0, x.subarray(c0 * hidden, c1 * hidden), c1 - c0))
    await session.flush()
    await writer.writeReady()
    run.afterChunk.push(writer.blocksWritten)
    run.storedAfterChunk.push(store.size)
    chunks++
    if (chunks === o.dieAfter) {
      await session.fail(new Error(`engine died after chunk ${chunks}`))
      try {
        await writer.finish()
      } catch (error) {
        return { ...run, error }
      }
      throw new Error('finish accepted a failed capture')
    }
    if (session.sealedLength <= c1) break
  }
  await session.finish()
  return { ...run, report: await writer.finish() }
}

/** The write-after path on the same sealed capture: its layer files through LlamaCppStateWriter. */
async function writtenAfter (run: StreamedRun, requestId: string, bs: number): Promise<LlamaCppWriterReport & { store: LlamaCppStateStore }> {
  const store = openStore(bs)
  const w = await LlamaCppStateWriter.open(run.dir, { store, cfg: ckpt.config, sidecar: sidecars.get(bs) as Sidecar, requestId, tokens: captured })
  return { ...await w.finalize(), store }
}

/** Each state of `a` against the state at the same boundary of `b`: 'identical' or what differs. */
function compareStates (a: LlamaCppWriterReport, b: LlamaCppWriterReport): string[] {
  return a.states.map((s, i) => {
    const other = b.states[i]
    if (other === undefined || other.boundary !== s.boundary) return `state at ${s.boundary}: the other writer has ${other?.boundary ?? 'none'}`
    const x = readFileSync(s.path)
    const y = readFileSync(other.path)
    return x.equals(y) ? 'identical' : `state at ${s.boundary}: ${x.length} vs ${y.length} bytes, contents differ`
  })
}

const CASES = [
  { bs: 128, chunk: 100 },
  { bs: 128, chunk: 256 },
  { bs: 256, chunk: 200 },
  { bs: 256, chunk: 300 },
]

describe.each(CASES)('block size $bs, chunks of $chunk', ({ bs, chunk }) => {
  it('the state at S streamed is byte-identical to the write-after one; blocks staged before the seal, none stored before it; staging removed', async () => {
    const requestId = `ll-seg-${bs}-${chunk}`
    const run = await streamed(requestId, { bs, chunk })
    const blocks = S / bs
    expect(run.report).toMatchObject({ state: 'done', sealedLength: S, blocks, written: 1, verified: 1 })
    expect(run.report?.states.map((s) => s.boundary)).toEqual([S])
    // After chunk i, every block whose boundary the chunk passed was staged; the decoder's store got nothing before the seal.
    expect(run.afterChunk).toEqual(run.afterChunk.map((_, i) => Math.floor(Math.min(S, (i + 1) * chunk) / bs)))
    expect(run.storedAfterChunk.every((x) => x === 0)).toBe(true)
    expect(run.store.size).toBe(1)
    expect(existsSync(run.stagingPath)).toBe(false)
    const after = await writtenAfter(run, requestId, bs)
    expect(compareStates(run.report as LlamaCppWriterReport, after)).toEqual(['identical'])
  })
})

describe('a partial seal, a failure mid-stream, a writer closed early', () => {
  it('a capture the memory budget seals short of S: the state at its own last boundary, byte-identical to the write-after one', async () => {
    const run = await streamed('ll-seg-partial', { bs: 128, chunk: 128, memoryBudgetBytes: PARTIAL_BUDGET })
    const sealed = run.report?.sealedLength ?? 0
    expect(run.report?.state).toBe('partial')
    expect(sealed).toBeLessThan(S)
    const blocks = Math.floor(sealed / 128)
    expect(blocks).toBeGreaterThan(0)
    expect(run.report).toMatchObject({ blocks, written: 1, verified: 1 })
    expect(run.report?.states.map((s) => s.boundary)).toEqual([blocks * 128])
    expect(existsSync(run.stagingPath)).toBe(false)
    const after = await writtenAfter(run, 'll-seg-partial', 128)
    expect(after.state).toBe('partial')
    expect(compareStates(run.report as LlamaCppWriterReport, after)).toEqual(['identical'])
  })

  it('an engine that dies after chunk 2: the writer refuses to finish (capture failed), the decoder\'s store is untouched, staging removed', async () => {
    const run = await streamed('ll-seg-dies', { bs: 128, chunk: 150, dieAfter: 2 })
    expect(errorCode(run.error)).toBe(PD_ERR.CAPTURE_FAILED)
    expect(String(run.error)).toMatch(/engine died after chunk 2/)
    // 300 tokens passed: blocks 0 and 1 were staged, and stay private.
    expect(run.afterChunk).toEqual([1, 2])
    expect(run.store.size).toBe(0)
    expect(existsSync(run.stagingPath)).toBe(false)
  })

  it('a writer closed before the seal removes its staging store and stores nothing', async () => {
    const sidecar = sidecars.get(128) as Sidecar
    const root = fresh('captures')
    mkdirSync(root, { recursive: true })
    const session = await CaptureSession.start({ sidecar, captureRoot: root, requestId: 'll-seg-close', tokenCount: S, tokens: captured, segments: true })
    const store = openStore(128)
    const writer = await LlamaCppSegmentWriter.open(session.dir, { store, cfg: ckpt.config, sidecar, requestId: 'll-seg-close', tokens: captured })
    expect(existsSync(writer.stagingPath)).toBe(true)
    await writer.close()
    expect(existsSync(writer.stagingPath)).toBe(false)
    expect(writer.blocksKept).toBe(0)
    expect(store.size).toBe(0)
    await session.fail(new Error('test over'))
  })

  it('segments of another prompt are refused at the open, and the staging store is removed', async () => {
    const sidecar = sidecars.get(128) as Sidecar
    const root = fresh('captures')
    mkdirSync(root, { recursive: true })
    const stagingRoot = fresh('staging-root')
    mkdirSync(stagingRoot, { recursive: true })
    const session = await CaptureSession.start({ sidecar, captureRoot: root, requestId: 'll-seg-other', tokenCount: S, tokens: captured, segments: true })
    const other = captured.slice()
    other[300] = (other[300] + 1) % ckpt.config.vocabSize
    const store = openStore(128)
    await expect(LlamaCppSegmentWriter.open(session.dir, { store, cfg: ckpt.config, sidecar, requestId: 'll-seg-other', tokens: other, stagingRoot })).rejects.toThrow(/tokensSha256/)
    expect(readdirSync(stagingRoot)).toEqual([])
    expect(store.size).toBe(0)
    await session.fail(new Error('test over'))
  })
})
