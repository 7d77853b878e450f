// The runner in process, with the real engine on the tiny checkpoint and a recording sink: it feeds
// the hook exactly the attention inputs a one-shot prefill computes, in contiguous chunks with a
// flush after each, finishes only after the last chunk, and fails (never finishes) the capture when
// anything goes wrong or the engine is stopping.
import { beforeAll, describe, expect, it } from 'vitest'
import type { CaptureManifest } from '../../src/wire/manifest.ts'
import { DeepseekV4Engine } from '../../src/model/engine/index.ts'
import type { PrefillJob } from '../../src/engines/prefill/job.ts'
import { makeCaptureRunner, type CaptureSink, type RunnerDeps } from '../../src/engines/prefill/runner.ts'
import { tinyCheckpoint } from './helpers.ts'

let engine: DeepseekV4Engine
const T = 301
const tokens = Int32Array.from({ length: T }, (_, i) => (i * 37 + 11) % 512)
// Layer -> the attention input rows of a one-shot prefill, concatenated.
const oneShot: Float32Array[] = []

beforeAll(async () => {
  engine = await DeepseekV4Engine.load(await tinyCheckpoint(), 'prefill')
  const parts: Float32Array[][] = []
  engine.prefill(tokens, engine.newCache(), {
    logits: 'none',
    attnInputHook: (layer, _start, rows, count) => { (parts[layer] ??= []).push(rows.slice(0, count * engine.config.hiddenSize)) },
  })
  for (const p of parts) {
    const all = new Float32Array(p.reduce((n, r) => n + r.length, 0))
    let off = 0
    for (const r of p) { all.set(r, off); off += r.length }
    oneShot.push(all)
  }
})

interface Recording {
  sink: CaptureSink
  calls: string[]
  rows: Float32Array[][]
  positions: Array<Array<[number, number]>>
  failedWith?: unknown
  finishedWith?: Record<string, number>
}

function recordingSink (opts: { state?: 'done' | 'partial', sealedLength?: number, throwAt?: { layer: number, startPos: number } } = {}): Recording {
  const rec: Recording = { calls: [], rows: [], positions: [], sink: undefined as unknown as CaptureSink }
  let fed = 0
  rec.sink = {
    dir: '/captures/x',
    // As CaptureSession: T until a budget cut, which this sink makes once layer 0 passes the cut.
    get sealedLength () { return opts.sealedLength !== undefined && fed >= opts.sealedLength ? opts.sealedLength : T },
    onAttentionInput (layer, startPos, rows, count) {
      if (opts.throwAt?.layer === layer && opts.throwAt.startPos === startPos) throw new Error(`hook refused layer ${layer} at ${startPos}`)
      // Copy: the engine may reuse the buffer after the call.
      ;(rec.rows[layer] ??= []).push(rows.slice(0, count * engine.config.hiddenSize))
      ;(rec.positions[layer] ??= []).push([startPos, count])
      if (layer === 0) fed = startPos + count
    },
    async flush () { rec.calls.push(`flush@${fed}`) },
    async finish (timings) {
      rec.calls.push('finish')
      rec.finishedWith = timings
      const sealed = opts.sealedLength ?? T
      return { state: opts.state ?? 'done', sealedLength: sealed } as CaptureManifest
    },
    async fail (err) {
      rec.calls.push('fail')
      rec.failedWith = err
    },
  }
  return rec
}

function job (): PrefillJob {
  return { requestId: 'r1', source: 'tokens', tokens, state: 'queued', sealedLength: 0, prefilled: 0, timings: {}, submittedAt: performance.now() }
}

function deps (rec: Recording, extra: Partial<RunnerDeps> = {}): RunnerDeps {
  return { engine, startCapture: async () => rec.sink, maxChunk: 100, stopReason: () => undefined, log: () => {}, ...extra }
}

function bits (a: Float32Array): Uint32Array {
  return new Uint32Array(a.buffer, a.byteOffset, a.length)
}

