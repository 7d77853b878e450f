// Our decoder against llama.cpp on one host, side by side (issue #44 item 2; docs/BENCHMARK-PROTOCOL.md,
// "Decoder scaling"): every leg is a `pd-bridge decoder` child on 127.0.0.1 (ours held to T kernel
// threads by PD_KERNEL_THREADS; llama.cpp through node-llama-cpp's prebuilt CPU binary with
// --threads T, F32 KV, one GGUF per weights type). Each prompt size runs `--runs` times; within a
// run every leg gets the same token ids (fresh ids per size and run, so no leg ever hits a cached
// prefix) in alternating order, and each leg's prefill and decode time is its server's own clock
// (pd_decoder.prefill_ms and decode_ms on the streamed usage chunk). Ours runs with its kernel
// threads on the worker pool and, as `ours:no-pool`, on threads started per call (PD_KERNEL_POOL). The record is rewritten after
// every measurement, so a step cut short by its time limit keeps what it measured.
//
//   npx tsx protocols/decoder-scaling/bench.ts --state-dir DIR [--preset flash-attn] [--threads 2,16]
//     [--sizes 512,2048] [--decode 32] [--runs 2] [--legs ours,llama.cpp:bf16,llama.cpp:f32] [--out results/decoder-scaling]
import { execFileSync, spawn, type ChildProcess } from 'node:child_process'
import { mkdir, mkdtemp, readFile, rename, rm, stat, writeFile } from 'node:fs/promises'
import { cpus, loadavg, tmpdir, totalmem } from 'node:os'
import { join, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'
import { parseArgs } from 'node:util'
import { isPresetName } from '../../src/model/checkpoint/index.ts'
import { exportGguf, type GgufWeightType } from '../../src/model/gguf/index.ts'
import { loadNativeKernels } from '../../src/kernels/native.ts'
import { ensureCheckpoint } from '../../src/stack/assets.ts'
import { EMBEDDED_DECODER_PROFILE, EMBEDDED_DEFAULTS } from '../../src/stack/embedded.ts'
import { stackPaths } from '../../src/stack/state-dir.ts'

const REPO = resolve(fileURLToPath(new URL('../..', import.meta.url)))
const USAGE = `Usage: npx tsx protocols/decoder-scaling/bench.ts --state-dir DIR [options]

  --state-dir DIR   where the checkpoint and GGUFs are made or reused (models/, gguf/)
  --preset NAME     checkpoint preset, seed ${EMBEDDED_DEFAULTS.seed} (default flash-attn)
  --threads L       thread counts, comma-separated (default 2,16)
  --sizes L         prompt tokens, comma-separated (default 512,2048)
  --decode N        completion tokens per request, ignore_eos (default 32)
  --runs N          runs per size, legs alternating (default 2)
  --legs L          ours (kernel threads on the worker pool), ours:no-pool (threads started per
                    call, PD_KERNEL_POOL=off), llama.cpp:bf16, llama.cpp:f32 (default all four)
  --out DIR         where the record goes (default results/decoder-scaling)
  --label TEXT      kept in the record (say the host: "H100 host, 16 cores")
  --prepare         only make (or find) the checkpoint and the GGUFs the legs need, then exit`

const { values: opts } = parseArgs({
  options: {
    'state-dir': { type: 'string' }, preset: { type: 'string', default: 'flash-attn' }, threads: { type: 'string', default: '2,16' },
    sizes: { type: 'string', default: '512,2048' }, decode: { type: 'string', default: '32' }, runs: { type: 'string', default: '2' },
    legs: { type: 'string', default: 'ours,ours:no-pool,llama.cpp:bf16,llama.cpp:f32' }, out: { type: 'string', default: join(REPO, 'results', 'decoder-scaling') },
    label: { type: 'string', default: '' }, prepare: { type: 'boolean' }, help: { type: 'boolean' },
  },
})
function usage (problem: string): never {
  process.stderr.write(`decoder-scaling: ${problem}\n${USAGE}\n`)
  process.exit(2)
}
if (opts.help === true) {
  console.log(USAGE)
  process.exit(0)
}
function positiveList (flag: string, text: string): number[] {
  const list = text.split(',').map((s) => s.trim())
  if (list.some((s) => !/^\d{1,7}$/.test(s) || Number(s) < 1)) usage(`--${flag}: ${JSON.stringify(text)} is not a comma-separated list of positive integers`)
  return list.map(Number)
}
if (opts['state-dir'] === undefined) usage('--state-dir is required')
const preset = opts.preset
if (!isPresetName(preset)) usage(`--preset: ${JSON.stringify(preset)} is not a preset`)
const threadCounts = positiveList('threads', opts.threads)
const sizes = positiveList('sizes', opts.sizes)
const [decode] = positiveList('decode', opts.decode)
const [runs] = positiveList('runs', opts.runs)
if (decode < 2) usage('--decode: at least 2 tokens (decode speed is over the tokens after the first)')

/** A leg: ours with its kernel threads on the worker pool (or started per call: `ours:no-pool`), or llama.cpp on a GGUF. */
interface LegKind { engine: 'ours' | 'llama.cpp', weights: string, pool?: 'on' | 'off' }
const legKinds: LegKind[] = opts.legs.split(',').map((s) => {
  if (s === 'ours') return { engine: 'ours', weights: 'checkpoint bf16, profile decoder', pool: 'on' }
  if (s === 'ours:no-pool') return { engine: 'ours', weights: 'checkpoint bf16, profile decoder', pool: 'off' }
  const m = /^llama\.cpp:(bf16|f32)$/.exec(s)
  if (m === null) usage(`--legs: ${JSON.stringify(s)} is not ours, ours:no-pool, llama.cpp:bf16 or llama.cpp:f32`)
  return { engine: 'llama.cpp', weights: m[1] }
})

const stateDir = resolve(opts['state-dir'])
const paths = stackPaths(stateDir, preset, EMBEDDED_DEFAULTS.seed, EMBEDDED_DECODER_PROFILE, EMBEDDED_DEFAULTS.blockSize)
const checkpoint = await ensureCheckpoint(paths.model, preset, EMBEDDED_DEFAULTS.seed)
const config = JSON.parse(await readFile(join(checkpoint.dir, 'config.json'), 'utf8')) as { vocab_size: number, hidden_size: number, num_hidden_layers: number }

/** The GGUF of the checkpoint in `type`, made once next to it (its name carries the checkpoint digest). */
async function gguf (type: GgufWeightType): Promise<string> {
  const file = join(stateDir, 'gguf', `${preset}-seed${EMBEDDED_DEFAULTS.seed}-${checkpoint.digest.slice(0, 12)}-${type}.gguf`)
  if (await stat(file).then(() => true, () => false)) return file
  await mkdir(join(stateDir, 'gguf'), { recursive: true })
  const t0 = performance.now()
  await exportGguf({ model: checkpoint.dir, out: `${file}.tmp`, type, idsOnly: false, force: true })
  await rm(file, { force: true })
  await rename(`${file}.tmp`, file)
  console.error(`decoder-scaling: made ${type} GGUF in ${((performance.now() - t0) / 1000).toFixed(1)} s`)
  return file
}

if (opts.prepare === true) {
  for (const kind of legKinds) if (kind.engine === 'llama.cpp') await gguf(kind.weights as GgufWeightType)
  console.log(JSON.stringify({ model: checkpoint.dir, made: checkpoint.made }))
  process.exit(0)
}

/** Prompt ids for (size, run): a seed of its own, so no prompt is a prefix of another. */
function promptIds (size: number, run: number): number[] {
  let s = (size * 2654435761 + run * 40503 + 12345) >>> 0
  return Array.from({ length: size }, () => {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0
    return 2 + (s % (config.vocab_size - 3))
  })
}

interface Server { name: string, engine: string, weights: string, threads: number, url: string, child: ChildProcess, home: string, loadS: number }

async function startServer (kind: LegKind, threads: number): Promise<Server> {
  const home = await mkdtemp(join(tmpdir(), 'decoder-scaling-'))
  const maxSize = Math.max(...sizes)
  const common = ['decoder', '--model', checkpoint.dir, '--port', '0', '--model-name', 'bench', '--max-tokens', String(decode), '--log', join(home, 'decoder.log')]
  const args = kind.engine === 'ours'
    ? [...common, '--cache-dir', join(home, 'cache')]
    : [...common, '--engine', 'llama.cpp', '--gguf', await gguf(kind.weights as GgufWeightType), '--threads', String(threads), '--kv-cache-type', 'F32',
        '--context-size', String(maxSize + decode + 16)]
  const env = { ...process.env, PD_KERNEL_THREADS: String(threads), ...(kind.pool === undefined ? {} : { PD_KERNEL_POOL: kind.pool }) }
  const t0 = performance.now()
  const child = spawn(process.execPath, [join(REPO, 'bin', 'pd-bridge.mjs'), ...args], { stdio: ['ignore', 'pipe', 'inherit'], env })
  const ready = await new Promise<{ url: string }>((resolveReady, reject) => {
    let buffer = ''
    child.stdout!.on('data', (d: Buffer) => {
      buffer += d.toString()
      const line = buffer.split('\n').find((l) => l.startsWith('{'))
      if (line !== undefined) resolveReady(JSON.parse(line) as { url: string })
    })
    child.once('exit', (code) => reject(new Error(`the ${kind.engine} decoder exited with ${String(code)} before it was ready (log: ${home}/decoder.log)`)))
  })
  const name = `${kind.engine}${kind.engine === 'ours' ? (kind.pool === 'off' ? ' no-pool' : '') : ` ${kind.weights}`} ${threads}t`
  return { name, engine: kind.engine, weights: kind.weights, threads, url: ready.url, child, home, loadS: (performance.now() - t0) / 1000 }
}

async function stopServer (s: Server): Promise<void> {
  if (s.child.exitCode === null) {
    s.child.kill('SIGTERM')
    await new Promise((r) => s.child.once('exit', r))
  }
  await rm(s.home, { recursive: true, force: true })
}

interface Timings { prefill_ms: number, decode_ms: number }
/** One streamed completion of `ids`: the server's own clock and the token counts it reports. */
async function complete (s: Server, ids: number[]): Promise<{ timings: Timings, prompt: number, completion: number, cached: number, tokenIds: number[] | undefined }> {
  const res = await fetch(`${s.url}/v1/completions`, {
    method: 'POST', headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'bench', prompt: ids, max_tokens: decode, temperature: 0, ignore_eos: true, stream: true, stream_options: { include_usage: true }, return_token_ids: true }),
  })
  if (res.status !== 200) throw new Error(`${s.name}: HTTP ${res.status}: ${await res.text()}`)
  let usage: { usage: { prompt_tokens: number, completion_tokens: number, prompt_tokens_details?: { cached_tokens: number } }, pd_decoder: Timings } | undefined
  let tokenIds: number[] | undefined
  const text = new TextDecoder()
  let buffer = ''
  for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
    buffer += text.decode(chunk, { stream: true })
    let at
    while ((at = buffer.indexOf('\n\n')) >= 0) {
      const event = buffer.slice(0, at)
      buffer = buffer.slice(at + 2)
      if (!event.startsWith('data: ') || event === 'data: [DONE]') continue
      const body = JSON.parse(event.slice(6))
      const ids = body.choices?.[0]?.token_ids as number[] | undefined
      if (ids !== undefined) tokenIds = [...(tokenIds ?? []), ...ids]
      if (body.usage !== undefined && body.usage !== null) usage = body
    }
  }
  if (usage?.pd_decoder === undefined) throw new Error(`${s.name}: the stream ended without usage and pd_decoder timings`)
  return { timings: usage.pd_decoder, prompt: usage.usage.prompt_tokens, completion: usage.usage.completion_tokens, cached: usage.usage.prompt_tokens_details?.cached_tokens ?? 0, tokenIds }
}

