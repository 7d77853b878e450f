// The streaming capture (issue #20): a session with `spill` moves boundary snapshots and pooled rows
// to disk as they are computed and streams each layer file from there. Its files must be the staged
// session's, byte for byte, for any chunking and under a budget; what it holds in memory must not
// grow with the prompt; a failed one leaves no spill behind. The reference is the staged session
// (encodeLayerFile from memory), which the other capture suites check against the native cache.
import { existsSync, readFileSync, readdirSync } from 'node:fs'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { CaptureSession, readCapture, type Sidecar } from '../../src/capture/index.ts'
import { SPILL_DIR } from '../../src/capture/spill.ts'
import { RowStore } from '../../src/model/engine/cache.ts'
import { DeepseekV4Engine } from '../../src/model/engine/index.ts'
import { fixtureTokens, nativeRun, seeded, tinySetup, type TinySetup } from './helpers.ts'
import { providedSidecar } from '../support/checkpoints.ts'

const T = 1100
let setup: TinySetup
let sidecar: Sidecar
let hidden: number
let inputs: Float32Array[]
let requests = 0

beforeAll(async () => {
  setup = await tinySetup('spill')
  // Blocks of 256: the files hold boundary snapshots at 256, 512, 768 and 1024.
  sidecar = (await providedSidecar('tinyDecoderSidecar256')).sidecar
  const engine = DeepseekV4Engine.fromCheckpoint(setup.ckpt, 'decoder')
  hidden = engine.config.hiddenSize
  inputs = nativeRun(engine, fixtureTokens(T)).inputs
})
afterAll(() => setup.dispose())

/** Feed the recorded inputs in `chunks` (sizes, cycled) in a forward's order: each chunk through every layer. */
function feed (session: CaptureSession, chunks: number[], tokens = T): void {
  let c0 = 0
  for (let k = 0; c0 < tokens; k++) {
    const c1 = Math.min(tokens, c0 + chunks[k % chunks.length])
    inputs.forEach((x, layer) => session.onAttentionInput(layer, c0, x.subarray(c0 * hidden, c1 * hidden), c1 - c0))
    c0 = c1
  }
}

async function capture (spill: boolean, chunks: number[], opts: { budget?: number, tokens?: number } = {}) {
  const tokens = opts.tokens ?? T
  const requestId = `spill-${++requests}`
  const session = await CaptureSession.start({ sidecar, captureRoot: setup.root, requestId, tokenCount: tokens, memoryBudgetBytes: opts.budget, spill })
  feed(session, chunks, tokens)
  const manifest = await session.finish()
  const files = manifest.layers.map((l) => readFileSync(join(session.dir, l.file)))
  return { session, manifest, files }
}

const chunkings: Array<[string, number[]]> = [
  ['one shot', [T]],
  ['chunks of 128', [128]],
  ['chunks of 7', [7]],
  ['seeded chunks', Array.from({ length: 40 }, ((r) => () => 1 + Math.floor(r() * 300))(seeded(2011)))],
]

describe('a streaming session writes the staged session\'s files', () => {
  it.each(chunkings)('%s: every layer file byte for byte, the manifest\'s sizes and digests, no spill left', async (_, chunks) => {
    const staged = await capture(false, [T])
    const streamed = await capture(true, chunks)
    expect(streamed.manifest.state).toBe('done')
    expect(streamed.files.length).toBe(staged.files.length)
    streamed.files.forEach((f, i) => expect(Buffer.compare(f, staged.files[i]), `layer ${i}`).toBe(0))
    expect(streamed.manifest.layers.map((l) => [l.file, l.bytes, l.sha256])).toEqual(staged.manifest.layers.map((l) => [l.file, l.bytes, l.sha256]))
    expect(existsSync(join(streamed.session.dir, SPILL_DIR))).toBe(false)
    expect(readdirSync(streamed.session.dir).sort()).toEqual(readdirSync(staged.session.dir).sort())
    // It reads back through the consumers' own reader, checksums and all.
    await readCapture(streamed.session.dir)
    const report = streamed.session.report()
    expect(report.spill).toBe(true)
    expect(report.spilledBytes).toBeGreaterThan(report.payloadBytes)
  })

  it('shorter than a block: no snapshots, no block_size, still the staged bytes', async () => {
    const staged = await capture(false, [100], { tokens: 200 })
    const streamed = await capture(true, [33], { tokens: 200 })
    streamed.files.forEach((f, i) => expect(Buffer.compare(f, staged.files[i]), `layer ${i}`).toBe(0))
  })
})

