// The capture hook's cost and payload, as micro-benchmark records (pd-bridge/micro-bench@1,
// docs/BENCHMARK-PROTOCOL.md) under results/micro/, one per preset. Run:
//   npx tsx protocols/bench-capture.ts [--preset tiny,small] [--tokens 1024,4096] [--repeats 2]
//     [--replays 3] [--sample-limit-ms 1500] [--tinybench-ms 3000] [--prefill-profile P] [--block-size N] [--note TEXT] [--micro DIR]
// Per preset and prompt length: the prefill forward alone and the same forward with a capture
// session on its attention inputs (the decoder's sidecar, as the embedded stack exports it),
// `--repeats` times each, interleaved. The first forward with capture also records the attention
// inputs; the hook alone is then timed over that recording: with tinybench (p50 of its samples)
// when one pass takes at most --sample-limit-ms in the forward, else as the median of --replays
// plain timed passes. Its rate is GFLOP/s of the kv-path projections (the bulk of its arithmetic)
// next to the machine's mul+add peak on the same threads; the record also keeps the least traffic a
// pass makes (attention inputs read, sidecar weights read once, layer files written) over its
// time, next to a copy moving the same bytes. Nothing is asserted: times depend on the machine and
// its load.
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs'
import { loadavg, tmpdir } from 'node:os'
import { join } from 'node:path'
import { Bench } from 'tinybench'
import { CaptureSession, sidecarWeightSpecs, type CaptureReport } from '../src/capture/index.ts'
import { PdBridgeError } from '../src/errors.ts'
import { helpAndExit, readOptions } from './bench-cli.ts'
import { getKernelThreads } from '../src/kernels/index.ts'
import { loadCheckpoint } from '../src/model/checkpoint/index.ts'
import { DeepseekV4Engine } from '../src/model/engine/index.ts'
import { benchConfig, extraInt, extraIntList, parseBenchOptions } from '../verify/results/bench-options.ts'
import { prepareBench, type BenchSetup } from '../verify/results/bench-setup.ts'
import { MICRO_RECORD_SCHEMA, microRunId, writeMicroRecord, type HookRow, type MicroRecord } from '../verify/results/micro-record.ts'
import { bestCopyGbps, bestOfPeaks, gflopsPeakFor, measureMachinePeaks, nativeInfo } from '../verify/results/peaks.ts'
import { median } from '../verify/results/summary.ts'

helpAndExit(`Usage: npx tsx protocols/bench-capture.ts [options]

The capture hook's cost and payload, one micro-benchmark record per preset in --micro
(docs/BENCHMARK-PROTOCOL.md, "Micro benchmarks").

  --preset A,B           presets (default tiny,small)
  --tokens N,N           prompt lengths (default 1024,4096)
  --repeats N            forwards per case, alone and with capture each (default 2, or $PDB_BENCH_REPEATS)
  --replays N            timed passes of the hook alone when tinybench is not used (default 3)
  --sample-limit-ms N    longest pass tinybench samples (default 1500)
  --tinybench-ms N       tinybench's time per case (default 3000)
  --seed N               checkpoint seed (default 1)
  --block-size N         decoder block size (default 256)
  --prefill-profile P    prefill profile (default decoder)
  --note TEXT            kept in the records (default $PDB_BENCH_NOTE)
  --micro DIR            where the records go (default results/micro)
  -h, --help             this text (nothing is measured or written)
`)
const { options, TOKENS, REPEATS, REPLAYS, SAMPLE_LIMIT_MS, TINYBENCH_MS } = readOptions('bench-capture', () => {
  const options = parseBenchOptions(process.argv.slice(2), ['tiny', 'small'], ['tokens', 'repeats', 'replays', 'sample-limit-ms', 'tinybench-ms'])
  return {
    options,
    TOKENS: extraIntList(options, 'tokens', [1024, 4096]),
    /** Forwards per case, alone and with capture each. */
    REPEATS: extraInt(options, 'repeats', Number(process.env.PDB_BENCH_REPEATS ?? 2)),
    /** Timed passes of the hook alone when one is too long for tinybench. */
    REPLAYS: extraInt(options, 'replays', 3),
    /** Longest pass (as measured inside the forward) that tinybench samples; longer ones are timed plainly. */
    SAMPLE_LIMIT_MS: extraInt(options, 'sample-limit-ms', 1500),
    /** tinybench's time budget per case (it takes at least MIN_SAMPLES samples). */
    TINYBENCH_MS: extraInt(options, 'tinybench-ms', 3000),
  }
})
const MIN_SAMPLES = 5

