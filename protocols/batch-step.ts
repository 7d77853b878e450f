// Where a batched decode step's time goes (docs/BENCHMARK-PROTOCOL.md, "Batched decode"): the
// engine in this process, B sequences with their own prompt in their own cache, one decodeBatch step
// of all of them at a time (the step the decoder's batcher runs), B levels interleaved over the
// repeats so a busy machine slows every level alike. Per level: step time (min and median),
// tokens/s, throughput over one sequence's (median and best steps), and a step's mean time inside
// each kernel over --repeats more steps (lib/kernel-clock.ts), and (version 3) the bf16 matmul's time
// per weight shape over --repeats more (which projections grow with the batch, at what mean rows per
// call). With --compare-decode-tile (version 4) every timed step is followed by one with the
// matmul's decode tile off (setDecodeTile(false): the kernels before it, the same bits), so each
// level also reports the step before the tile, measured in the same run. With --compare-exact-fma
// (version 5) the second step runs the decode tile without its fused exact-product steps
// (setExactProductFma(false), the same bits; docs/kernels.md "Decode tile"), reported as
// before_exact_fma. With --compare-grouped (version 6) the second step runs the MoE
// experts and the attention's o_a groups as one matmul call each with TypeScript between, instead
// of the native moeExperts and one matmulBf16Grouped (setGroupedKernels(false), the same bits),
// reported as before_grouped; the matmul by shape counts matmuls in `calls` and addon calls in
// `entryCalls` (the experts' matmuls inside moeExperts are not in it). Every timed step also records its process CPU time (user + system, all
// threads: on a loaded machine the wall clock mostly counts waits for a core). With --chunk N the
// record also has `chunk`: a joining request's prefill of N tokens (the piece of engine work the
// decoder's batcher runs between steps) onto a cache holding --prompt tokens, --repeats times, its
// wall and CPU time and where its time goes (kernel clock, matmul by shape). One JSON record in
// --out; nothing is asserted.
//
//   npx tsx protocols/batch-step.ts --model DIR [--levels 1,2,4,8] [--prompt 64] [--repeats 8] [--threads N]
//                                   [--compare-decode-tile | --compare-exact-fma | --compare-grouped] [--chunk N]
import { mkdir, writeFile } from 'node:fs/promises'
import { cpus, loadavg } from 'node:os'
import { join, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'
import { parseArgs } from 'node:util'
import { loadNativeKernels } from '../src/kernels/native.ts'
import { DeepseekV4Engine, type ModelCache } from '../src/model/engine/index.ts'
import { setGroupedKernels } from '../src/model/engine/grouping.ts'
import { clockKernels, clockMatmulShapes, type KernelClock, type MatmulShape } from './lib/kernel-clock.ts'
import { gitCommit } from '../verify/results/environment.ts'

const REPO = resolve(fileURLToPath(new URL('..', import.meta.url)))
const USAGE = `Usage: npx tsx protocols/batch-step.ts --model DIR [options]

  --model DIR     checkpoint directory (profile decoder)
  --levels L      batch sizes, comma-separated (default 1,2,4,8)
  --prompt N      prompt tokens per sequence before the steps (default 64)
  --repeats N     timed steps per level, levels interleaved (default 8)
  --threads N     kernel threads (default: PD_KERNEL_THREADS, else the machine's cores)
  --compare-decode-tile  also time each step with the decode tile off, interleaved (the before figures)
  --compare-exact-fma    also time each step without the decode tile's fused exact-product steps, interleaved
  --compare-grouped  also time each step with the MoE experts and the attention's o_a groups as one matmul call each (TypeScript between), interleaved
  --chunk N       also time a prefill chunk of N tokens onto a cache of --prompt tokens (a joining request's)
  --out DIR       where the record goes (default results/batch)
  --note TEXT     kept in the record`

const { values: opts } = parseArgs({
  options: {
    model: { type: 'string' }, levels: { type: 'string', default: '1,2,4,8' }, prompt: { type: 'string', default: '64' },
    repeats: { type: 'string', default: '8' }, threads: { type: 'string' }, out: { type: 'string', default: join(REPO, 'results', 'batch') },
    note: { type: 'string', default: '' }, 'compare-decode-tile': { type: 'boolean', default: false },
    'compare-exact-fma': { type: 'boolean', default: false }, 'compare-grouped': { type: 'boolean', default: false }, chunk: { type: 'string', default: '0' }, help: { type: 'boolean' },
  },
})
if (opts.help === true || opts.model === undefined) {
  console.log(USAGE)
  process.exit(opts.help === true ? 0 : 2)
}
const levels = opts.levels.split(',').map(Number)
const promptTokens = Number(opts.prompt)
const repeats = Number(opts.repeats)
const chunkTokens = Number(opts.chunk)
const addon = loadNativeKernels()
if (opts.threads !== undefined) addon.setThreads(Number(opts.threads))
if ([...levels, promptTokens, repeats, addon.getThreads()].some((v) => !Number.isInteger(v) || v < 1)) {
  console.error(`batch-step: --levels, --prompt, --repeats and --threads take positive integers\n${USAGE}`)
  process.exit(2)
}
if (!Number.isInteger(chunkTokens) || chunkTokens < 0) {
  console.error(`batch-step: --chunk takes a token count (0: no chunk), got ${JSON.stringify(opts.chunk)}\n${USAGE}`)
  process.exit(2)
}

const compareTile = opts['compare-decode-tile'] === true
const compareFma = opts['compare-exact-fma'] === true
const compareNative = opts['compare-grouped'] === true
const compare = compareTile || compareFma || compareNative
if ([compareTile, compareFma, compareNative].filter(Boolean).length > 1) {
  console.error(`batch-step: --compare-decode-tile, --compare-exact-fma and --compare-grouped compare one change at a time\n${USAGE}`)
  process.exit(2)
}
if ((compareTile && addon.setDecodeTile === undefined) || (compareFma && addon.setExactProductFma === undefined)) {
  console.error('batch-step: this addon build has no setDecodeTile or setExactProductFma: run npm run build:native')
  process.exit(2)
}
/** The compared change on (true) or off; without a --compare flag nothing is touched. */
const setCompared = (on: boolean): void => {
  if (compareTile) addon.setDecodeTile!(on)
  if (compareFma) addon.setExactProductFma!(on)
  if (compareNative) setGroupedKernels(on)
}
const beforeField = compareFma ? 'before_exact_fma' : compareNative ? 'before_grouped' : 'before_decode_tile'

const engine = await DeepseekV4Engine.load(opts.model, 'decoder')
const vocab = engine.config.vocabSize
const widest = Math.max(...levels)
const prompt = (i: number): number[] => Array.from({ length: promptTokens }, (_, t) => 2 + ((i * 104729 + t * 7919 + 17) % (vocab - 3)))
/** Fresh caches for a level: sequence i holds prompt(i) (made outside the timed steps). */
function caches (b: number): ModelCache[] {
  return Array.from({ length: b }, (_, i) => {
    const c = engine.newCache()
    engine.prefill(prompt(i), c, { logits: 'none' })
    return c
  })
}
const tokensFor = (b: number): number[] => Array.from({ length: b }, (_, i) => 2 + (i * 31) % (vocab - 3))

const byLevel = new Map(levels.map((b) => [b, { caches: caches(b), ms: [] as number[], beforeMs: [] as number[], cpuMs: [] as number[], beforeCpuMs: [] as number[] }]))
for (const b of levels) engine.decodeBatch(tokensFor(b), byLevel.get(b)!.caches) // warm: first-call costs
for (let r = 0; r < repeats; r++) {
  for (const b of levels) {
    const level = byLevel.get(b)!
    for (const on of compare ? [true, false] : [true]) {
      setCompared(on)
      const t0 = performance.now(), c0 = process.cpuUsage()
      engine.decodeBatch(tokensFor(b), level.caches)
      const cpu = process.cpuUsage(c0)
      ;(on ? level.ms : level.beforeMs).push(performance.now() - t0)
      ;(on ? level.cpuMs : level.beforeCpuMs).push((cpu.user + cpu.system) / 1000)
    }
  }
}
setCompared(true)
/** A kernel clock over --repeats pieces of work, as one piece's mean. */
const perRepeat = (all: KernelClock): KernelClock => ({
  wallMs: all.wallMs / repeats,
  kernels: Object.fromEntries(Object.entries(all.kernels).map(([k, v]) => [k, { ms: v.ms / repeats, calls: v.calls / repeats, share: v.share }])),
})
/** The matmul by shape over --repeats pieces of work, as one piece's mean. */
const shapesPerRepeat = (all: MatmulShape[]): MatmulShape[] =>
  all.map((s) => ({ ...s, calls: s.calls / repeats, entryCalls: s.entryCalls / repeats, ms: s.ms / repeats, weightMiB: s.weightMiB / repeats }))
/** The five kernels a piece of work spent most in, for the log. */
const topKernels = (clock: KernelClock): string => Object.entries(clock.kernels).slice(0, 5).map(([k, v]) => `${k} ${v.ms.toFixed(1)} ms`).join(', ')

// The kernel clock over --repeats steps per level, reported per step: one step on a loaded machine
// is mostly the time the process waited for a core.
const clocks = new Map<number, KernelClock>()
for (const b of levels) {
  const level = byLevel.get(b)!
  clocks.set(b, perRepeat(clockKernels(addon, () => { for (let r = 0; r < repeats; r++) engine.decodeBatch(tokensFor(b), level.caches) })))
}

// The bf16 matmul per weight shape over --repeats more steps, reported per step.
const shapes = new Map<number, MatmulShape[]>()
for (const b of levels) {
  const level = byLevel.get(b)!
  shapes.set(b, shapesPerRepeat(clockMatmulShapes(addon, () => { for (let r = 0; r < repeats; r++) engine.decodeBatch(tokensFor(b), level.caches) })))
}

const median = (xs: number[]): number => {
  const s = [...xs].sort((a, c) => a - c)
  return s.length % 2 === 1 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2
}
const one = byLevel.get(Math.min(...levels))!
/** The step with the compared change off, interleaved with the timed steps above (versions 4 to 6). */
function beforeLeg (b: number): Record<string, number> | undefined {
  if (!compare) return undefined
  const ms = byLevel.get(b)!.beforeMs
  return {
    step_ms_min: Math.min(...ms), step_ms_median: median(ms), tokens_per_s_median: b * 1000 / median(ms),
    step_cpu_ms_median: median(byLevel.get(b)!.beforeCpuMs),
    /** Median CPU time of a step before over the median with. */
    cpu_speedup_median: median(byLevel.get(b)!.beforeCpuMs) / median(byLevel.get(b)!.cpuMs),
    throughput_vs_smallest_median: (b / median(ms)) / (Math.min(...levels) / median(one.beforeMs)),
    throughput_vs_smallest_best: (b / Math.min(...ms)) / (Math.min(...levels) / Math.min(...one.beforeMs)),
    /** Median step before the tile over the median step with it. */
    tile_speedup_median: median(ms) / median(byLevel.get(b)!.ms),
  }
}
const rows = levels.map((b) => {
  const ms = byLevel.get(b)!.ms
  const before = beforeLeg(b)
  const row = {
    batch: b, step_ms_min: Math.min(...ms), step_ms_median: median(ms), step_cpu_ms_median: median(byLevel.get(b)!.cpuMs),
    tokens_per_s_best: b * 1000 / Math.min(...ms), tokens_per_s_median: b * 1000 / median(ms),
    throughput_vs_smallest_median: (b / median(ms)) / (Math.min(...levels) / median(one.ms)),
    // Best steps: the least disturbed by other jobs on a shared machine.
    throughput_vs_smallest_best: (b / Math.min(...ms)) / (Math.min(...levels) / Math.min(...one.ms)),
    /** Mean per step over --repeats clocked steps (calls per step likewise). */
    one_step_inside_kernels: clocks.get(b)!,
    /** Mean per step over --repeats more steps: the bf16 matmul per weight shape k x n (calls, mean rows per call, ms, MiB of W read). */
    one_step_matmul_bf16_by_shape: shapes.get(b)!,
    [beforeField]: before,
  }
  const top = topKernels(row.one_step_inside_kernels)
  const bigShapes = row.one_step_matmul_bf16_by_shape.slice(0, 4).map((s) => `${s.shape} m=${s.meanRows.toFixed(1)} ${s.ms.toFixed(1)} ms`).join(', ')
  console.error(`batch-step: B=${b}: bf16 matmul by shape: ${bigShapes}`)
  console.error(`batch-step: B=${b}: step ${row.step_ms_median.toFixed(1)} ms median (${row.step_ms_min.toFixed(1)} min), ${row.tokens_per_s_median.toFixed(1)} tok/s, ${row.throughput_vs_smallest_median.toFixed(2)}x (best ${row.throughput_vs_smallest_best.toFixed(2)}x); ${top}`)
  if (before !== undefined) console.error(`batch-step: B=${b}: before (${beforeField}) ${before.step_ms_median.toFixed(1)} ms median (${before.step_ms_min.toFixed(1)} min), ${before.throughput_vs_smallest_median.toFixed(2)}x (best ${before.throughput_vs_smallest_best.toFixed(2)}x); now ${before.tile_speedup_median.toFixed(2)}x faster by the wall clock, ${before.cpu_speedup_median.toFixed(2)}x by CPU time`)
  return row
})
/**
 * A joining request's prefill chunk (--chunk N tokens onto a cache of --prompt tokens, the last
 * token's logits): --repeats timed, then --repeats under the kernel clock and --repeats by matmul
 * shape, each onto a cache of its own made outside the clock. Per chunk, as the steps are per step.
 */
function measureChunk (): Record<string, unknown> | undefined {
  if (chunkTokens === 0) return undefined
  const joining = (i: number): number[] => Array.from({ length: chunkTokens }, (_, t) => 2 + ((i * 7727 + t * 104723 + 5) % (vocab - 3)))
  const held = (n: number): ModelCache[] => Array.from({ length: n }, (_, i) => {
    const c = engine.newCache()
    engine.prefill(prompt(1000 + i), c, { logits: 'none' })
    return c
  })
  engine.prefill(joining(0), held(1)[0], { logits: 'last' })  // warm: first-call costs
  const ms: number[] = [], cpuMs: number[] = []
  held(repeats).forEach((c, r) => {
    const t0 = performance.now(), c0 = process.cpuUsage()
    engine.prefill(joining(r + 1), c, { logits: 'last' })
    const cpu = process.cpuUsage(c0)
    ms.push(performance.now() - t0)
    cpuMs.push((cpu.user + cpu.system) / 1000)
  })
  const clocked = held(repeats)
  const inside = perRepeat(clockKernels(addon, () => { clocked.forEach((c, r) => engine.prefill(joining(r + 1), c, { logits: 'last' })) }))
  const shaped = held(repeats)
  const byShape = shapesPerRepeat(clockMatmulShapes(addon, () => { shaped.forEach((c, r) => engine.prefill(joining(r + 1), c, { logits: 'last' })) }))
  console.error(`batch-step: chunk of ${chunkTokens} onto ${promptTokens}: ${median(ms).toFixed(1)} ms median (${Math.min(...ms).toFixed(1)} min), CPU ${median(cpuMs).toFixed(1)} ms; ${topKernels(inside)}`)
  return {
    tokens: chunkTokens, onto_tokens: promptTokens, ms_min: Math.min(...ms), ms_median: median(ms), cpu_ms_median: median(cpuMs),
    /** Mean per chunk over --repeats clocked chunks. */
    one_chunk_inside_kernels: inside,
    /** Mean per chunk over --repeats more: the bf16 matmul per weight shape. */
    one_chunk_matmul_bf16_by_shape: byShape,
  }
}
const chunk = measureChunk()

const at = new Date().toISOString()
const cfg = engine.config
const record = {
  kind: 'batch-step', version: compareNative ? 6 : compareFma ? 5 : compareTile ? 4 : 3, at, note: opts.note, commit: gitCommit(REPO),
  machine: { cpu: cpus()[0]?.model ?? 'unknown', cores: cpus().length, threads: addon.getThreads(), kernel_pool: addon.threadPool ?? null, isa: addon.isa, node: process.version },
  load_average: loadavg(),
  model: { dir_name: opts.model.split('/').filter(Boolean).at(-1), hidden_size: cfg.hiddenSize, layers: cfg.numHiddenLayers, experts: cfg.nRoutedExperts, experts_per_token: cfg.numExpertsPerTok, profile: 'decoder' },
  settings: { levels, prompt_tokens: promptTokens, repeats, widest, compare_decode_tile: compareTile, compare_exact_fma: compareFma, chunk_tokens: chunkTokens },
  levels: rows,
  chunk,
}
await mkdir(opts.out, { recursive: true })
const file = join(opts.out, `batch-step-${at.replace(/[:.]/g, '-')}.json`)
await writeFile(file, JSON.stringify(record, null, 2) + '\n')
console.log(file)
