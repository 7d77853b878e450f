#!/usr/bin/env node
// The batched-decode protocol (docs/BENCHMARK-PROTOCOL.md, "Batched decode"): the embedded decoder
// alone (`pd-bridge decoder`, a child process on 127.0.0.1) on one checkpoint, then 1, 2, 4, 8
// concurrent streamed clients with distinct short prompts, greedy, ignore_eos. First every prompt
// runs alone (its solo answer; the first of them is level 1); then each level sends its prompts at
// once and every answer is compared with its solo run (must be 0 differences). Per level: aggregate
// tokens/s (all completion tokens over the level's wall time), aggregate decode tokens/s (tokens
// after each first one, over the decode phase by the decoder's own clock: first request's first
// logits to last request's last token), TTFT (first text) and end-to-end percentiles,
// the mean and widest batch the decoder reported, the decoder's peak RSS during the level (VmRSS
// sampled every 100 ms) and the load average. One JSON record in --runs.
//
//   node protocols/batch-decode.mjs --model DIR [--levels 1,2,4,8] [--max-tokens 32] [--prompt-tokens 24]
import { spawn } from 'node:child_process'
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises'
import { loadavg, tmpdir, cpus, totalmem } from 'node:os'
import { basename, join, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'
import { parseArgs } from 'node:util'

const REPO = resolve(fileURLToPath(new URL('..', import.meta.url)))
const USAGE = `Usage: node protocols/batch-decode.mjs --model DIR [options]

  --model DIR          checkpoint directory (config.json, safetensors, tokenizer.json)
  --levels L           concurrent clients per level, comma-separated (default 1,2,4,8)
  --max-tokens N       completion tokens per request, ignore_eos (default 32)
  --prompt-tokens N    tokens per prompt (default 24)
  --max-batch N        the decoder's --max-batch (default: the largest level)
  --seed N             prompt seed (default 1)
  --runs DIR           where the record goes (default results/batch)
  --label TEXT         a note kept in the record`

const { values: opts } = parseArgs({
  options: {
    model: { type: 'string' }, levels: { type: 'string', default: '1,2,4,8' }, 'max-tokens': { type: 'string', default: '32' },
    'prompt-tokens': { type: 'string', default: '24' }, 'max-batch': { type: 'string' }, seed: { type: 'string', default: '1' },
    runs: { type: 'string', default: join(REPO, 'results', 'batch') }, label: { type: 'string', default: '' }, help: { type: 'boolean' },
  },
})
if (opts.help || opts.model === undefined) {
  console.log(USAGE)
  process.exit(opts.help ? 0 : 2)
}
const levels = opts.levels.split(',').map(Number)
const maxTokens = Number(opts['max-tokens'])
const promptTokens = Number(opts['prompt-tokens'])
const seed = Number(opts.seed)
const maxBatch = Number(opts['max-batch'] ?? Math.max(...levels))
const config = JSON.parse(await readFile(join(opts.model, 'config.json'), 'utf8'))

function prompt (i) {
  return Array.from({ length: promptTokens }, (_, t) => ((seed * 7919 + i * 104729 + t * 37) % (config.vocab_size - 3)) + 2)
}

function percentile (xs, p) {
  const s = [...xs].sort((a, b) => a - b)
  return s.length === 0 ? null : s[Math.min(s.length - 1, Math.ceil(p / 100 * s.length) - 1)]
}

async function rssOf (pid) {
  const m = /VmRSS:\s+(\d+) kB/.exec(await readFile(`/proc/${pid}/status`, 'utf8'))
  return m === null ? 0 : Number(m[1]) * 1024
}

const home = await mkdtemp(join(tmpdir(), 'batch-decode-'))
const child = spawn(process.execPath, [join(REPO, 'bin', 'pd-bridge.mjs'), 'decoder', '--model', opts.model, '--cache-dir', join(home, 'cache'),
  '--port', '0', '--model-name', 'bench', '--max-batch', String(maxBatch), '--max-queue', '64', '--log', join(home, 'decoder.log')], { stdio: ['ignore', 'pipe', 'inherit'] })
const ready = await new Promise((resolveReady, reject) => {
  let buffer = ''
  child.stdout.on('data', (d) => {
    buffer += d
    const line = buffer.split('\n').find((l) => l.startsWith('{'))
    if (line !== undefined) resolveReady(JSON.parse(line))
  })
  child.on('exit', (code) => reject(new Error(`the decoder exited with ${code} before it was ready`)))
})
const url = ready.url

/** One streamed request: ids, TTFT, end-to-end, the decoder's own clock. */
async function run (ids) {
  const t0 = performance.now()
  const res = await fetch(`${url}/v1/completions`, {
    method: 'POST', headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'bench', prompt: ids, max_tokens: maxTokens, ignore_eos: true, stream: true, stream_options: { include_usage: true }, return_token_ids: true }),
  })
  if (res.status !== 200) throw new Error(`HTTP ${res.status}: ${await res.text()}`)
  let first
  let tokenIds
  let usage
  const decoder = new TextDecoder()
  let buffer = ''
  for await (const chunk of res.body) {
    buffer += decoder.decode(chunk, { stream: true })
    let at
    while ((at = buffer.indexOf('\n\n')) >= 0) {
      const event = buffer.slice(0, at)
      buffer = buffer.slice(at + 2)
      if (!event.startsWith('data: ') || event === 'data: [DONE]') continue
      const body = JSON.parse(event.slice(6))
      const choice = body.choices?.[0]
      if (first === undefined && (choice?.text ?? '') !== '') first = performance.now()
      if (choice?.token_ids !== undefined) tokenIds = choice.token_ids
      if (body.usage) usage = body
    }
  }
  const end = performance.now()
  return { ids: tokenIds, start: t0, first: first ?? end, end, completion: usage.usage.completion_tokens, decoder: usage.pd_decoder }
}