/** One call of the engine's attention-input hook, kept to replay. */
interface HookCall {
  layer: number
  startPos: number
  rows: Float32Array
  count: number
}

function promptOf (tokens: number, vocab: number): number[] {
  let s = 12345
  return Array.from({ length: tokens }, () => {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0
    return 2 + (s % (vocab - 2))
  })
}

function mid (values: number[]): number {
  const m = median(values)
  if (m === null) throw new PdBridgeError('median of no values')
  return m
}

let captures = 0

/** Multiply-adds per attention-input row of each layer: the sum of out × in over its kv-path linears. */
function layerLinearMacs (setup: BenchSetup): number[] {
  const macs = setup.sidecar.json.layers.map(() => 0)
  for (const w of sidecarWeightSpecs(setup.sidecar.json)) {
    if (w.kind !== 'linear') continue
    const layer = /^model\.layers\.(\d+)\./.exec(w.name)
    if (layer === null || macs[Number(layer[1])] === undefined) throw new PdBridgeError(`sidecar weight ${w.name}: no layer index in its name`)
    macs[Number(layer[1])] += w.shape[0] * w.shape[1]
  }
  return macs
}

/** A fresh capture session over `tokens` tokens under `root`. */
async function startSession (setup: BenchSetup, root: string, tokens: number): Promise<CaptureSession> {
  return await CaptureSession.start({ sidecar: setup.sidecar, captureRoot: root, requestId: `bench-${captures++}`, tokenCount: tokens })
}

/** Feed the recorded calls to `session`: the hook's whole work for one prompt (pooling and layer files). */
function replay (session: CaptureSession, calls: HookCall[]): void {
  for (const c of calls) session.onAttentionInput(c.layer, c.startPos, c.rows, c.count)
}

/** The hook alone over `calls`: per-pass times (ms), with pooling and writes as the session clocked them. */
async function timeHook (setup: BenchSetup, root: string, tokens: number, calls: HookCall[], inForwardMs: number): Promise<{ method: 'tinybench-p50' | 'timed-median', passMs: number, poolingMs: number, writeMs: number, samples: number }> {
  const pooling: number[] = []
  const writes: number[] = []
  let session: CaptureSession | undefined
  const open = async () => { session = await startSession(setup, root, tokens) }
  const close = async () => {
    const m = await session!.finish()
    pooling.push(m.timings.hook)
    writes.push(m.timings.layerWrite)
    rmSync(session!.dir, { recursive: true, force: true })
  }
  // One untimed pass first, so the replay path is as warm as the forward's.
  await open()
  replay(session!, calls)
  await close()
  pooling.length = 0
  writes.length = 0
  if (inForwardMs <= SAMPLE_LIMIT_MS) {
    const bench = new Bench({ time: TINYBENCH_MS, iterations: MIN_SAMPLES, warmup: false })
    bench.add('hook', () => { replay(session!, calls) }, { beforeEach: open, afterEach: close })
    await bench.run()
    const r = bench.tasks[0].result
    if (r.state !== 'completed') throw new PdBridgeError(`tinybench ended as ${r.state}`)
    return { method: 'tinybench-p50', passMs: r.latency.p50, poolingMs: mid(pooling), writeMs: mid(writes), samples: r.latency.samplesCount }
  }
  const passes: number[] = []
  for (let i = 0; i < REPLAYS; i++) {
    await open()
    const t0 = performance.now()
    replay(session!, calls)
    passes.push(performance.now() - t0)
    await close()
  }
  return { method: 'timed-median', passMs: mid(passes), poolingMs: mid(pooling), writeMs: mid(writes), samples: REPLAYS }
}

