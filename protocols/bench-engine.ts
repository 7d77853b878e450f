// Engine speed: prefill and decode tokens/s of the DeepSeek-V4 engine on the synthetic presets,
// and how much of this machine's measured compute peak the hot kernels reach while it runs.
// Run: npx tsx protocols/bench-engine.ts [--models tiny,small] [--sizes 1K,4K,16K]
//        [--profiles decoder,f32] [--decode-steps 8] [--time-ms 1500] [--note TEXT]
// Prints a table and writes results/bench/engine-<date>.json. Nothing is asserted: speeds depend
// on the machine and on whatever else it is running (record that with --note).
//
// Method (docs/engine.md, "Benchmark"):
// - Rates. Prefill of T tokens from an empty cache, logits of the last position only. A prefill
//   whose first (accounting) run took less than --short-s seconds is timed again with tinybench
//   (p50 of its samples) and accounted on one more, warm run; a longer one is timed once, plainly:
//   that accounting run (one-off costs of a first run are small next to it). Decode is the
//   token at position T on a copy of the cache that prefill left (a fresh copy per sample, made
//   outside the timed call), timed with tinybench (p50); accounted the same way over at least
//   --decode-steps decodes and 300 ms.
// - Kernel accounting. During the accounting runs every native kernel entry point is wrapped to time each call and count its floating
//   point operations from its actual arguments: matmul 2·m·n·k; attention 4·H·D per (query, key)
//   pair it was given (scores and weighted values; the exps are not counted); indexer 2·Hi·Di per
//   visible (query, entry) pair. Norms, rope, pooling and element-wise math are timed, not counted.
//   "hot %peak" = counted FLOPs / time inside those three kernels / peak: how well the kernels run
//   inside the engine. "run %peak" = counted FLOPs / wall time / peak: what the whole forward
//   (TypeScript glue included) makes of the machine. Decode is bound by reading weights, not by
//   FLOPs, so matmul weight bytes read (n·k times 4 or 2) / time inside matmul is reported too,
//   next to a 256 MiB streaming copy. Rates are measured without the wrappers.
// - Peak. measurePeakGflops (AVX2 mul + add, no FMA: the kernels' own instruction mix) on the
//   kernels' thread count, best of 5 short runs at the start and 5 at the end.
import { existsSync, mkdirSync, writeFileSync } from 'node:fs'
import { stat } from 'node:fs/promises'
import { cpus, loadavg, tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { parseArgs } from 'node:util'
import { Bench } from 'tinybench'
import { getKernelThreads, loadNativeKernels, measurePeakGflops, measureStreamGbps } from '../src/kernels/index.ts'
import type { NativeKernels } from '../src/kernels/native.ts'
import { checkpointDigest, isPresetName, loadCheckpoint, makeCheckpoint, PRESET_NAMES } from '../src/model/checkpoint/index.ts'
import { DeepseekV4Engine, type ModelCache } from '../src/model/engine/index.ts'
import { getProfile } from '../src/model/profiles/index.ts'
import { helpAndExit, readOptions } from './bench-cli.ts'

// ---------------------------------------------------------------------------------------------
// Options

interface Options {
  models: string[]
  sizes: number[]
  /** Profiles per model; undefined: decoder, plus f32 for tiny. */
  profiles?: string[]
  decodeSteps: number
  timeMs: number
  shortSeconds: number
  cacheDir: string
  note: string | null
}

function parseSize (text: string): number {
  const m = /^(\d+)([kK]?)$/.exec(text.trim())
  if (m === null) throw new Error(`--sizes: ${JSON.stringify(text)} is not a token count (e.g. 1024, 1K, 16K)`)
  const n = Number(m[1]) * (m[2] === '' ? 1 : 1024)
  if (!Number.isSafeInteger(n) || n < 1) throw new Error(`--sizes: ${JSON.stringify(text)} must be at least 1`)
  return n
}

function positive (flag: string, text: string): number {
  const n = Number(text)
  if (!Number.isFinite(n) || n <= 0) throw new Error(`${flag} must be a positive number, got ${JSON.stringify(text)}`)
  return n
}

function parseOptions (argv: string[]): Options {
  const { values } = parseArgs({
    args: argv,
    options: {
      models: { type: 'string', default: 'tiny,small' },
      sizes: { type: 'string', default: '1K,4K,16K' },
      profiles: { type: 'string' },
      'decode-steps': { type: 'string', default: '8' },
      'time-ms': { type: 'string', default: '1500' },
      'short-s': { type: 'string', default: '2' },
      'cache-dir': { type: 'string', default: join(tmpdir(), 'pd-bridge-bench-checkpoints') },
      note: { type: 'string' },
    },
  })
  const list = (s: string) => s.split(',').map((x) => x.trim()).filter(Boolean)
  const models = list(values.models)
  for (const m of models) if (!isPresetName(m)) throw new Error(`--models: unknown preset ${JSON.stringify(m)}; known: ${PRESET_NAMES.join(', ')}`)
  const profiles = values.profiles === undefined ? undefined : list(values.profiles)
  for (const p of profiles ?? []) getProfile(p) // unknown names fail here, before any work
  const decodeSteps = positive('--decode-steps', values['decode-steps'])
  if (!Number.isInteger(decodeSteps)) throw new Error('--decode-steps must be an integer')
  return {
    models,
    sizes: list(values.sizes).map(parseSize),
    profiles,
    decodeSteps,
    timeMs: positive('--time-ms', values['time-ms']),
    shortSeconds: positive('--short-s', values['short-s']),
    cacheDir: values['cache-dir'],
    note: values.note ?? process.env.PDB_BENCH_NOTE ?? null,
  }
}

function profilesFor (model: string, opts: Options): string[] {
  return opts.profiles ?? (model === 'tiny' ? ['decoder', 'f32'] : ['decoder'])
}

// ---------------------------------------------------------------------------------------------
// Kernel accounting: wrappers around the addon's entry points

const KERNEL_CLASSES = ['matmul', 'attention', 'indexer', 'other'] as const
type KernelClass = typeof KERNEL_CLASSES[number]

interface ClassTally { calls: number, ms: number, flops: number, bytes: number }
type Tally = Record<KernelClass, ClassTally>

function emptyTally (): Tally {
  const zero = () => ({ calls: 0, ms: 0, flops: 0, bytes: 0 })
  return { matmul: zero(), attention: zero(), indexer: zero(), other: zero() }
}

// The addon's raw signatures differ per kernel; the meter forwards whatever each one takes.
// eslint-disable-next-line @typescript-eslint/no-explicit-any
type RawArgs = any[]

interface KernelSpec {
  cls: KernelClass
  flops: (...a: RawArgs) => number
  /** Weight bytes read (matmul only): decode is bound by these, not by FLOPs. */
  bytes?: (...a: RawArgs) => number
}

/** FLOPs of one call, from its arguments (the addon's raw signatures, src/kernels/native.ts). */
const FLOPS: Partial<Record<keyof NativeKernels, KernelSpec>> = {
  matmulF32: { cls: 'matmul', flops: (_x, m: number, k: number, _w, n: number) => 2 * m * n * k, bytes: (_x, _m, k: number, _w, n: number) => 4 * n * k },
  matmulBf16: { cls: 'matmul', flops: (_x, m: number, k: number, _w, n: number) => 2 * m * n * k, bytes: (_x, _m, k: number, _w, n: number) => 2 * n * k },
  attentionMqa: {
    cls: 'attention',
    flops: (_q, t: number, h: number, d: number, _kv, _n, offsets: Int32Array) => 4 * (offsets[t] - offsets[0]) * h * d,
  },
  indexerScores: {
    cls: 'indexer',
    flops: (_q, t: number, h: number, d: number, _e, _n, _w, visible: Int32Array) => {
      let pairs = 0
      for (let i = 0; i < t; i++) pairs += visible[i]
      return 2 * pairs * h * d
    },
  },
}
const OTHER_KERNELS = ['rmsNorm', 'fmathArray', 'softmaxPool', 'ropeRows', 'roundBf16Array'] as const

/** Times and counts every native kernel call while installed. */
class KernelMeter {
  tally = emptyTally()
  private originals = new Map<string, (...a: RawArgs) => unknown>()

  install (): void {
    const addon = loadNativeKernels() as unknown as Record<string, (...a: RawArgs) => unknown>
    const wrap = (name: string, cls: KernelClass, spec?: KernelSpec) => {
      const fn = addon[name]
      this.originals.set(name, fn)
      addon[name] = (...args: RawArgs) => {
        const t0 = performance.now()
        const r = fn.apply(addon, args)
        const t = this.tally[cls]
        t.ms += performance.now() - t0
        t.calls++
        if (spec !== undefined) t.flops += spec.flops(...args)
        if (spec?.bytes !== undefined) t.bytes += spec.bytes(...args)
        return r
      }
    }
    for (const [name, spec] of Object.entries(FLOPS)) if (spec !== undefined) wrap(name, spec.cls, spec)
    for (const name of OTHER_KERNELS) wrap(name, 'other')
  }

  uninstall (): void {
    const addon = loadNativeKernels() as unknown as Record<string, unknown>
    for (const [name, fn] of this.originals) addon[name] = fn
    this.originals.clear()
  }

  /** Run `fn` with the wrappers on; returns the wall time and the tally of that run alone. */
  measure (fn: () => void): { wallMs: number, tally: Tally } {
    this.tally = emptyTally()
    return { wallMs: this.add(fn), tally: this.tally }
  }

  /** Run `fn` with the wrappers on, adding to the current tally; returns its wall time. */
  add (fn: () => void): number {
    this.install()
    const t0 = performance.now()
    try {
      fn()
    }
    finally {
      this.uninstall()
    }
    return performance.now() - t0
  }
}

// ---------------------------------------------------------------------------------------------
// Peaks, checkpoints, prompts

const PEAK_RUNS = 5
function bestPeak (threads: number): number {
  let best = 0
  for (let r = 0; r < PEAK_RUNS; r++) best = Math.max(best, measurePeakGflops(threads, 100))
  return best
}

/** Best streaming copy (read + write) of 256 MiB on `threads` threads, GB/s: the bandwidth decode lives on. */
function bestCopy (threads: number): number {
  let best = 0
  for (let r = 0; r < 3; r++) best = Math.max(best, measureStreamGbps(threads, 256 << 20, 2))
  return best
}

async function isFile (path: string): Promise<boolean> {
  try {
    return (await stat(path)).isFile()
  }
  catch {
    return false
  }
}

/** The preset's seed-1 checkpoint under cacheDir, made once and reused (make-checkpoint is deterministic). */
async function checkpointFor (preset: string, cacheDir: string): Promise<string> {
  const dir = join(cacheDir, `${preset}-seed1`)
  if (!await isFile(join(dir, 'config.json')) || !await isFile(join(dir, 'model.safetensors'))) {
    console.log(`making the ${preset} checkpoint in ${dir} ...`)
    await makeCheckpoint({ preset, seed: 1, out: dir, force: true })
  }
  return dir
}

/** T seeded token ids in [16, vocab) (an LCG: the ids do not matter for speed, only that they vary). */
function promptTokens (count: number, vocab: number, seed: number): number[] {
  const out = new Array<number>(count)
  let s = seed >>> 0
  for (let i = 0; i < count; i++) {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0
    out[i] = 16 + (s % (vocab - 16))
  }
  return out
}

// ---------------------------------------------------------------------------------------------
// Measurements

interface Accounting {
  wallMs: number
  /** Per kernel class: calls, milliseconds inside the kernel, counted GFLOP. */
  kernels: Record<KernelClass, { calls: number, ms: number, gflop: number }>
  /** Share of the wall time spent inside any native kernel. */
  kernelShare: number
  /** Counted FLOPs / time inside matmul + attention + indexer. */
  hotGflops: number
  hotPercentOfPeak: number
  /** Counted FLOPs / wall time. */
  runGflops: number
  runPercentOfPeak: number
  /** Matmul weight bytes read / time inside matmul, and that against the copy peak. */
  matmulWeightGbps: number
  matmulWeightPercentOfCopy: number
}

interface Row {
  model: string
  profile: string
  tokens: number
  phase: 'prefill' | 'decode'
  /** How the rate was taken. */
  method: string
  msPerOp: number
  tokensPerSecond: number
  accounting: Accounting
  loadAverage: number[]
}

function account (wallMs: number, tally: Tally, peak: number, copyPeak: number): Accounting {
  const hot = (['matmul', 'attention', 'indexer'] as const)
  const flops = hot.reduce((a, c) => a + tally[c].flops, 0)
  const hotMs = hot.reduce((a, c) => a + tally[c].ms, 0)
  const allMs = KERNEL_CLASSES.reduce((a, c) => a + tally[c].ms, 0)
  const hotGflops = hotMs > 0 ? flops / (hotMs / 1000) / 1e9 : 0
  const runGflops = flops / (wallMs / 1000) / 1e9
  const kernels = Object.fromEntries(KERNEL_CLASSES.map((c) => [c, { calls: tally[c].calls, ms: tally[c].ms, gflop: tally[c].flops / 1e9 }])) as Accounting['kernels']
  const matmulWeightGbps = tally.matmul.ms > 0 ? tally.matmul.bytes / (tally.matmul.ms / 1000) / 1e9 : 0
  return {
    wallMs, kernels, kernelShare: allMs / wallMs, hotGflops, hotPercentOfPeak: 100 * hotGflops / peak, runGflops, runPercentOfPeak: 100 * runGflops / peak,
    matmulWeightGbps, matmulWeightPercentOfCopy: 100 * matmulWeightGbps / copyPeak,
  }
}

async function tinybenchP50 (name: string, fn: () => void, timeMs: number, iterations: number, beforeEach?: () => void): Promise<{ p50Ms: number, samples: number }> {
  const bench = new Bench({ time: timeMs, iterations, warmup: false })
  bench.add(name, fn, beforeEach === undefined ? {} : { beforeEach })
  await bench.run()
  const r = bench.tasks[0].result
  if (r.state !== 'completed') throw new Error(`benchmark ${name} ended as ${r.state}`)
  return { p50Ms: r.latency.p50 ?? r.latency.mean, samples: r.latency.samplesCount }
}

async function benchCase (engine: DeepseekV4Engine, model: string, profile: string, T: number, opts: Options, meter: KernelMeter, peak: number, copyPeak: number): Promise<Row[]> {
  const cfg = engine.config
  const tokens = promptTokens(T, cfg.vocabSize, 0x5eed + T)
  const rows: Row[] = []

  // Prefill: one accounted run; tinybench again when it is short.
  const prefilled: ModelCache = engine.newCache()
  let pre = meter.measure(() => { engine.prefill(tokens, prefilled, { logits: 'last' }) })
  let prefillMs = pre.wallMs
  let method = 'plain, one run (the accounting run)'
  if (pre.wallMs / 1000 < opts.shortSeconds) {
    const r = await tinybenchP50(`prefill ${model} ${profile} ${T}`, () => { engine.prefill(tokens, engine.newCache(), { logits: 'last' }) }, opts.timeMs, 3)
    prefillMs = r.p50Ms
    method = `tinybench p50 of ${r.samples}`
    // A first run at a new length pays one-off costs (rope tables grown, buffers first touched);
    // account a warm run instead, as the tinybench samples are.
    pre = meter.measure(() => { engine.prefill(tokens, engine.newCache(), { logits: 'last' }) })
  }
  rows.push({ model, profile, tokens: T, phase: 'prefill', method, msPerOp: prefillMs, tokensPerSecond: T / (prefillMs / 1000), accounting: account(pre.wallMs, pre.tally, peak, copyPeak), loadAverage: loadavg() })

  // Decode: every decode (accounted or timed) is the token at position T on a fresh copy of the
  // prefill cache, copied outside the measured call, so the context never drifts. The accounting
  // takes at least --decode-steps decodes and at least 300 ms of them (short ones are noisy here).
  const token = promptTokens(1, cfg.vocabSize, 0xdec0de + T)[0]
  meter.tally = emptyTally()
  let decodeWallMs = 0
  let steps = 0
  while (steps < opts.decodeSteps || decodeWallMs < 300) {
    const copy = prefilled.clone()
    decodeWallMs += meter.add(() => { engine.decode(token, copy) })
    steps++
  }
  const dec = { wallMs: decodeWallMs, tally: meter.tally }
  let work = prefilled.clone()
  const r = await tinybenchP50(`decode ${model} ${profile} ${T}`, () => { engine.decode(token, work) }, opts.timeMs, 8,
    () => { work = prefilled.clone() })
  rows.push({
    model, profile, tokens: T, phase: 'decode', method: `tinybench p50 of ${r.samples}; accounted over ${steps}`,
    msPerOp: r.p50Ms, tokensPerSecond: 1000 / r.p50Ms, accounting: account(dec.wallMs, dec.tally, peak, copyPeak), loadAverage: loadavg(),
  })
  return rows
}

// ---------------------------------------------------------------------------------------------
// Output

function fmtRate (n: number): string {
  return n >= 100 ? n.toFixed(0) : n >= 10 ? n.toFixed(1) : n.toFixed(2)
}

function tableRows (rows: Row[]) {
  return rows.map((r) => ({
    model: r.model,
    profile: r.profile,
    T: r.tokens,
    phase: r.phase,
    'tok/s': Number(fmtRate(r.tokensPerSecond)),
    'ms/op': Number(r.msPerOp.toFixed(r.msPerOp < 10 ? 3 : 1)),
    'in kernels %': Number((100 * r.accounting.kernelShare).toFixed(1)),
    'matmul GFLOP': Number(r.accounting.kernels.matmul.gflop.toFixed(3)),
    'attn+idx GFLOP': Number((r.accounting.kernels.attention.gflop + r.accounting.kernels.indexer.gflop).toFixed(3)),
    'hot GFLOP/s': Number(r.accounting.hotGflops.toFixed(1)),
    'hot %peak': Number(r.accounting.hotPercentOfPeak.toFixed(1)),
    'run %peak': Number(r.accounting.runPercentOfPeak.toFixed(1)),
    'matmul weight GB/s': Number(r.accounting.matmulWeightGbps.toFixed(1)),
    method: r.method,
    load: r.loadAverage[0].toFixed(1),
  }))
}

function markdown (rows: Row[]): string {
  const head = '| model | profile | T | phase | tok/s | in kernels | hot GFLOP/s | hot % peak | run % peak | matmul weight GB/s | load (1 min) |\n|---|---|---|---|---|---|---|---|---|---|---|'
  const body = rows.map((r) => `| ${r.model} | ${r.profile} | ${r.tokens} | ${r.phase} | ${fmtRate(r.tokensPerSecond)} | ${(100 * r.accounting.kernelShare).toFixed(0)}% | ` +
    `${r.accounting.hotGflops.toFixed(1)} | ${r.accounting.hotPercentOfPeak.toFixed(0)}% | ${r.accounting.runPercentOfPeak.toFixed(0)}% | ` +
    `${r.phase === 'decode' ? r.accounting.matmulWeightGbps.toFixed(1) : '-'} | ${r.loadAverage[0].toFixed(1)} |`)
  return [head, ...body].join('\n')
}

// ---------------------------------------------------------------------------------------------

async function main (): Promise<void> {
  const opts = readOptions('bench-engine', () => parseOptions(process.argv.slice(2)))
  const threads = getKernelThreads()
  const startLoad = loadavg()
  console.log(`measuring the compute peak on ${threads} thread(s)...`)
  const peakStart = bestPeak(threads)
  const peak1Start = bestPeak(1)
  const copyStart = bestCopy(threads)
  console.log(`peak ${peakStart.toFixed(1)} GFLOP/s on ${threads} threads, ${peak1Start.toFixed(1)} on 1; copy ${copyStart.toFixed(1)} GB/s (load ${startLoad.map((l) => l.toFixed(1)).join(' ')})`)
  const rows: Row[] = []
  const models: Record<string, { dir: string, digest: string }> = {}
  for (const model of opts.models) {
    const dir = await checkpointFor(model, opts.cacheDir)
    models[model] = { dir, digest: await checkpointDigest(dir) }
    const ckpt = await loadCheckpoint(dir)
    const maxT = ckpt.config.maxPositionEmbeddings - 1
    for (const profile of profilesFor(model, opts)) {
      const t0 = performance.now()
      const engine = DeepseekV4Engine.fromCheckpoint(ckpt, profile)
      engine.prefill(promptTokens(256, ckpt.config.vocabSize, 1), engine.newCache(), { logits: 'last' }) // warm the JIT and the rope tables
      console.log(`${model} ${profile}: weights prepared and warmed in ${((performance.now() - t0) / 1000).toFixed(1)} s`)
      for (const T of opts.sizes) {
        if (T > maxT) {
          console.log(`  skipping T=${T}: T + 1 positions are more than ${model}'s max_position_embeddings`)
          continue
        }
        const c0 = performance.now()
        const caseRows = await benchCase(engine, model, profile, T, opts, meter, peakStart, copyStart)
        rows.push(...caseRows)
        console.log(`  T=${T}: prefill ${fmtRate(caseRows[0].tokensPerSecond)} tok/s, decode ${fmtRate(caseRows[1].tokensPerSecond)} tok/s ` +
          `(${((performance.now() - c0) / 1000).toFixed(1)} s, load ${loadavg()[0].toFixed(1)})`)
      }
    }
  }
  const peakEnd = bestPeak(threads)
  const peak1End = bestPeak(1)
  const copyEnd = bestCopy(threads)
  const peak = Math.max(peakStart, peakEnd)
  const copy = Math.max(copyStart, copyEnd)
  // Percentages against the best peak seen at either end (the closest to what the hardware can do).
  for (const r of rows) {
    r.accounting.hotPercentOfPeak = 100 * r.accounting.hotGflops / peak
    r.accounting.runPercentOfPeak = 100 * r.accounting.runGflops / peak
    r.accounting.matmulWeightPercentOfCopy = 100 * r.accounting.matmulWeightGbps / copy
  }
  console.log(`\npeak AVX2 mul+add (no FMA), best of ${2 * PEAK_RUNS}: ${peak.toFixed(1)} GFLOP/s on ${threads} threads (start ${peakStart.toFixed(1)}, end ${peakEnd.toFixed(1)}); ` +
    `1 thread ${Math.max(peak1Start, peak1End).toFixed(1)}; copy best of 6: ${copy.toFixed(1)} GB/s (start ${copyStart.toFixed(1)}, end ${copyEnd.toFixed(1)})`)
  console.table(tableRows(rows))
  console.log('\n' + markdown(rows))

  const date = new Date().toISOString().slice(0, 10)
  const outDir = fileURLToPath(new URL('../results/bench/', import.meta.url))
  mkdirSync(outDir, { recursive: true })
  // A second run the same day does not overwrite the first record.
  let file = `${outDir}engine-${date}.json`
  for (let i = 2; existsSync(file); i++) file = `${outDir}engine-${date}-${i}.json`
  const record = {
    protocol: 'bench-engine',
    date: new Date().toISOString(),
    machine: { cpu: cpus()[0]?.model ?? 'unknown', logicalCpus: cpus().length, node: process.version, note: opts.note, loadAverageStart: startLoad, loadAverageEnd: loadavg() },
    options: { models: opts.models, sizes: opts.sizes, profiles: opts.profiles ?? 'decoder (+ f32 for tiny)', decodeSteps: opts.decodeSteps, timeMs: opts.timeMs, shortSeconds: opts.shortSeconds },
    method: {
      prefill: `from an empty cache, logits of the last position; tinybench p50 (then a warm accounting run) when the first run took < ${opts.shortSeconds} s, else that one plain run`,
      decode: 'the token at position T on a fresh copy of the prefill cache per sample (copied outside the timed call), tinybench p50; accounted the same way over >= decodeSteps decodes and >= 300 ms',
      flops: 'counted per native call from its arguments: matmul 2mnk; attention 4HD per (query, key); indexer 2 Hi Di per visible (query, entry)',
      hotPercentOfPeak: 'counted FLOPs / time inside matmul + attention + indexer / peak',
      runPercentOfPeak: 'counted FLOPs / wall time of the accounting run / peak',
      matmulWeightGbps: 'matmul weight bytes read (4 or 2 per element) / time inside matmul; against a 256 MiB streaming copy',
    },
    kernelThreads: threads,
    peaks: { runs: 2 * PEAK_RUNS, gflops: peak, gflopsStart: peakStart, gflopsEnd: peakEnd, gflops1: Math.max(peak1Start, peak1End), copyGbps: copy, copyGbpsStart: copyStart, copyGbpsEnd: copyEnd },
    checkpoints: models,
    rows,
  }
  writeFileSync(file, JSON.stringify(record, null, 2) + '\n')
  console.log(`\nwrote ${file}`)
}

helpAndExit(`Usage: npx tsx protocols/bench-engine.ts [options]

Engine speed: prefill and decode tokens/s on the synthetic presets and the share of the measured
compute peak the hot kernels reach; prints a table and writes results/bench/engine-<date>.json.

  --models A,B           presets (default tiny,small)
  --sizes 1K,4K,16K      prompt lengths (default 1K,4K,16K)
  --profiles A,B         numerics profiles (default decoder, plus f32 for tiny)
  --decode-steps N       decodes accounted at least (default 8)
  --time-ms N            tinybench time per case (default 1500)
  --short-s N            a prefill shorter than this is re-timed with tinybench (default 2)
  --cache-dir DIR        where the checkpoints are made (default a folder in the temp directory)
  --note TEXT            kept in the output (default $PDB_BENCH_NOTE)
  -h, --help             this text (nothing is measured or written)
`)
const meter = new KernelMeter()
await main()