async function health () {
  return (await fetch(`${url}/health`)).json()
}

const record = {
  kind: 'batch-decode', version: 1, at: new Date().toISOString(), label: opts.label, model: basename(resolve(opts.model)),
  config: { hidden_size: config.hidden_size, num_hidden_layers: config.num_hidden_layers, vocab_size: config.vocab_size, n_routed_experts: config.n_routed_experts },
  machine: { cpus: cpus().length, cpu: cpus()[0]?.model, total_memory: totalmem(), node: process.version },
  settings: { levels, max_tokens: maxTokens, prompt_tokens: promptTokens, max_batch: maxBatch, seed, profile: ready.profile },
  decoder_rss_at_ready: await rssOf(child.pid),
  levels: [],
}
try {
  const prompts = Array.from({ length: Math.max(...levels) }, (_, i) => prompt(i))
  // Solo answers, one prompt at a time.
  const solo = []
  const soloRuns = []
  for (const p of prompts) {
    const r = await run(p)
    solo.push(r.ids)
    soloRuns.push(r)
  }
  for (const c of levels) {
    const before = (await health()).batch
    let peak = 0
    let sampling = true
    const sampler = (async () => {
      while (sampling) {
        peak = Math.max(peak, await rssOf(child.pid))
        await new Promise((r) => setTimeout(r, 100))
      }
    })()
    const load = loadavg()[0]
    const t0 = performance.now()
    const runs = c === 1 ? [await run(prompts[0])] : await Promise.all(prompts.slice(0, c).map((p) => run(p)))
    const wall = (performance.now() - t0) / 1000
    sampling = false
    await sampler
    const after = (await health()).batch
    const tokens = runs.reduce((s, r) => s + r.completion, 0)
    // The decode phase by the decoder's own clock (its text may be held back, so the client's first text is no clock):
    // from the first request's first logits to the last request's last token.
    const decodeStart = Math.min(...runs.map((r) => r.start + r.decoder.prefill_ms))
    const decodeEnd = Math.max(...runs.map((r) => r.start + r.decoder.prefill_ms + r.decoder.decode_ms))
    const decodeSpan = (decodeEnd - decodeStart) / 1000
    const differ = runs.filter((r, i) => JSON.stringify(r.ids) !== JSON.stringify(solo[i])).length
    const steps = after.steps - before.steps
    const level = {
      clients: c, requests: runs.length, completion_tokens: tokens, wall_s: wall,
      tokens_per_s: tokens / wall,
      decode_tokens_per_s: decodeSpan > 0 ? runs.reduce((s, r) => s + r.completion - 1, 0) / decodeSpan : null,
      ttft_ms: { p50: percentile(runs.map((r) => r.first - r.start), 50), p99: percentile(runs.map((r) => r.first - r.start), 99) },
      decoder_prefill_ms: { p50: percentile(runs.map((r) => r.decoder.prefill_ms), 50), p99: percentile(runs.map((r) => r.decoder.prefill_ms), 99) },
      e2e_ms: { p50: percentile(runs.map((r) => r.end - r.start), 50), p99: percentile(runs.map((r) => r.end - r.start), 99) },
      batch: { steps, mean_rows: steps > 0 ? (after.rows - before.rows) / steps : null, widest_so_far: after.maxRows },
      decoder_peak_rss: peak, load_average_1m: load,
      answers_differing_from_solo: differ,
    }
    record.levels.push(level)
    console.error(`batch-decode: ${c} clients: ${level.tokens_per_s.toFixed(2)} tok/s (${level.decode_tokens_per_s?.toFixed(2)} decode), mean batch ${level.batch.mean_rows?.toFixed(2)}, peak RSS ${(peak / 2 ** 20).toFixed(0)} MiB, ${differ} differ, load ${load.toFixed(1)}`)
  }
  const one = record.levels.find((l) => l.clients === 1)
  record.speedup_vs_one = one === undefined ? null : Object.fromEntries(record.levels.map((l) => [l.clients, l.decode_tokens_per_s / one.decode_tokens_per_s]))
  record.answers_differing_from_solo = record.levels.reduce((s, l) => s + l.answers_differing_from_solo, 0)
  record.decoder_peak_rss_hwm = Number(/VmHWM:\s+(\d+) kB/.exec(await readFile(`/proc/${child.pid}/status`, 'utf8'))?.[1] ?? 0) * 1024
} finally {
  child.kill('SIGTERM')
  await new Promise((r) => child.once('exit', r))
  await rm(home, { recursive: true, force: true })
}
await mkdir(opts.runs, { recursive: true })
const file = join(opts.runs, `batch-decode-${record.model}-${record.at.replace(/[:.]/g, '-')}.json`)
await writeFile(file, JSON.stringify(record, null, 2) + '\n')
console.log(file)
process.exit(record.answers_differing_from_solo === 0 ? 0 : 1)