async function benchPreset (preset: typeof options.presets[number], root: string): Promise<string> {
  const startedAt = new Date().toISOString()
  const loadBefore = loadavg() as [number, number, number]
  const config = benchConfig(options, preset)
  const setup = await prepareBench(config, join(root, preset))
  const captureRoot = join(root, `${preset}-captures`)
  mkdirSync(captureRoot, { recursive: true })
  console.error(`${preset}: environment ${setup.environment.id} (${setup.environment.model}, prefill profile ${config.prefillProfile}); measuring peaks...`)
  const startPeaks = measureMachinePeaks()
  const engine = DeepseekV4Engine.fromCheckpoint(await loadCheckpoint(setup.checkpointDir), config.prefillProfile)
  const hidden = engine.config.hiddenSize
  engine.prefill(promptOf(16, engine.config.vocabSize), engine.newCache(), { logits: 'none' }) // prepares the weights
  const threads = getKernelThreads()
  // Every kv-path linear ([out, hidden]) of a layer runs over each of that layer's rows.
  const macsPerRow = layerLinearMacs(setup)
  const measured: Array<Omit<HookRow, 'rate' | 'peak' | 'peakOf' | 'percentOfPeak'>> = []
  for (const tokens of TOKENS) {
    const prompt = promptOf(tokens, engine.config.vocabSize)
    const forwards: number[] = []
    const withCapture: number[] = []
    const inForward: number[] = []
    const calls: HookCall[] = []
    let report: CaptureReport | undefined
    for (let r = 0; r < REPEATS; r++) {
      let t0 = performance.now()
      engine.prefill(prompt, engine.newCache(), { logits: 'none', maxChunk: tokens })
      forwards.push(performance.now() - t0)
      const session = await startSession(setup, captureRoot, tokens)
      // The first pass also keeps a copy of every attention input (outside the session's clock).
      const hook = r > 0
        ? session.onAttentionInput
        : (layer: number, startPos: number, rowsIn: Float32Array, count: number) => {
            calls.push({ layer, startPos, rows: rowsIn.slice(0, count * hidden), count })
            session.onAttentionInput(layer, startPos, rowsIn, count)
          }
      t0 = performance.now()
      engine.prefill(prompt, engine.newCache(), { logits: 'none', maxChunk: tokens, attnInputHook: hook })
      withCapture.push(performance.now() - t0)
      const manifest = await session.finish()
      inForward.push(manifest.timings.hook + manifest.timings.layerWrite)
      report ??= session.report()
      rmSync(session.dir, { recursive: true, force: true })
    }
    const t = await timeHook(setup, captureRoot, tokens, calls, mid(inForward))
    const bytesMoved = {
      attentionInputs: calls.reduce((a, c) => a + c.count * hidden * 4, 0),
      weights: setup.sidecar.json.weights.bytes,
      payload: report!.payloadBytes,
    }
    const traffic = bytesMoved.attentionInputs + bytesMoved.weights + bytesMoved.payload
    const forwardMs = mid(forwards)
    const required = report!.minimum.bytes + report!.boundarySnapshots.bytes
    measured.push({
      suite: 'hook',
      name: 'capture hook',
      shape: `${preset} T=${tokens}`,
      threads,
      unit: 'GFLOP/s',
      samples: t.samples,
      method: t.method,
      hook: {
        preset,
        tokens,
        forwardMs,
        forwardWithCaptureMs: mid(withCapture),
        forwardRepeats: REPEATS,
        hookMs: t.passMs,
        poolingMs: t.poolingMs,
        layerWriteMs: t.writeMs,
        msPerToken: t.passMs / tokens,
        fractionOfForward: t.passMs / forwardMs,
        inForwardMs: mid(inForward),
        payloadBytes: report!.payloadBytes,
        payloadBytesPerToken: report!.payloadBytesPerToken,
        minimumBytesPerToken: report!.minimum.bytesPerToken,
        poolBytesPerToken: report!.minimum.poolBytesPerToken,
        overMinimum: report!.overMinimum,
        requiredBytesPerToken: required / report!.sealedLength,
        overRequired: report!.overRequired,
        peakHeldBytes: report!.peakHeldBytes,
        flops: calls.reduce((a, c) => a + 2 * c.count * macsPerRow[c.layer], 0),
        bytesMoved,
        trafficGbps: traffic / (t.passMs / 1000) / 1e9,
        // A copy moving the same bytes on the threads the hook's kernels may use, measured now.
        copyPeakGbps: bestCopyGbps(threads, Math.ceil(traffic / 2)),
      },
    })
    console.error(`${preset} T=${tokens}: forward ${forwardMs.toFixed(0)} ms, hook ${t.passMs.toFixed(1)} ms (${t.method}, ${t.samples}), in forward ${mid(inForward).toFixed(1)} ms`)
  }
  const peaks = bestOfPeaks(startPeaks, measureMachinePeaks())
  const loadAfter = loadavg() as [number, number, number]
  // The rate: GFLOP/s of the projections over the pass, next to this record's mul+add peak.
  const rows: HookRow[] = measured.map((m) => {
    const rate = m.hook.flops / (m.hook.hookMs / 1000) / 1e9
    const peak = gflopsPeakFor(peaks, m.threads)
    return { ...m, rate, peak, peakOf: `mul+add, ${m.threads} thread${m.threads === 1 ? '' : 's'}`, percentOfPeak: 100 * rate / peak }
  })

  console.table(rows.map((r) => ({
    case: r.shape,
    'forward ms': Math.round(r.hook.forwardMs),
    'hook ms': Number(r.hook.hookMs.toFixed(1)),
    'µs/token': Number((r.hook.msPerToken * 1000).toFixed(1)),
    'hook / forward': `${(100 * r.hook.fractionOfForward).toFixed(1)}%`,
    'in forward ms': Number(r.hook.inForwardMs.toFixed(1)),
    'B/token': Number(r.hook.payloadBytesPerToken.toFixed(1)),
    'minimum B/token': Number(r.hook.minimumBytesPerToken.toFixed(1)),
    'x minimum': Number(r.hook.overMinimum.toFixed(4)),
    'x required': Number(r.hook.overRequired.toFixed(4)),
    rate: `${r.rate.toFixed(2)} GFLOP/s`,
    '% peak': Number(r.percentOfPeak.toFixed(1)),
    'GB/s moved': Number(r.hook.trafficGbps.toFixed(2)),
    '% copy': Number((100 * r.hook.trafficGbps / r.hook.copyPeakGbps).toFixed(2)),
    method: `${r.method} (${r.samples})`,
  })))

  const record: MicroRecord = {
    schema: MICRO_RECORD_SCHEMA,
    runId: microRunId(startedAt, 'hook', preset),
    startedAt,
    suite: 'hook',
    environment: setup.environment,
    load: { before: loadBefore, after: loadAfter },
    note: options.note,
    native: nativeInfo(),
    settings: {
      prefillProfile: config.prefillProfile,
      sidecarProfile: setup.sidecar.profile.name,
      blockSize: config.blockSize,
      forwardRepeats: REPEATS,
      replays: REPLAYS,
      sampleLimitMs: SAMPLE_LIMIT_MS,
      tinybenchMs: TINYBENCH_MS,
      forward: 'one forward over the whole prompt (maxChunk = T), logits none',
    },
    peaks,
    rows,
  }
  return await writeMicroRecord(options.microDir, record)
}

async function main (): Promise<void> {
  const root = mkdtempSync(join(tmpdir(), 'pd-bridge-bench-capture-'))
  try {
    for (const preset of options.presets) console.log(`wrote ${await benchPreset(preset, root)}`)
  }
  finally {
    rmSync(root, { recursive: true, force: true })
  }
}

await main()
