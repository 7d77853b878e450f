// Our engine in two checkouts side by side (docs/BENCHMARK-PROTOCOL.md, "Engine before/after"): a
// prefill of --tokens and --decode greedy decode steps on the preset's checkpoint, each run in a
// child process of its own that imports the engine and the addon from one tree (e.g. the branch
// point unpacked with its own addon build, against this checkout), at each thread count, the trees
// alternating per repeat so a busy machine slows both alike. Per run: wall time and the process's
// CPU time (user + system) of the prefill and of the decode steps, the time inside each kernel
// during the prefill (lib/kernel-clock.ts), and a digest of the prefill's last logits and of the
// greedy tokens: the trees must agree bit for bit. One JSON record in --out; nothing is asserted.
//
//   npx tsx protocols/decoder-scaling/engine-ab.ts --baseline-tree DIR --state-dir DIR [--threads 1,2] [--tokens 1024] [--decode 32] [--repeats 2]
import { spawn } from 'node:child_process'
import { createHash } from 'node:crypto'
import { mkdir, writeFile } from 'node:fs/promises'
import { cpus, loadavg } from 'node:os'
import { join, resolve } from 'node:path'
import { fileURLToPath, pathToFileURL } from 'node:url'
import { parseArgs } from 'node:util'
import { clockKernels } from '../lib/kernel-clock.ts'

const REPO = resolve(fileURLToPath(new URL('../..', import.meta.url)))
const USAGE = `Usage: npx tsx protocols/decoder-scaling/engine-ab.ts --baseline-tree DIR --state-dir DIR [options]

  --baseline-tree DIR  a checkout with its addon built (native/build/Release) to compare against
  --state-dir DIR      where the checkpoint is made or reused (models/)
  --preset NAME        checkpoint preset (default flash-attn)
  --threads L          kernel threads, comma-separated (default 1,2)
  --tokens N           prompt tokens (default 1024)
  --decode N           greedy decode steps after the prefill (default 32)
  --repeats N          runs per tree and thread count, trees alternating (default 2)
  --pool on|off        PD_KERNEL_POOL for every run (default: unset, the addon's own default)
  --out DIR            where the record goes (default results/decoder-scaling)
  --note TEXT          kept in the record`

const { values: opts } = parseArgs({
  options: {
    'baseline-tree': { type: 'string' }, 'state-dir': { type: 'string' }, preset: { type: 'string', default: 'flash-attn' },
    threads: { type: 'string', default: '1,2' }, tokens: { type: 'string', default: '1024' }, decode: { type: 'string', default: '32' },
    repeats: { type: 'string', default: '2' }, pool: { type: 'string' }, out: { type: 'string', default: join(REPO, 'results', 'decoder-scaling') },
    note: { type: 'string', default: '' }, child: { type: 'string' }, model: { type: 'string' }, help: { type: 'boolean' },
  },
})

function usage (problem: string): never {
  process.stderr.write(`engine-ab: ${problem}\n${USAGE}\n`)
  process.exit(2)
}
const positive = (flag: string, s: string): number => {
  if (!/^\d{1,7}$/.test(s.trim()) || Number(s) < 1) usage(`--${flag}: ${JSON.stringify(s)} is not a positive integer`)
  return Number(s)
}

/** What one child measured. */
interface RunResult {
  prefill_ms: number, prefill_cpu_ms: number, decode_ms: number, decode_cpu_ms: number,
  prefill_kernels: Record<string, { ms: number, calls: number, share: number }>, logits_sha256: string, tokens_sha256: string,
}

const cpuMs = (since: NodeJS.CpuUsage): number => { const u = process.cpuUsage(since); return (u.user + u.system) / 1000 }
const sha = (a: ArrayBufferView): string => createHash('sha256').update(new Uint8Array(a.buffer, a.byteOffset, a.byteLength)).digest('hex')