describe('memory', () => {
  it('what a streaming session holds does not grow with the prompt; a staged one\'s does', async () => {
    const peaks = { staged: [] as number[], streamed: [] as number[] }
    for (const tokens of [300, 600, 1100]) {
      peaks.staged.push((await capture(false, [64], { tokens })).session.peakHeldBytes)
      peaks.streamed.push((await capture(true, [64], { tokens })).session.peakHeldBytes)
    }
    // Staged: every layer's pools and snapshots stay until the last chunk.
    expect(peaks.staged[2]).toBeGreaterThan(peaks.staged[0] * 2)
    // Streamed: the windows, buffers and carries, plus one 64-token chunk's pooled rows. The window
    // fills by 127 tokens, so from 300 tokens on the peak is the same to the byte.
    expect(peaks.streamed[1]).toBe(peaks.streamed[0])
    expect(peaks.streamed[2]).toBe(peaks.streamed[0])
    expect(peaks.streamed[2]).toBeLessThan(peaks.staged[2] / 4)
  })

  it('under a budget both seal the same prefix and write the same partial files', async () => {
    // The staged rule, budget.test.ts's: this budget seals the staged session before T.
    const staged = await capture(false, [128], { budget: 700_000 })
    expect(staged.manifest.state).toBe('partial')
    // Streaming holds far less, so the same budget lets it go further, or all the way.
    const streamed = await capture(true, [128], { budget: 700_000 })
    expect(streamed.session.peakHeldBytes).toBeLessThanOrEqual(700_000)
    expect(streamed.manifest.sealedLength).toBeGreaterThan(staged.manifest.sealedLength ?? 0)
    // A budget under the resident state itself seals a streaming session too, and its prefix files
    // are the staged session's for that prefix.
    const tight = await capture(true, [128], { budget: 150_000 })
    expect(tight.manifest.state).toBe('partial')
    expect(tight.session.peakHeldBytes).toBeLessThanOrEqual(150_000)
    const sealed = tight.manifest.sealedLength as number
    const prefix = await capture(false, [sealed], { tokens: sealed })
    tight.files.forEach((f, i) => {
      const p = prefix.files[i]
      // Same tensors, same bytes; the two manifests differ only in T (T vs T').
      expect(Buffer.compare(f, p), `layer ${i}`).toBe(0)
    })
  })
})

describe('failure', () => {
  it('a streaming session that fails keeps no spill and seals failed', async () => {
    const session = await CaptureSession.start({ sidecar, captureRoot: setup.root, requestId: `spill-${++requests}`, tokenCount: T, spill: true })
    feed(session, [300], 600)
    expect(existsSync(join(session.dir, SPILL_DIR))).toBe(true)
    await expect(session.finish()).rejects.toThrow(/finish before every layer reached/)
    expect(existsSync(join(session.dir, SPILL_DIR))).toBe(false)
    const manifest = JSON.parse(readFileSync(join(session.dir, 'manifest.json'), 'utf8')) as { state: string }
    expect(manifest.state).toBe('failed')
  })
})

describe('RowStore spill', () => {
  it('spilled rows still count, cannot be read, and appends go on after them', () => {
    const store = new RowStore(2, 2)
    for (let r = 0; r < 5; r++) store.append([r, -r])
    expect([...store.heldView()]).toEqual([0, -0, 1, -1, 2, -2, 3, -3, 4, -4])
    store.spillHeld()
    expect(store.rows).toBe(5)
    expect(store.spilledRows).toBe(5)
    expect(store.heldView().length).toBe(0)
    expect(() => store.row(4)).toThrow(/spilled/)
    expect(() => store.view()).toThrow(/spilled/)
    expect(store.append([5, -5])).toBe(5)
    expect([...store.row(5)]).toEqual([5, -5])
    expect([...store.clone().heldView()]).toEqual([5, -5])
  })
})