describe('the runner feeds the hook what a one-shot prefill computes', () => {
  it('every layer gets contiguous chunks of 100 whose rows equal the one-shot rows bit for bit; flush after each chunk, then finish', async () => {
    const rec = recordingSink()
    const j = job()
    await makeCaptureRunner(deps(rec))(j)
    expect(rec.calls).toEqual(['flush@100', 'flush@200', 'flush@300', 'flush@301', 'finish'])
    expect(rec.positions.length).toBe(engine.config.numHiddenLayers)
    for (let layer = 0; layer < rec.positions.length; layer++) {
      expect(rec.positions[layer]).toEqual([[0, 100], [100, 100], [200, 100], [300, 1]])
      const got = new Float32Array(oneShot[layer].length)
      let off = 0
      for (const r of rec.rows[layer]) { got.set(r, off); off += r.length }
      expect(off).toBe(T * engine.config.hiddenSize)
      expect(Buffer.from(bits(got).buffer).equals(Buffer.from(bits(oneShot[layer]).buffer))).toBe(true)
    }
    expect([j.state, j.sealedLength, j.error, j.captureDir]).toEqual(['done', T, undefined, '/captures/x'])
    expect(Object.keys(j.timings).sort()).toEqual(['finish', 'prefill', 'queue', 'total'])
    expect(rec.finishedWith).toEqual({ queue: j.timings.queue, prefill: j.timings.prefill })
  })

  it('a capture sealed partial stops the prefill once every layer passed the cut, and the job is partial', async () => {
    const rec = recordingSink({ state: 'partial', sealedLength: 150 })
    const j = job()
    await makeCaptureRunner(deps(rec))(j)
    expect(rec.calls).toEqual(['flush@100', 'flush@200', 'finish'])
    expect(rec.positions[3]).toEqual([[0, 100], [100, 100]])
    expect([j.state, j.sealedLength]).toEqual(['partial', 150])
  })

  it('yields to the event loop between chunks, so a timer fires during the prefill', async () => {
    const rec = recordingSink()
    let ticks = 0
    const timer = setInterval(() => { ticks++ }, 0)
    await makeCaptureRunner(deps(rec, { maxChunk: 30 }))(job())
    clearInterval(timer)
    expect(ticks).toBeGreaterThanOrEqual(5)
  })
})

describe('the runner fails the capture, never finishes it, when something goes wrong', () => {
  it('a hook error mid-prefill fails the capture with that error', async () => {
    const rec = recordingSink({ throwAt: { layer: 2, startPos: 200 } })
    const j = job()
    await makeCaptureRunner(deps(rec))(j)
    expect(rec.calls).toEqual(['flush@100', 'flush@200', 'fail'])
    expect([j.state, j.error]).toEqual(['failed', 'hook refused layer 2 at 200'])
    expect((rec.failedWith as Error).message).toBe('hook refused layer 2 at 200')
  })

  it('a stop between chunks fails the capture and says how far it got', async () => {
    const rec = recordingSink()
    const j = job()
    let stop: string | undefined
    await makeCaptureRunner(deps(rec, { stopReason: () => stop, onChunk: () => { stop = 'engine shut down (SIGTERM)' } }))(j)
    expect(rec.calls).toEqual(['flush@100', 'fail'])
    expect(j.error).toBe('engine shut down (SIGTERM) after 100 of 301 tokens')
  })

  it('a capture that cannot start fails the job without a session', async () => {
    const j = job()
    await makeCaptureRunner({ ...deps(recordingSink()), startCapture: async () => { throw new Error('capture directory /x/r1 already exists') } })(j)
    expect([j.state, j.error, j.captureDir]).toEqual(['failed', 'capture directory /x/r1 already exists', undefined])
  })

  it('a fail() that itself throws is logged, and the job is still failed', async () => {
    const rec = recordingSink({ throwAt: { layer: 0, startPos: 0 } })
    rec.sink.fail = async () => { throw new Error('disk full') }
    const events: Array<Record<string, unknown>> = []
    const j = job()
    await makeCaptureRunner(deps(rec, { log: (e) => events.push(e) }))(j)
    expect(j.state).toBe('failed')
    expect(events.find((e) => e.event === 'capture-fail-error')).toMatchObject({ request_id: 'r1', error: 'disk full' })
  })
})