/** The child: one tree's engine, one warm-up, one timed prefill and the decode steps; one JSON line on stdout. */
async function child (tree: string, model: string, tokens: number, decode: number): Promise<void> {
  const engineModule = await import(pathToFileURL(join(tree, 'src/model/engine/index.ts')).href) as typeof import('../../src/model/engine/index.ts')
  const nativeModule = await import(pathToFileURL(join(tree, 'src/kernels/native.ts')).href) as typeof import('../../src/kernels/native.ts')
  const embedded = await import(pathToFileURL(join(tree, 'src/stack/embedded.ts')).href) as typeof import('../../src/stack/embedded.ts')
  const addon = nativeModule.loadNativeKernels()
  const engine = await engineModule.DeepseekV4Engine.load(model, embedded.EMBEDDED_DECODER_PROFILE)
  const vocab = engine.config.vocabSize
  const ids = Array.from({ length: tokens }, (_, t) => 2 + ((t * 7919 + tokens * 104729 + 17) % (vocab - 3)))
  engine.prefill(ids.slice(0, 64), engine.newCache(), { logits: 'last' }) // warm: the JIT and first-call costs
  const cache = engine.newCache()
  let logits: Float32Array = new Float32Array(0)
  const c0 = process.cpuUsage()
  const clock = clockKernels(addon, () => { logits = engine.prefill(ids, cache, { logits: 'last' }).logits })
  const prefillCpu = cpuMs(c0)
  const argmax = (v: Float32Array): number => v.reduce((best, x, i) => (x > v[best] ? i : best), 0)
  const out = [argmax(logits)]
  const d0 = performance.now(), c1 = process.cpuUsage()
  for (let s = 1; s < decode; s++) out.push(argmax(engine.decode(out[out.length - 1], cache)))
  const result: RunResult = {
    prefill_ms: clock.wallMs, prefill_cpu_ms: prefillCpu, decode_ms: performance.now() - d0, decode_cpu_ms: cpuMs(c1),
    prefill_kernels: clock.kernels, logits_sha256: sha(logits), tokens_sha256: sha(new Int32Array(out)),
  }
  process.stdout.write(`${JSON.stringify(result)}\n`)
}

function runChild (tree: string, model: string, threads: number, tokens: number, decode: number, pool: string | undefined): Promise<RunResult> {
  const env = { ...process.env, PD_KERNEL_THREADS: String(threads), ...(pool === undefined ? {} : { PD_KERNEL_POOL: pool }) }
  const args = [join(REPO, 'node_modules/tsx/dist/cli.mjs'), fileURLToPath(import.meta.url), '--child', tree, '--model', model,
    '--tokens', String(tokens), '--decode', String(decode)]
  return new Promise((resolveRun, reject) => {
    const p = spawn(process.execPath, args, { stdio: ['ignore', 'pipe', 'inherit'], env })
    let stdout = ''
    p.stdout.on('data', (d: Buffer) => { stdout += d.toString() })
    p.once('error', reject)
    p.once('exit', (code) => {
      const line = stdout.split('\n').find((l) => l.startsWith('{'))
      if (code !== 0 || line === undefined) reject(new Error(`engine-ab: the run on ${tree} exited with ${String(code)}`))
      else resolveRun(JSON.parse(line) as RunResult)
    })
  })
}

if (opts.help === true) {
  console.log(USAGE)
  process.exit(0)
}
if (opts.child !== undefined) {
  if (opts.model === undefined) usage('--child needs --model')
  await child(resolve(opts.child), resolve(opts.model), positive('tokens', opts.tokens), positive('decode', opts.decode))
  process.exit(0)
}
if (opts['baseline-tree'] === undefined) usage('--baseline-tree is required')
if (opts['state-dir'] === undefined) usage('--state-dir is required')
if (opts.pool !== undefined && opts.pool !== 'on' && opts.pool !== 'off') usage(`--pool: ${JSON.stringify(opts.pool)} is not on or off`)
const threadCounts = opts.threads.split(',').map((s) => positive('threads', s))
const tokens = positive('tokens', opts.tokens)
const decode = positive('decode', opts.decode)
const repeats = positive('repeats', opts.repeats)

const { isPresetName } = await import('../../src/model/checkpoint/index.ts')
const { ensureCheckpoint } = await import('../../src/stack/assets.ts')
const { EMBEDDED_DECODER_PROFILE, EMBEDDED_DEFAULTS } = await import('../../src/stack/embedded.ts')
const { stackPaths } = await import('../../src/stack/state-dir.ts')
if (!isPresetName(opts.preset)) usage(`--preset: ${JSON.stringify(opts.preset)} is not a preset`)
const paths = stackPaths(resolve(opts['state-dir']), opts.preset, EMBEDDED_DEFAULTS.seed, EMBEDDED_DECODER_PROFILE, EMBEDDED_DEFAULTS.blockSize)
const checkpoint = await ensureCheckpoint(paths.model, opts.preset, EMBEDDED_DEFAULTS.seed)