function gpuName (): string | null {
  try {
    return execFileSync('nvidia-smi', ['--query-gpu=name', '--format=csv,noheader'], { encoding: 'utf8', timeout: 10_000 }).trim().split('\n')[0] || null
  } catch {
    return null
  }
}

const startedAt = new Date().toISOString()
const record = {
  kind: 'decoder-scaling',
  version: 1,
  at: startedAt,
  label: opts.label,
  commit: process.env.PD_RUN_COMMIT ?? null,
  host: { cpu: cpus()[0]?.model ?? 'unknown', cores: cpus().length, gpu: gpuName(), total_memory: totalmem(), node: process.version, our_kernels_isa: loadNativeKernels().isa },
  model: { preset, seed: EMBEDDED_DEFAULTS.seed, digest: checkpoint.digest, hidden_size: config.hidden_size, num_hidden_layers: config.num_hidden_layers, vocab_size: config.vocab_size },
  settings: { threads: threadCounts, sizes, decode_tokens: decode, runs, legs: legKinds, llama_cpp: { kv_cache_type: 'F32', flash_attention: false, binary: 'node-llama-cpp 3.22.1 prebuilt CPU (linux-x64)' }, clock: 'each server\'s own: pd_decoder.prefill_ms / decode_ms' },
  servers: [] as Array<{ name: string, engine: string, weights: string, threads: number, kernel_pool: string | null, load_s: number }>,
  measurements: [] as Array<Record<string, unknown>>,
  summary: [] as Array<Record<string, unknown>>,
}
await mkdir(opts.out, { recursive: true })
const file = join(opts.out, `${startedAt.replace(/[:.]/g, '-')}-${preset}.json`)

