// The bf16 matmul (lanes8) with the lane-major tiles against the earlier tiles (setLegacyMatmul),
// timed by the process's CPU time (user + system) as well as the wall clock (docs/BENCHMARK-PROTOCOL.md,
// "Matmul before/after"): on a machine shared with other jobs the wall clock of a call mostly counts
// the time it waited for a core, its CPU time only the work it did. The two kernels alternate call by
// call on the same inputs; per shape and thread count the median of --calls calls each (the first
// two of each dropped as warm-up). CPU time sums every thread's work, so at 2 threads it shows what a
// kernel costs, not how well it splits. With --compare exact-fma (version 2 of the record) the two legs
// are the decode tile with and without its fused steps for exact products (setExactProductFma, the
// same bits), on bf16 activations as the decoder feeds it. With --compare baseline --baseline FILE
// (version 3) the legs are two builds of the addon loaded side by side in this process: FILE (e.g.
// main's build, copied aside) and this checkout's, both at the same thread count. --distinct N gives
// each shape N different weight matrices, used in turn by both legs, so that with N x k x n x 2
// bytes beyond the last-level cache every call reads W from memory as a decode step does (version
// 3 records it; 1, the default, keeps one W that may stay in cache). One JSON record in --out;
// nothing is asserted.
//
//   npx tsx protocols/bench-matmul-cpu.ts [--shapes 16:4096:4096,...] [--threads 1,2] [--calls 20]
//                                         [--compare legacy|exact-fma|baseline] [--baseline FILE]
//                                         [--distinct N] [--note TEXT]
import { mkdir, writeFile } from 'node:fs/promises'
import { cpus, loadavg } from 'node:os'
import { basename, join, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'
import { parseArgs } from 'node:util'
import { loadNativeKernels } from '../src/kernels/native.ts'
import { f32ToBf16, roundBf16 } from '../src/numerics/bf16.ts'
import { filled } from './lib/bench-timing.ts'

const REPO = resolve(fileURLToPath(new URL('..', import.meta.url)))
const USAGE = `Usage: npx tsx protocols/bench-matmul-cpu.ts [options]

  --shapes L    m:k:n triples, comma-separated (default: m = 8, 16, 24, 32 at the largest W, and m = 16 at the others of bench-matmul.ts)
  --threads L   kernel thread counts, comma-separated (default 1,2)
  --calls N     calls per kernel, shape and thread count (default 20; the first two dropped)
  --compare C   legacy (default): lane-major against the earlier tiles; exact-fma: the decode tile
                with its fused exact-product steps against without them, x rounded to bf16;
                baseline: this checkout's addon against --baseline's, x rounded to bf16
  --baseline F  the other addon build (a .node file) for --compare baseline
  --distinct N  weight matrices per shape, used in turn (default 1; more than the last-level cache
                holds makes every call read W from memory)
  --out DIR     where the record goes (default results/kernels-compare)
  --note TEXT   kept in the record`
const { values: opts } = parseArgs({
  options: {
    shapes: { type: 'string', default: '16:256:256,16:1024:1024,16:4096:1024,16:1024:4096,8:4096:4096,16:4096:4096,24:4096:4096,32:4096:4096' },
    threads: { type: 'string', default: '1,2' }, calls: { type: 'string', default: '20' }, compare: { type: 'string', default: 'legacy' },
    out: { type: 'string', default: join(REPO, 'results', 'kernels-compare') }, note: { type: 'string', default: '' }, help: { type: 'boolean' },
    baseline: { type: 'string' }, distinct: { type: 'string', default: '1' },
  },
})
function usage (problem: string): never {
  process.stderr.write(`bench-matmul-cpu: ${problem}\n${USAGE}\n`)
  process.exit(2)
}
if (opts.help === true) {
  console.log(USAGE)
  process.exit(0)
}
const int = (flag: string, s: string, min: number): number => {
  if (!/^\d{1,6}$/.test(s.trim()) || Number(s) < min) usage(`--${flag}: ${JSON.stringify(s)} is not an integer >= ${min}`)
  return Number(s)
}
const shapes = opts.shapes.split(',').map((s) => {
  const parts = s.split(':')
  if (parts.length !== 3) usage(`--shapes: ${JSON.stringify(s)} is not m:k:n`)
  return parts.map((p) => int('shapes', p, 1)) as [number, number, number]
})
const threadCounts = opts.threads.split(',').map((s) => int('threads', s, 1))
const calls = int('calls', opts.calls, 3)

if (!['legacy', 'exact-fma', 'baseline'].includes(opts.compare)) usage(`--compare: ${JSON.stringify(opts.compare)} is not legacy, exact-fma or baseline`)
if ((opts.compare === 'baseline') !== (opts.baseline !== undefined)) usage('--baseline FILE goes with --compare baseline, and only with it')
const distinct = int('distinct', opts.distinct, 1)
const exactFma = opts.compare === 'exact-fma'
const againstBaseline = opts.compare === 'baseline'
const bf16X = exactFma || againstBaseline
const addon = loadNativeKernels()
// The old leg's kernels: another build (its own module instance and thread pool), or this one toggled.
const baselineAddon = againstBaseline ? loadNativeKernels(resolve(opts.baseline!)) : undefined
if (!againstBaseline && (addon.setLegacyMatmul === undefined || addon.setExactProductFma === undefined)) usage('this addon build has no setLegacyMatmul or setExactProductFma: run npm run build:native')
const toggle = exactFma ? (old: boolean) => addon.setExactProductFma!(!old) : againstBaseline ? () => {} : addon.setLegacyMatmul!
const kernelsOf = (leg: 'lane-major' | 'earlier') => leg === 'earlier' && baselineAddon !== undefined ? baselineAddon : addon
const NAMES = exactFma ? { now: 'fused', old: 'unfused' } : againstBaseline ? { now: 'this_build', old: 'baseline' } : { now: 'lane_major', old: 'earlier' }
const LANES8 = 0
const median = (xs: number[]): number => {
  const s = [...xs].sort((a, b) => a - b)
  return s.length % 2 === 1 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2
}
// Each shape's weight matrices, made once for every thread count (bf16 codes of seeded values).
const weights = new Map<string, Uint16Array[]>()
function weightsOf (k: number, n: number): Uint16Array[] {
  const key = `${k}x${n}`
  let ws = weights.get(key)
  if (ws === undefined) {
    ws = Array.from({ length: distinct }, (_, d) => {
      const v = filled(n * k, 2 + d), codes = new Uint16Array(n * k)
      for (let i = 0; i < codes.length; i++) codes[i] = f32ToBf16(v[i])
      return codes
    })
    weights.set(key, ws)
  }
  return ws
}
const startedAt = new Date().toISOString()
let callsMade = 0
const loadBefore = loadavg()
const rows: unknown[] = []
for (const threads of threadCounts) {
  addon.setThreads(threads)
  baselineAddon?.setThreads(threads)
  for (const [m, k, n] of shapes) {
    const x = filled(m * k, 1)
    if (bf16X) for (let i = 0; i < x.length; i++) x[i] = roundBf16(x[i])
    const ws = weightsOf(k, n)
    const out = new Float32Array(m * n)
    const legs = { 'lane-major': { cpu: [] as number[], wall: [] as number[] }, earlier: { cpu: [] as number[], wall: [] as number[] } }
    for (let c = 0; c < calls; c++) {
      for (const leg of c % 2 === 0 ? ['lane-major', 'earlier'] as const : ['earlier', 'lane-major'] as const) {
        toggle(leg === 'earlier')
        const kernels = kernelsOf(leg), w = ws[callsMade++ % distinct]   // never the W the last call just read
        const c0 = process.cpuUsage(), w0 = performance.now()
        kernels.matmulBf16(x, m, k, w, n, out, false, LANES8)
        const wall = performance.now() - w0, u = process.cpuUsage(c0)
        if (c >= 2) {
          legs[leg].cpu.push((u.user + u.system) / 1000)
          legs[leg].wall.push(wall)
        }
      }
    }
    toggle(false)
    const row = {
      shape: `m=${m} k=${k} n=${n}`, threads,
      [NAMES.now]: { cpu_ms_median: median(legs['lane-major'].cpu), wall_ms_median: median(legs['lane-major'].wall) },
      [NAMES.old]: { cpu_ms_median: median(legs.earlier.cpu), wall_ms_median: median(legs.earlier.wall) },
      speedup_cpu: median(legs.earlier.cpu) / median(legs['lane-major'].cpu),
      speedup_wall: median(legs.earlier.wall) / median(legs['lane-major'].wall),
    }
    rows.push(row)
    console.log(`${row.shape} threads=${threads}: ${NAMES.now} over ${NAMES.old} ${row.speedup_cpu.toFixed(2)}x by CPU time, ${row.speedup_wall.toFixed(2)}x by the wall clock`)
  }
}
const record = {
  kind: 'matmul-cpu-time', version: againstBaseline || distinct > 1 ? 3 : exactFma ? 2 : 1, at: startedAt, note: opts.note, compare: opts.compare,
  ...(againstBaseline ? { baseline: basename(opts.baseline!) } : {}), distinct,
  machine: { cpu: cpus()[0]?.model.trim() ?? 'unknown', cores: cpus().length, node: process.version, isa: addon.isa, kernel_pool: addon.threadPool },
  load_average: { before: loadBefore.map((v) => Number(v.toFixed(2))), after: loadavg().map((v) => Number(v.toFixed(2))) },
  settings: { calls, dropped: 2, x: bf16X ? 'rounded to bf16' : 'float32', order: 'the two kernels alternate call by call, the first of each pair swapped every call', clock: 'process.cpuUsage (user + system) and performance.now around each call' },
  rows,
}
await mkdir(opts.out, { recursive: true })
const file = join(opts.out, `${startedAt.replace(/[:.]/g, '-')}-matmul-cpu${exactFma ? '-exact-fma' : againstBaseline ? '-baseline' : ''}.json`)
await writeFile(file, `${JSON.stringify(record, null, 2)}\n`)
console.log(JSON.stringify({ record: file }))