const TREES = [{ name: 'baseline', dir: resolve(opts['baseline-tree']) }, { name: 'this checkout', dir: REPO }]
const median = (xs: number[]): number => {
  const s = [...xs].sort((a, b) => a - b)
  return s.length % 2 === 1 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2
}
const startedAt = new Date().toISOString()
const loadBefore = loadavg()
const runs = new Map<string, RunResult[]>()
for (let r = 0; r < repeats; r++) {
  for (const threads of threadCounts) {
    for (const tree of r % 2 === 0 ? TREES : [...TREES].reverse()) {
      const res = await runChild(tree.dir, checkpoint.dir, threads, tokens, decode, opts.pool)
      const key = `${tree.name}@${threads}`
      runs.set(key, [...(runs.get(key) ?? []), res])
      console.log(`${key} run ${r + 1}: prefill ${res.prefill_ms.toFixed(0)} ms (cpu ${res.prefill_cpu_ms.toFixed(0)}), ` +
        `${decode - 1} decode steps ${res.decode_ms.toFixed(0)} ms (cpu ${res.decode_cpu_ms.toFixed(0)})`)
    }
  }
}
const digests = new Set([...runs.values()].flat().map((x) => `${x.logits_sha256}/${x.tokens_sha256}`))
const legs = [...runs.entries()].map(([key, xs]) => {
  const [tree, threads] = key.split('@')
  const prefill = median(xs.map((x) => x.prefill_ms)), steps = median(xs.map((x) => x.decode_ms))
  return {
    tree, threads: Number(threads), runs: xs.map(({ prefill_kernels: _k, ...rest }) => rest),
    prefill_ms_median: prefill, prefill_tokens_per_s: tokens * 1000 / prefill, prefill_cpu_ms_median: median(xs.map((x) => x.prefill_cpu_ms)),
    decode_ms_median: steps, decode_tokens_per_s: (decode - 1) * 1000 / steps, decode_cpu_ms_median: median(xs.map((x) => x.decode_cpu_ms)),
    last_prefill_inside_kernels: xs[xs.length - 1].prefill_kernels,
  }
})
const speedups = threadCounts.map((threads) => {
  const leg = (tree: string) => legs.find((l) => l.tree === tree && l.threads === threads)!
  const [a, b] = [leg('baseline'), leg('this checkout')]
  return {
    threads, prefill_wall: a.prefill_ms_median / b.prefill_ms_median, prefill_cpu: a.prefill_cpu_ms_median / b.prefill_cpu_ms_median,
    decode_wall: a.decode_ms_median / b.decode_ms_median, decode_cpu: a.decode_cpu_ms_median / b.decode_cpu_ms_median,
  }
})
const record = {
  kind: 'engine-ab', version: 1, at: startedAt, note: opts.note,
  machine: { cpu: cpus()[0]?.model.trim() ?? 'unknown', cores: cpus().length, node: process.version, pool: opts.pool ?? 'addon default' },
  load_average: { before: loadBefore.map((x) => Number(x.toFixed(2))), after: loadavg().map((x) => Number(x.toFixed(2))) },
  model: { preset: opts.preset, profile: EMBEDDED_DECODER_PROFILE, seed: EMBEDDED_DEFAULTS.seed },
  settings: { tokens, decode_steps: decode - 1, repeats, threads: threadCounts, order: 'per repeat and thread count the trees alternate; one 64-token warm prefill per run', trees: TREES.map((t) => t.name) },
  bits_identical: digests.size === 1,
  speedups, legs,
}
await mkdir(opts.out, { recursive: true })
const file = join(opts.out, `${startedAt.replace(/[:.]/g, '-')}-engine-ab-${opts.preset}.json`)
await writeFile(file, `${JSON.stringify(record, null, 2)}\n`)
console.log(JSON.stringify({ speedups, bits_identical: record.bits_identical, record: file }))