function median (xs: number[]): number | null {
  if (xs.length === 0) return null
  const s = [...xs].sort((a, b) => a - b)
  return s.length % 2 === 1 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2
}

/** Per leg and size: the runs' range, and ours over llama.cpp and 16 over 2 threads where both exist. */
function summarize (): void {
  const rows: Array<Record<string, unknown>> = []
  for (const s of record.servers) {
    for (const size of sizes) {
      const ms = record.measurements.filter((m) => m.leg === s.name && m.prompt_tokens === size)
      if (ms.length === 0) continue
      const prefill = ms.map((m) => m.prefill_tok_s as number)
      const dec = ms.map((m) => m.decode_tok_s as number)
      rows.push({ leg: s.name, engine: s.engine, weights: s.weights, threads: s.threads, prompt_tokens: size, runs: ms.length,
        prefill_tok_s: { min: Math.min(...prefill), max: Math.max(...prefill), median: median(prefill) },
        decode_tok_s: { min: Math.min(...dec), max: Math.max(...dec), median: median(dec) } })
    }
  }
  record.summary = rows
}

async function save (): Promise<void> {
  summarize()
  await writeFile(file, JSON.stringify(record, null, 2) + '\n')
}

const servers: Server[] = []
// A step's time limit ends this process with SIGTERM: stop the servers and keep the record.
for (const signal of ['SIGTERM', 'SIGINT'] as const) {
  process.once(signal, () => {
    for (const s of servers) s.child.kill('SIGKILL')
    record.label += ` (cut short by ${signal})`
    save().finally(() => process.exit(124))
  })
}
try {
  for (const kind of legKinds) {
    for (const threads of threadCounts) {
      const s = await startServer(kind, threads)
      servers.push(s)
      record.servers.push({ name: s.name, engine: s.engine, weights: s.weights, threads: s.threads, kernel_pool: kind.pool ?? null, load_s: s.loadS })
      console.error(`decoder-scaling: ${s.name} ready in ${s.loadS.toFixed(1)} s`)
    }
  }
  // Warm every leg once (first-call costs: page faults, thread start), not recorded.
  for (const s of servers) await complete(s, promptIds(16, 0).slice(0, 16))
  for (const size of sizes) {
    for (let run = 1; run <= runs; run++) {
      const ids = promptIds(size, run)
      const order = run % 2 === 1 ? servers : [...servers].reverse()
      for (const s of order) {
        const load = loadavg()[0]
        const r = await complete(s, ids)
        const m = {
          leg: s.name, engine: s.engine, weights: s.weights, threads: s.threads, prompt_tokens: size, run,
          reported_prompt_tokens: r.prompt, cached_tokens: r.cached, completion_tokens: r.completion,
          prefill_ms: r.timings.prefill_ms, decode_ms: r.timings.decode_ms,
          prefill_tok_s: size / (r.timings.prefill_ms / 1000),
          decode_tok_s: (r.completion - 1) / (r.timings.decode_ms / 1000),
          load_average_1m: load, first_ids: r.tokenIds?.slice(0, 8) ?? null,
        }
        if (r.cached !== 0) throw new Error(`${s.name}: ${r.cached} cached tokens on a fresh prompt; the measurement would not be a cold prefill`)
        record.measurements.push(m)
        await save()
        console.error(`decoder-scaling: ${size} tokens run ${run} ${s.name}: prefill ${m.prefill_tok_s.toFixed(1)} tok/s, decode ${m.decode_tok_s.toFixed(2)} tok/s`)
      }
    }
  }
} finally {
  await Promise.all(servers.map(stopServer))
  await save()
  console.log(file)
}
