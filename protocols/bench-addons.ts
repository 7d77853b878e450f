// Two builds of the native kernels side by side in one process (docs/BENCHMARK-PROTOCOL.md, "Addon
// comparison"): the decoder's kernel calls at prefill and decode shapes, each timed with tinybench on
// a baseline addon (e.g. main's build, copied aside) and on this checkout's, at each thread count,
// alternating, plus each kernel's share of a real prefill of `--model` (a CPU profile of the engine
// in this process: the time inside each addon entry point). Nothing is asserted; one JSON record in --out.
//
//   npx tsx protocols/bench-addons.ts --baseline FILE.node --model DIR [--threads 1,2] [--tokens 512] [--time-ms 300]
import { mkdir, writeFile } from 'node:fs/promises'
import { cpus, loadavg, totalmem } from 'node:os'
import { join, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'
import { parseArgs } from 'node:util'
import { Bench } from 'tinybench'
import { DEFAULT_ADDON_PATH, loadNativeKernels, type NativeKernels } from '../src/kernels/native.ts'
import { DeepseekV4Engine } from '../src/model/engine/index.ts'
import { f32ToBf16 } from '../src/numerics/bf16.ts'
import { clockKernels, type KernelClock } from './lib/kernel-clock.ts'

const REPO = resolve(fileURLToPath(new URL('..', import.meta.url)))
const USAGE = `Usage: npx tsx protocols/bench-addons.ts --baseline FILE.node --model DIR [options]

  --baseline FILE   the addon to compare against (a pdb_kernels.node of the same ABI version)
  --model DIR       checkpoint whose prefill gives each kernel's share (profile decoder)
  --threads L       thread counts, comma-separated (default 1,2)
  --tokens N        prefill length for the shares (default 512)
  --time-ms N       tinybench time per case (default 300)
  --out DIR         where the record goes (default results/kernels-compare)
  --note TEXT       kept in the record`

const { values: opts } = parseArgs({
  options: {
    baseline: { type: 'string' }, model: { type: 'string' }, threads: { type: 'string', default: '1,2' }, tokens: { type: 'string', default: '512' },
    'time-ms': { type: 'string', default: '300' }, out: { type: 'string', default: join(REPO, 'results', 'kernels-compare') }, note: { type: 'string', default: '' },
    help: { type: 'boolean' },
  },
})
if (opts.help === true || opts.baseline === undefined || opts.model === undefined) {
  console.log(USAGE)
  process.exit(opts.help === true ? 0 : 2)
}
const threadCounts = opts.threads.split(',').map(Number)
const tokens = Number(opts.tokens)
const timeMs = Number(opts['time-ms'])
if (threadCounts.some((t) => !Number.isInteger(t) || t < 1) || !Number.isInteger(tokens) || tokens < 1 || !Number.isInteger(timeMs) || timeMs < 1) {
  console.error(`bench-addons: --threads, --tokens and --time-ms take positive integers\n${USAGE}`)
  process.exit(2)
}

const builds: Array<{ name: string, path: string, addon: NativeKernels }> = [
  { name: 'baseline', path: resolve(opts.baseline), addon: loadNativeKernels(resolve(opts.baseline)) },
  { name: 'this checkout', path: DEFAULT_ADDON_PATH, addon: loadNativeKernels() },
]

function filled (n: number, seed: number, scale = 1): Float32Array {
  const out = new Float32Array(n)
  let s = seed >>> 0
  for (let i = 0; i < n; i++) {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0
    out[i] = (s / 4294967296 - 0.5) * 2 * scale
  }
  return out
}

// 1. Each kernel's share of a real prefill, on this checkout's addon (lib/kernel-clock.ts).
const engine = await DeepseekV4Engine.load(opts.model, 'decoder')
const vocab = engine.config.vocabSize
const prompt = Array.from({ length: tokens }, (_, i) => 2 + ((i * 7919 + 13) % (vocab - 3)))
engine.prefill(prompt.slice(0, 16), engine.newCache())
const shares: Record<string, KernelClock> = {}
for (const threads of threadCounts) {
  builds[1].addon.setThreads(threads)
  const clock = clockKernels(builds[1].addon, () => { engine.prefill(prompt, engine.newCache(), { logits: 'last' }) })
  shares[`${threads}`] = clock
  console.error(`bench-addons: ${tokens}-token prefill on ${threads} thread(s): ${clock.wallMs.toFixed(0)} ms; ${Object.entries(clock.kernels).slice(0, 7).map(([k, v]) => `${k} ${(100 * v.share).toFixed(1)}%`).join(', ')}`)
}

// 2. The kernels at the model's own shapes (and a decode batch of 8), each build in turn.
const cfg = engine.config
const hidden = cfg.hiddenSize
const qLora = cfg.qLoraRank
const heads = cfg.numAttentionHeads
const d = cfg.headDim
const cases: Array<{ kernel: string, shape: string, flops: number, run: (a: NativeKernels) => void }> = []
for (const m of [1, 8, 128]) {
  for (const [k, n] of [[hidden, qLora], [qLora, heads * d], [hidden, cfg.moeIntermediateSize * 2]] as const) {
    const x = filled(m * k, 1)
    const w = Uint16Array.from(filled(n * k, 2, 0.05), (v) => f32ToBf16(v))
    const out = new Float32Array(m * n)
    cases.push({ kernel: 'matmulBf16', shape: `m=${m} k=${k} n=${n}`, flops: 2 * m * k * n, run: (a) => { a.matmulBf16(x, m, k, w, n, out, false, 0) } })
  }
}
for (const n of [1, 128]) {
  const hc = cfg.hcMult
  const h = filled(n * hc * hidden, 3)
  const post = filled(n * hc, 4)
  const comb = filled(n * hc * hc, 5)
  const sub = filled(n * hidden, 6)
  const out = new Float32Array(n * hc * hidden)
  cases.push({ kernel: 'hcPost', shape: `n=${n} hc=${hc} hidden=${hidden}`, flops: 0, run: (a) => { a.hcPost(h, n, post, comb, sub, hc, hidden, true, out) } })
}
for (const [label, t, keysPer] of [['decode', 1, 640], ['prefill', 128, 128]] as const) {
  const n = Math.max(t, keysPer)
  const offsets = new Int32Array(t + 1)
  const keyList: number[] = []
  for (let i = 0; i < t; i++) {
    const last = label === 'prefill' ? i : n - 1
    for (let j = Math.max(0, last - keysPer + 1); j <= last; j++) keyList.push(j)
    offsets[i + 1] = keyList.length
  }
  const keys = Int32Array.from(keyList)
  const q = filled(t * heads * d, 7)
  const kv = filled(n * d, 8)
  const sinks = filled(heads, 9)
  const out = new Float32Array(t * heads * d)
  cases.push({ kernel: 'attentionMqa', shape: `${label} T=${t} H=${heads} D=${d} keys/query<=${keysPer}`, flops: 4 * keys.length * heads * d, run: (a) => { a.attentionMqa(q, t, heads, d, kv, n, offsets, keys, sinks, 1 / Math.sqrt(d), 7, out) } })
}

const rows: Array<Record<string, unknown>> = []
for (const c of cases) {
  for (const threads of threadCounts) {
    const p50: Record<string, number> = {}
    for (const b of builds) {
      b.addon.setThreads(threads)
      const bench = new Bench({ time: timeMs, warmupTime: 50 })
      bench.add(c.kernel, () => c.run(b.addon))
      await bench.run()
      const r = bench.tasks[0].result
      if (r.state !== 'completed') throw new Error(`${c.kernel} ${c.shape} on ${b.name} ended as ${r.state}`)
      p50[b.name] = r.latency.p50
    }
    const row = {
      kernel: c.kernel, shape: c.shape, threads,
      baseline_p50_ms: p50.baseline, p50_ms: p50['this checkout'],
      speedup: p50.baseline / p50['this checkout'],
      gflops: c.flops > 0 ? c.flops / (p50['this checkout'] / 1000) / 1e9 : null,
    }
    rows.push(row)
    console.error(`bench-addons: ${c.kernel} ${c.shape} ${threads}t: ${row.baseline_p50_ms.toFixed(4)} -> ${row.p50_ms.toFixed(4)} ms (${row.speedup.toFixed(2)}x)`)
  }
}

const at = new Date().toISOString()
const record = {
  kind: 'kernels-compare', version: 1, at, note: opts.note,
  machine: { cpu: cpus()[0]?.model ?? 'unknown', cores: cpus().length, total_memory: totalmem(), node: process.version, isa: builds[1].addon.isa, kernel_pool: builds.map((b) => b.addon.threadPool ?? null) },
  load_average: loadavg(),
  builds: builds.map((b) => ({ name: b.name, file: b.path.startsWith(REPO) ? b.path.slice(REPO.length + 1) : 'outside the checkout' })),
  model: { dir_name: opts.model.split('/').filter(Boolean).at(-1), hidden, layers: cfg.numHiddenLayers, prefill_tokens: tokens, profile: 'decoder' },
  settings: { threads: threadCounts, time_ms: timeMs, rate_from: 'tinybench p50 latency', share_from: 'time inside each addon entry point during one prefill (a clock around every call) over the prefill wall time' },
  prefill_shares: shares,
  rows,
}
await mkdir(opts.out, { recursive: true })
const file = join(opts.out, `${at.replace(/[:.]/g, '-')}-addons.json`)
await writeFile(file, JSON.stringify(record, null, 2) + '\n')
console.log(file)
