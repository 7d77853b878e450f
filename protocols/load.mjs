#!/usr/bin/env node
// The load protocol (docs/BENCHMARK-PROTOCOL.md, "Load" and "Load: concurrency levels"). Starts the
// embedded stack (tiny preset, blocks of 256, everything on 127.0.0.1) with a home of its own under
// <state>/runs/ (its own block store, captures, logs; the checkpoint and sidecar of the state
// directory are made once and reused) and sends fresh cold prompts long enough to be bridged, warm
// repeats of earlier prompts (their blocks already in the decoder's store) and short prompts that go
// native through the front door. Two modes:
// - concurrency levels (default): per decoder kind (ours, llama.cpp), 1, 2, 4, 8, 16 clients at once,
//   streamed seeded requests by the official openai client, every answer compared token for token
//   with the same request sent alone to a second decoder of the kind (its solo run); per level decode
//   tokens/s, TTFT and end-to-end percentiles, errors, verdicts, peak RSS per process, load average;
//   then TTFT of short prompts idle and under a long bridge. One record per kind under
//   results/load/levels/.
// - the timed mix (--clients / --duration-s): clients send one request after another for a while,
//   greedy, half streamed (fetch, SSE) and half whole (the openai client); per route requests,
//   verdicts, latency and TTFT percentiles, errors and 429s, peak RSS. One record under results/load/.
// Then RESULTS.md is regenerated (pd-bridge results).
//
//   npx zx protocols/load.mjs [--levels 1,2,4,8,16] [--decoders ours,llama.cpp] [--seed N]
//   npx zx protocols/load.mjs --clients 16 --duration-s 60 [--mix 1,2,2] [--seed N]
//   npx zx protocols/load.mjs --help
import { randomBytes } from 'node:crypto'
import { cpus, loadavg, totalmem } from 'node:os'
import { mkdir, readFile, rm, writeFile } from 'node:fs/promises'
import { join, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'
import { argv } from 'zx'
import { register } from 'tsx/esm/api'
import { checkArgv, helpAndExit, usageError } from './flags.mjs'

const REPO = resolve(fileURLToPath(new URL('..', import.meta.url)))
const DEFAULT_RUNS = join(REPO, 'results', 'load')
const DEFAULT_OUT = join(REPO, 'results')
const DEFAULT_PRESET = 'tiny'
const SEED = 1
const BLOCK = 256
const ROUTES = ['bridged', 'warm', 'native-short']

// The stack, the prompt builder and the record are TypeScript; tsx lets this protocol import them as they are.
register()
const { PRESET_NAMES, isPresetName } = await import('../src/model/checkpoint/index.ts')
// Named mixes (weights of bridged, warm, native-short). decode-heavy: no cold prompt at the levels,
// so the decoder's batched steps, not prefills, fill the level's time (issue 41's throughput goal).
const NAMED_MIXES = { 'decode-heavy': '0,1,3' }
// The decoder kinds are the registry's (src/decoders/registry.ts): those the embedded stack starts
// itself (an external kind, such as oMLX, runs outside pd-bridge and has no stack leg here).
const { DECODER_KINDS: REGISTERED, DEFAULT_DECODER_KIND, kindNamesText } = await import('../src/decoders/registry.ts')
const STACK_KINDS = REGISTERED.filter((k) => k.external === undefined)
const DECODER_KINDS = STACK_KINDS.map((k) => k.name)

const USAGE = `Usage: npx zx protocols/load.mjs [options]   (node runs it as well)

The load protocol (docs/BENCHMARK-PROTOCOL.md, "Load"): starts the embedded stack (--preset, default
${DEFAULT_PRESET}; blocks of ${BLOCK}, loopback only) in a home of its own and sends a mix of requests through the front
door: fresh cold prompts long enough to be bridged (route bridged), repeats of earlier prompts whose
blocks are in the decoder's store (warm) and short prompts that go native (native-short).

Two modes. Concurrency levels (the default): for each decoder kind in --decoders, each level of
--levels runs that many concurrent clients (the official openai client, streamed, seeded sampling),
each sending --requests-per-client requests; every answer is compared token for token with the same
request sent alone to a second decoder of the kind with its own store (its solo run). Per level:
aggregate and decode tokens/s, TTFT and end-to-end percentiles, errors, verdicts, peak RSS per
process, the load average. Then the latency probe: TTFT of short prompts on the idle stack and while
a long prompt is bridged. One record per decoder kind in --runs/levels.
The timed mix (--clients or --duration-s given): --clients concurrent clients for --duration-s
seconds, greedy, half streamed (fetch) and half whole (the openai client); per route requests,
verdicts, latency and TTFT percentiles, errors and 429s, peak RSS. One record in --runs.

Concurrency levels:
  --levels L             concurrent clients per level, comma-separated (default 1,2,4,8,16)
  --decoders K           decoder kinds, comma-separated: ${DECODER_KINDS.join(', ')} (default all)
  --requests-per-client N  requests each client sends one after another at a level (default 1)
  --long-tokens N        size of the latency probe's long prompt (default 2048)
  --latency-samples N    short prompts per leg of the latency probe; 0 skips it (default 4)
  --temperature T        sampling temperature of every request (default 0.8; 0 is greedy)
  --top-p P              nucleus share (default 0.95); each request has its own seed from --seed
The timed mix:
  --clients N            concurrent clients (default 16)
  --duration-s N         seconds clients start new requests; those in flight then finish (default 60)
  --stream-share F       share of requests sent as streams, 0 to 1 (default 0.5)
  --when-full MODE       the front door's queue.whenFull: native (default) or reject (429 + Retry-After)
Both:
  --preset NAME          the checkpoint preset the stack serves: ${PRESET_NAMES.join(', ')} (default ${DEFAULT_PRESET});
                         made once in the state directory (flash-attn: about 1.8 GB, minutes)
  --mix B,W,S            weights of bridged, warm and native-short requests (default 1,2,2), or a
                         named mix: ${Object.entries(NAMED_MIXES).map(([k, v]) => `${k} (${v}: no cold prompts at the levels)`).join(', ')}
  --cold-tokens N        size of each fresh cold prompt (default 700: two full blocks and a tail)
  --short-tokens N       size of each short prompt (default 200; must stay under the front door's
                         minimum of ${2 * BLOCK} tokens, so it goes native)
  --max-tokens N         the answer budget of every request (default 16)
  --request-timeout-s N  the client's limit on one request (default 300); past it, an error
  --seed N               the invocation seed: prompt seeds, sampling seeds and the mix draw (default: random)
  --state-dir DIR        where the checkpoint and sidecar are made or reused, and the run's own
                         home goes (runs/load-<id>/; default $PD_STATE_DIR or ~/.cache/pd-bridge)
  --keep-state           keep the run's home (logs, store) even when there was no error
  --runs DIR             where the record goes (default results/load in this checkout; levels
                         records in its levels/ folder)
  --out DIR              where RESULTS.md and report.html go (default results/ in this checkout,
                         regenerated only when --runs is the default; with another --runs, give --out)
  --no-generate          do not regenerate the report
  -h, --help             this text (nothing is started or written)

Exit 0 only when no request was an error and (levels) no answer differed from its solo run. Progress
goes to stderr: one line per step, and over the timed window a live line on a terminal (JSON lines
elsewhere; PD_PROGRESS=off to silence it, docs/progress.md). Smoke runs: --levels 1,2
--decoders ours --requests-per-client 1 --latency-samples 2; --clients 2 --duration-s 3.
`
helpAndExit(USAGE)
checkArgv('load', argv, {
  clients: 'string', 'duration-s': 'string', mix: 'string', 'stream-share': 'string', 'cold-tokens': 'string', 'short-tokens': 'string',
  'max-tokens': 'string', 'request-timeout-s': 'string', 'when-full': 'string', seed: 'string', 'state-dir': 'string', 'keep-state': 'boolean',
  runs: 'string', out: 'string', generate: 'negatable', preset: 'string',
  levels: 'string', decoders: 'string', 'requests-per-client': 'string', 'long-tokens': 'string', 'latency-samples': 'string', temperature: 'string', 'top-p': 'string',
})

function fail (message) {
  usageError('load', message)
}

function int (name, text, min, max = Number.MAX_SAFE_INTEGER) {
  if (!/^\d+$/.test(String(text)) || Number(text) < min || Number(text) > max) fail(`--${name} must be an integer from ${min} to ${max}, got ${JSON.stringify(String(text))}`)
  return Number(text)
}

function fraction (name, text) {
  const x = Number(text)
  if (!/^\d*\.?\d+$/.test(String(text)) || !(x >= 0 && x <= 1)) fail(`--${name} must be a number from 0 to 1, got ${JSON.stringify(String(text))}`)
  return x
}

function mixOf (given) {
  const text = NAMED_MIXES[String(given)] ?? String(given)
  const parts = String(text).split(',').map((s) => s.trim())
  const w = parts.map(Number)
  if (parts.length !== 3 || parts.some((s) => !/^\d*\.?\d+$/.test(s)) || w.some((x) => !(x >= 0)) || w[0] + w[1] + w[2] <= 0) {
    fail(`--mix must be three weights B,W,S (bridged, warm, native-short) that are not all 0, or one of ${Object.keys(NAMED_MIXES).join(', ')}; got ${JSON.stringify(String(given))}`)
  }
  const sum = w[0] + w[1] + w[2]
  const mix = { bridged: w[0] / sum, warm: w[1] / sum, 'native-short': w[2] / sum }
  // The shares sum to 1 exactly in the record (the schema checks it).
  mix['native-short'] = 1 - mix.bridged - mix.warm
  return mix
}

const presetArg = String(argv.preset ?? DEFAULT_PRESET)
if (!isPresetName(presetArg)) fail(`--preset: unknown preset ${JSON.stringify(presetArg)} (expected one of ${PRESET_NAMES.join(', ')})`)
const PRESET = presetArg

const opts = {
  clients: int('clients', argv.clients ?? 16, 1, 256),
  durationS: int('duration-s', argv['duration-s'] ?? 60, 1, 3600),
  mix: mixOf(argv.mix ?? '1,2,2'),
  streamShare: fraction('stream-share', argv['stream-share'] ?? 0.5),
  coldTokens: int('cold-tokens', argv['cold-tokens'] ?? 700, 2 * BLOCK + 1, 30_000),
  shortTokens: int('short-tokens', argv['short-tokens'] ?? 200, 1, 2 * BLOCK - 64),
  maxTokens: int('max-tokens', argv['max-tokens'] ?? 16, 1, 512),
  requestTimeoutMs: int('request-timeout-s', argv['request-timeout-s'] ?? 300, 1) * 1000,
  whenFull: String(argv['when-full'] ?? 'native'),
  seed: argv.seed === undefined ? randomBytes(4).readUInt32LE(0) : int('seed', argv.seed, 0, 2 ** 32 - 1),
  stateDir: argv['state-dir'] === undefined ? undefined : String(argv['state-dir']),
  keepState: argv['keep-state'] === true,
  runs: argv.runs === undefined ? DEFAULT_RUNS : resolve(String(argv.runs)),
  out: argv.out === undefined ? DEFAULT_OUT : resolve(String(argv.out)),
  generate: argv.generate !== false,
}
if (opts.whenFull !== 'native' && opts.whenFull !== 'reject') fail(`--when-full ${opts.whenFull}: expected native or reject`)

// The mode: the timed mix when one of its own flags is given, else the concurrency levels; the other mode's flags are refused.
const TIMED_FLAGS = ['clients', 'duration-s', 'stream-share', 'when-full']
const LEVEL_FLAGS = ['levels', 'decoders', 'requests-per-client', 'long-tokens', 'latency-samples', 'temperature', 'top-p']
const timedMode = TIMED_FLAGS.some((f) => argv[f] !== undefined)
if (timedMode) {
  const other = LEVEL_FLAGS.find((f) => argv[f] !== undefined)
  if (other !== undefined) fail(`--${other} is a flag of the concurrency levels; --${TIMED_FLAGS.find((f) => argv[f] !== undefined)} selects the timed mix (see --help)`)
}

function listOf (name, text, parse) {
  const parts = String(text).split(',').map((x) => x.trim())
  if (parts.length === 0 || parts.some((x) => x === '')) fail(`--${name} must be a comma-separated list, got ${JSON.stringify(String(text))}`)
  const values = parts.map(parse)
  if (new Set(values).size !== values.length) fail(`--${name} names a value twice: ${JSON.stringify(String(text))}`)
  return values
}

function numberIn (name, text, min, max, minOpen = false) {
  const x = Number(text)
  if (!/^\d*\.?\d+$/.test(String(text)) || !(minOpen ? x > min : x >= min) || !(x <= max)) fail(`--${name} must be a number ${minOpen ? 'above' : 'from'} ${min}${minOpen ? ' up' : ''} to ${max}, got ${JSON.stringify(String(text))}`)
  return x
}

const levelOpts = {
  levels: listOf('levels', argv.levels ?? '1,2,4,8,16', (x) => int('levels', x, 1, 256)),
  decoders: listOf('decoders', argv.decoders ?? DECODER_KINDS.join(','), (x) => {
    if (!DECODER_KINDS.includes(x)) fail(`--decoders: unknown decoder kind ${JSON.stringify(x)} (expected ${kindNamesText(DECODER_KINDS)})`)
    return x
  }),
  requestsPerClient: int('requests-per-client', argv['requests-per-client'] ?? 1, 1, 1000),
  longTokens: int('long-tokens', argv['long-tokens'] ?? 2048, 2 * BLOCK + 1, 30_000),
  latencySamples: int('latency-samples', argv['latency-samples'] ?? 4, 0, 1000),
  temperature: numberIn('temperature', argv.temperature ?? 0.8, 0, 2),
  topP: numberIn('top-p', argv['top-p'] ?? 0.95, 0, 1, true),
}
const regenerate = opts.generate && (argv.out !== undefined || opts.runs === DEFAULT_RUNS)

const { default: OpenAI } = await import('openai')
const { startEmbeddedStack, startNativeLeg } = await import('../src/stack/embedded.ts')
const { resolveStateDir } = await import('../src/stack/state-dir.ts')
const { buildDemoPrompt } = await import('../src/stack/demo/prompt.ts')
const { promptBlockKeys } = await import('../src/stack/demo/blocks.ts')
/**
 * A kind's store as this protocol reads it: which of a prompt's block keys it has an entry for (the
 * kind's own reader, its demo's), and whether it holds the whole bridged prefix: the entry at the
 * prefix's last boundary (blocks are written parent first; a llama.cpp store keeps only that one).
 */
const storeOf = (kind) => ({
  present: kind.demo.present,
  holds: async (dir, keys) => keys.length > 0 && (await kind.demo.present(dir, keys.slice(-1))).length === 1,
})
/** The running decoder's store (the timed mix runs the default kind). */
let store = storeOf(DEFAULT_DECODER_KIND)
const { loadTokenizer } = await import('../src/model/tokenizer/index.ts')
const { embeddedEnvironment, embeddedModelName } = await import('../verify/results/environment.ts')
const { LOAD_RECORD_SCHEMA, loadTotals, parseLoadRecord, isLoadError } = await import('../verify/results/load-record.ts')
const { loadHeadline } = await import('../verify/results/load-section.ts')
const { LOAD_LEVELS_RECORD_SCHEMA, LOAD_LEVELS_DEFINITIONS, parseLoadLevelsRecord, summarizeLevel, summarizeLatency, loadLevelsVerdict } = await import('../verify/results/load-levels-record.ts')
const { loadLevelsHeadline } = await import('../verify/results/load-levels-section.ts')
const { generateResults } = await import('../verify/results/generate.ts')
const { resolveProgressMode, startProgress } = await import('../src/progress/index.ts')
try {
  resolveProgressMode(process.stderr) // a bad PD_PROGRESS is a usage error, found before anything starts
}
catch (err) {
  fail(err.message)
}

// Progress on stderr: one line per step; over the timed window a live line (JSON lines elsewhere),
// ticked in seconds as requests finish (src/progress). Step lines go above the live line.
let progress
function say (line) {
  const text = `[load ${new Date().toISOString().slice(11, 19)}] ${line}`
  if (progress !== undefined) progress.log(text)
  else process.stderr.write(text + '\n')
}

/** A small seeded generator (mulberry32) for the mix, the stream draw and the warm pick: the same --seed, the same draws. */
function rng (seed) {
  let a = seed >>> 0
  return () => {
    a = (a + 0x6d2b79f5) >>> 0
    let t = a
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
}

/** Peak RSS of a process (Linux VmHWM), bytes; undefined when it cannot be read. */
async function peakRss (pid) {
  try {
    const m = /VmHWM:\s+(\d+) kB/.exec(await readFile(`/proc/${pid}/status`, 'utf8'))
    return m ? Number(m[1]) * 1024 : undefined
  }
  catch {
    return undefined
  }
}

// ---------------------------------------------------------------------------------------------
// Requests. Streams with fetch (SSE parsed here, the time to the first content token taken), whole
// answers with the official openai client. Neither throws: what happened is in the sample.

let frontUrl
let modelName
let client
// With PD_API_KEY set, the stack's children require it (they inherit the environment): the clients send it too.
const apiKey = process.env.PD_API_KEY === undefined || process.env.PD_API_KEY === '' ? undefined : process.env.PD_API_KEY

function errorMessage (e) {
  return `${e?.name ?? 'Error'}: ${e?.cause?.code ?? ''}${e?.cause?.code ? ': ' : ''}${e?.message ?? String(e)}`.slice(0, 300)
}

async function sendStream (route, prompt) {
  const body = { model: modelName, messages: prompt.messages, max_tokens: opts.maxTokens, temperature: 0, stream: true, stream_options: { include_usage: true } }
  const started = performance.now()
  const sample = { route, status: null, streamed: true, ms: 0, ttftMs: null, verdict: null, promptTokens: prompt.tokens.length, retryAfter: null, message: null }
  try {
    const res = await fetch(`${frontUrl}/v1/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json', ...(apiKey === undefined ? {} : { authorization: `Bearer ${apiKey}` }) }, body: JSON.stringify(body), signal: AbortSignal.timeout(opts.requestTimeoutMs) })
    sample.status = res.status
    sample.verdict = res.headers.get('x-pd-bridge')
    if (res.status !== 200) {
      sample.retryAfter = res.headers.get('retry-after')
      const text = await res.text()
      if (isLoadError(res.status)) sample.message = `HTTP ${res.status}: ${text.slice(0, 240)}`
      return { ...sample, ms: performance.now() - started }
    }
    const decoder = new TextDecoder()
    let buffer = ''
    let sawDone = false
    let usage = false
    for await (const chunk of res.body) {
      buffer += decoder.decode(chunk, { stream: true })
      let nl
      while ((nl = buffer.indexOf('\n')) >= 0) {
        const line = buffer.slice(0, nl).trim()
        buffer = buffer.slice(nl + 1)
        if (!line.startsWith('data:')) continue
        const data = line.slice(5).trim()
        if (data === '[DONE]') {
          sawDone = true
          continue
        }
        const event = JSON.parse(data)
        const content = event.choices?.[0]?.delta?.content
        if (typeof content === 'string' && content !== '') sample.ttftMs ??= performance.now() - started
        if (event.usage) usage = true
        if (typeof event.pd_bridge?.verdict === 'string') sample.verdict = event.pd_bridge.verdict
        if (event.error) throw new Error(`error event in the stream: ${JSON.stringify(event.error).slice(0, 200)}`)
      }
    }
    if (!sawDone || !usage) throw new Error(`the stream ended without ${sawDone ? 'a usage chunk' : '[DONE]'}`)
    return { ...sample, ms: performance.now() - started }
  }
  catch (e) {
    // A 200 whose stream broke is an error as much as no answer.
    return { ...sample, status: null, message: `${sample.status === null ? '' : `after HTTP ${sample.status}: `}${errorMessage(e)}`, ms: performance.now() - started }
  }
}

async function sendWhole (route, prompt) {
  const started = performance.now()
  const sample = { route, status: null, streamed: false, ms: 0, ttftMs: null, verdict: null, promptTokens: prompt.tokens.length, retryAfter: null, message: null }
  try {
    const { data, response } = await client.chat.completions.create({ model: modelName, messages: prompt.messages, max_tokens: opts.maxTokens, temperature: 0 }).withResponse()
    if (!Array.isArray(data.choices) || data.choices.length === 0) throw new Error('an answer without choices')
    return { ...sample, status: response.status, verdict: data.pd_bridge?.verdict ?? response.headers.get('x-pd-bridge'), ms: performance.now() - started }
  }
  catch (e) {
    const status = typeof e?.status === 'number' ? e.status : null
    const h = e?.headers
    const header = (name) => (typeof h?.get === 'function' ? h.get(name) : h?.[name]) ?? null
    return {
      ...sample,
      status,
      verdict: header('x-pd-bridge'),
      retryAfter: status === 429 ? header('retry-after') : null,
      message: isLoadError(status) ? (status === null ? errorMessage(e) : `HTTP ${status}: ${String(e?.message ?? e).slice(0, 240)}`) : null,
      ms: performance.now() - started,
    }
  }
}

// ---------------------------------------------------------------------------------------------
// The workload.

let tokenizer
let cacheDir
/** Prompts answered 2xx whose full blocks are all in the decoder's store: what a warm request repeats. */
const warmPool = []
let promptCount = 0

/** Seed of the i-th prompt: each its own, hashed into the whole generator state by the builder. */
function promptSeed () {
  promptCount++
  return (opts.seed + promptCount * 0x9e3779b1) >>> 0
}

/** A fresh cold prompt whose blocks are none of them in the store (checked, as cold-bench does). */
async function coldPrompt (tokens = opts.coldTokens) {
  for (;;) {
    const p = buildDemoPrompt(tokenizer, tokens, promptSeed())
    const keys = promptBlockKeys(modelName, p.tokens, BLOCK)
    if ((await store.present(cacheDir, keys)).length === 0) return { ...p, keys }
  }
}

function shortPrompt () {
  return { ...buildDemoPrompt(tokenizer, opts.shortTokens, promptSeed()), keys: [] }
}

/** After a cold prompt's 2xx answer: into the warm pool once every one of its full blocks is stored. */
async function remember (prompt) {
  const usable = Math.floor((prompt.tokens.length - 1) / BLOCK)
  if (await store.holds(cacheDir, prompt.keys.slice(0, usable))) warmPool.push(prompt)
}

async function sendOne (route, draw) {
  let prompt
  if (route === 'bridged') prompt = await coldPrompt()
  else if (route === 'warm') prompt = warmPool[Math.floor(draw() * warmPool.length)]
  else prompt = shortPrompt()
  const streamed = draw() < opts.streamShare
  const s = streamed ? await sendStream(route, prompt) : await sendWhole(route, prompt)
  if (route === 'bridged' && s.status !== null && s.status >= 200 && s.status <= 299) await remember(prompt)
  return s
}

function pickRoute (draw) {
  const x = draw()
  if (x < opts.mix.bridged) return 'bridged'
  if (x < opts.mix.bridged + opts.mix.warm) return 'warm'
  return 'native-short'
}

function ms (x) {
  return `${(x / 1000).toFixed(2)} s`
}

// ---------------------------------------------------------------------------------------------
// The concurrency levels. Every request is streamed by the official openai client with seeded
// sampling and return_token_ids; its solo run is the same body sent alone, whole, to a second
// decoder of the kind with its own store (startNativeLeg): the project's claim is that an answer is
// a pure function of (prompt, parameters, seed), whatever the cache held and whatever ran beside it.

let soloClient
/** The errors of a kind's run (no answer, or neither 2xx nor 429), with the level they happened at (0: the latency probe). */
const errorLog = []
function logErrors (clients, samples) {
  for (const s of samples) if (isLoadError(s.status)) errorLog.push({ clients, route: s.route, status: s.status, message: (s.message ?? '').slice(0, 300) })
}
/** Seed of the n-th sampled request: each its own, from the invocation seed. */
let requestCount = 0
function requestSeed () {
  requestCount++
  return (Math.imul(opts.seed ^ 0x5bd1e995, 0x01000193) + requestCount * 0x9e3779b1) >>> 0
}

function seededBody (prompt, seed, maxTokens = opts.maxTokens) {
  return { model: modelName, messages: prompt.messages, max_tokens: maxTokens, temperature: levelOpts.temperature, top_p: levelOpts.topP, seed, return_token_ids: true }
}

/** One streamed request through the front door; never throws (what happened is in the sample). */
async function sendSeeded (route, prompt, maxTokens = opts.maxTokens) {
  const body = seededBody(prompt, requestSeed(), maxTokens)
  const start = performance.now()
  const s = { route, status: null, start, first: null, end: start, completionTokens: 0, verdict: null, sameAsSolo: null, message: null, body, ids: null }
  try {
    const { data: stream, response } = await client.chat.completions.create({ ...body, stream: true, stream_options: { include_usage: true } }).withResponse()
    s.status = response.status
    s.verdict = response.headers.get('x-pd-bridge')
    for await (const chunk of stream) {
      const choice = chunk.choices?.[0]
      if (typeof choice?.delta?.content === 'string' && choice.delta.content !== '') s.first ??= performance.now()
      if (Array.isArray(choice?.token_ids)) s.ids = choice.token_ids
      if (chunk.usage) s.completionTokens = chunk.usage.completion_tokens
      if (typeof chunk.pd_bridge?.verdict === 'string') s.verdict = chunk.pd_bridge.verdict
    }
    if (s.ids === null) throw new Error('the stream carried no token_ids (return_token_ids was asked)')
  }
  catch (e) {
    const status = typeof e?.status === 'number' ? e.status : null
    s.message = status === null ? `${s.status === null ? '' : `after HTTP ${s.status}: `}${errorMessage(e)}` : `HTTP ${status}: ${String(e?.message ?? e).slice(0, 240)}`
    s.status = status
  }
  s.end = performance.now()
  return s
}

/** Each 2xx answer sent again, alone, to the solo decoder; sameAsSolo says whether the ids agree. */
async function compareWithSolo (samples) {
  for (const s of samples) {
    if (s.status === null || s.status < 200 || s.status > 299) continue
    try {
      const solo = await soloClient.chat.completions.create(s.body)
      s.sameAsSolo = JSON.stringify(solo.choices[0].token_ids) === JSON.stringify(s.ids)
    }
    catch (e) {
      s.sameAsSolo = false
      s.message = `its solo run failed: ${errorMessage(e)}`
    }
    if (s.sameAsSolo === false) say(`differs from its solo run (${s.route}, seed ${s.body.seed}): ${JSON.stringify(s.ids)}${s.message === null ? '' : ` (${s.message})`}`)
  }
}

/** VmRSS of every process in `pids`, sampled every 100 ms until stop(): the peak of each, bytes. */
function sampleRss (pids) {
  const peak = {}
  let running = true
  const read = async () => {
    for (const [name, pid] of pids) {
      try {
        const m = /VmRSS:\s+(\d+) kB/.exec(await readFile(`/proc/${pid}/status`, 'utf8'))
        if (m) peak[name] = Math.max(peak[name] ?? 0, Number(m[1]) * 1024)
      }
      catch {}
    }
  }
  const loop = (async () => {
    while (running) {
      await read()
      await new Promise((r) => setTimeout(r, 100))
    }
  })()
  return async () => {
    running = false
    await loop
    await read()
    return Object.fromEntries(Object.entries(peak).sort(([a], [b]) => a.localeCompare(b)))
  }
}

let decoderUrl
/** The decoder's batch counters (/health `batch`: a kind that batches has them), or null. */
async function batchCounters () {
  try {
    const res = await fetch(`${decoderUrl}/health`, { headers: apiKey === undefined ? {} : { authorization: `Bearer ${apiKey}` }, signal: AbortSignal.timeout(30_000) })
    const b = (await res.json())?.batch
    return typeof b?.steps === 'number' && typeof b?.rows === 'number' && typeof b?.chunks === 'number' ? b : null
  }
  catch {
    return null
  }
}

/**
 * Where the decoder's time went during a level (its batch timing counters' differences, ms; absent
 * for a decoder that does not report them): per step inside decodeBatch, per chunk, per row in the
 * sampler, and the seated wall time split into the steps, the chunks, the rest of the event loop's
 * active time (text, streams, routes: `otherActiveMs`) and its idle time (`idleMs`).
 */
function batchTime (before, after) {
  const keys = ['stepMs', 'chunkMs', 'pickMs', 'seatedMs', 'loopActiveMs', 'partialSteps']
  if (!keys.every((k) => typeof before[k] === 'number' && typeof after[k] === 'number')) return undefined
  const d = Object.fromEntries(keys.map((k) => [k, after[k] - before[k]]))
  const steps = after.steps - before.steps
  const rows = after.rows - before.rows
  const chunks = after.chunks - before.chunks
  return {
    seatedMs: d.seatedMs, stepMs: d.stepMs, chunkMs: d.chunkMs, pickMs: d.pickMs,
    otherActiveMs: Math.max(0, d.loopActiveMs - d.stepMs - d.chunkMs - d.pickMs),
    idleMs: Math.max(0, d.seatedMs - d.loopActiveMs),
    stepMsPerStep: steps > 0 ? d.stepMs / steps : null,
    seatedMsPerStep: steps > 0 ? d.seatedMs / steps : null,
    pickMsPerRow: rows > 0 ? d.pickMs / rows : null,
    chunkMsPerChunk: chunks > 0 ? d.chunkMs / chunks : null,
    partialSteps: d.partialSteps,
  }
}

/** The decoder's step profile in words, or nothing. */
function stepTimeText (t) {
  if (t === undefined || t.stepMsPerStep === null) return ''
  return `; per step ${t.seatedMsPerStep.toFixed(0)} ms seated, ${t.stepMsPerStep.toFixed(0)} ms in decodeBatch; of ${(t.seatedMs / 1000).toFixed(1)} s seated: steps ${(t.stepMs / 1000).toFixed(1)}, chunks ${(t.chunkMs / 1000).toFixed(1)}, sampling ${(t.pickMs / 1000).toFixed(1)} (${t.pickMsPerRow?.toFixed(1)} ms a row), other ${(t.otherActiveMs / 1000).toFixed(1)}, idle ${(t.idleMs / 1000).toFixed(1)}; ${t.partialSteps} partial steps`
}

/** One level: `clients` clients, each sending requestsPerClient requests one after another; then the solo runs. */
async function runLevel (clients, stackPids) {
  const samples = []
  const batchBefore = await batchCounters()
  const loadStart = loadavg()[0]
  const stopRss = sampleRss(stackPids)
  await Promise.all(Array.from({ length: clients }, async (_, i) => {
    const draw = rng((opts.seed ^ Math.imul(clients * 131 + i + 1, 0x85ebca6b)) >>> 0)
    for (let k = 0; k < levelOpts.requestsPerClient; k++) {
      const route = pickRoute(draw)
      const prompt = route === 'bridged' ? await coldPrompt() : route === 'warm' ? warmPool[Math.floor(draw() * warmPool.length)] : shortPrompt()
      const s = await sendSeeded(route, prompt)
      samples.push(s)
      if (s.message !== null) say(`error at ${clients} clients (${route}): ${s.message}`)
      if (route === 'bridged' && s.status === 200) await remember(prompt)
    }
  }))
  const peakRssBytes = await stopRss()
  const loadEnd = loadavg()[0]
  const batchAfter = await batchCounters()
  const steps = batchAfter === null || batchBefore === null ? null : batchAfter.steps - batchBefore.steps
  const rows = steps === null ? 0 : batchAfter.rows - batchBefore.rows
  const decoderBatch = steps === null ? null : { steps, rows, meanRows: steps > 0 ? rows / steps : null, chunks: batchAfter.chunks - batchBefore.chunks, time: batchTime(batchBefore, batchAfter) }
  await compareWithSolo(samples)
  logErrors(clients, samples)
  return { samples, level: summarizeLevel(clients, samples, { peakRssBytes, loadAverage: { start: loadStart, end: loadEnd }, decoderBatch }) }
}

/** The latency probe: short prompts one after another on the idle stack, then while long prompts (max_tokens 1: little but the bridge) run. */
async function runLatencyProbe () {
  const n = levelOpts.latencySamples
  const idle = []
  for (let i = 0; i < n; i++) idle.push(await sendSeeded('native-short', shortPrompt()))
  const under = []
  const outside = []
  const longs = []
  let longRunning = false
  let long = Promise.resolve()
  const startLong = async () => {
    const prompt = await coldPrompt(levelOpts.longTokens)
    longRunning = true
    long = sendSeeded('bridged', prompt, 1).then((s) => { longs.push(s); longRunning = false })
  }
  // Bounded: a stack that answers the long prompt faster than a short one still ends.
  for (let tries = 0; under.length < n && tries < 4 * n; tries++) {
    if (!longRunning) await startLong()
    const s = await sendSeeded('native-short', shortPrompt())
    ;(longRunning ? under : outside).push(s)
  }
  await long
  await compareWithSolo([...idle, ...under, ...outside, ...longs])
  logErrors(0, [...idle, ...under, ...outside, ...longs])
  for (const s of [...idle, ...under, ...outside, ...longs]) if (s.message !== null) say(`latency probe (${s.route}): ${s.message}`)
  return summarizeLatency(n, idle, under, outside, longs)
}

/** One decoder kind: its stack, a warm-up, every level, the latency probe; its record. */
async function runKind (kind) {
  const startedAt = new Date().toISOString()
  const runId = `${startedAt.replace(/[:.]/g, '-')}-load-levels-${kind.replace(/[^a-z0-9]+/gi, '-')}-${opts.seed}`
  const base = resolveStateDir(opts.stateDir)
  const home = join(base, 'runs', `load-${runId}`)
  const pids = new Map([['protocol', process.pid]])
  let keep = opts.keepState
  let stack
  let solo
  let record
  warmPool.length = 0
  errorLog.length = 0
  store = storeOf(STACK_KINDS.find((k) => k.name === kind))
  const stopAll = async () => { await stack?.stop().catch(() => {}) }
  const onSigint = () => { void stopAll().finally(() => process.exit(130)) }
  process.once('SIGINT', onSigint)
  try {
    await mkdir(home, { recursive: true })
    say(`${kind}: starting the embedded stack (${PRESET}, blocks of ${BLOCK}, decoder ${kind}); the run's home ${home}`)
    stack = await startEmbeddedStack({
      stateDir: base, home, preset: PRESET, seed: SEED, blockSize: BLOCK, port: 0, decoderEngine: kind,
      onEvent: (e) => {
        if ((e.kind === 'ready' || e.kind === 'restarted') && e.name !== 'decoder-native') pids.set(e.name, e.pid)
        if (e.kind === 'ready') say(`${e.name.padEnd(15)} ready   ${e.url}  pid ${e.pid}  (${(e.ms / 1000).toFixed(1)} s)`)
        if (e.kind === 'asset' && e.action !== 'making') say(`${e.what} ${e.action} ${e.dir}`)
      },
      onDeath: (message) => say(`a child died: ${message}`),
    })
    frontUrl = stack.urls.front
    decoderUrl = stack.urls.decoder
    modelName = stack.modelName
    cacheDir = stack.cacheDir
    tokenizer = await loadTokenizer(stack.checkpoint.dir)
    solo = await startNativeLeg(stack, `load-solo-${kind.replace(/[^a-z0-9]+/gi, '-')}`)
    const environment = embeddedEnvironment({ preset: PRESET, seed: SEED, blockSize: BLOCK, prefillProfile: stack.prefillLabel, sidecarFingerprint: stack.sidecar.fingerprint })
    client = new OpenAI({ baseURL: `${frontUrl}/v1`, apiKey: apiKey ?? 'none', maxRetries: 0, timeout: opts.requestTimeoutMs })
    soloClient = new OpenAI({ baseURL: `${solo.url}/v1`, apiKey: apiKey ?? 'none', maxRetries: 0, timeout: opts.requestTimeoutMs })

    if (opts.mix.bridged > 0 || opts.mix.warm > 0) {
      say(`${kind}: warm-up: one cold prompt and its warm repeat (not counted)`)
      const first = await coldPrompt()
      const w1 = await sendSeeded('bridged', first)
      if (w1.status !== 200) throw new Error(`the warm-up cold prompt got ${w1.message ?? `HTTP ${w1.status}`}`)
      await remember(first)
      if (warmPool.length === 0) throw new Error(`the warm-up cold prompt (${w1.verdict}) left its blocks out of the decoder's store; no warm prompt to repeat`)
      const w2 = await sendSeeded('warm', first)
      if (w2.status !== 200) throw new Error(`the warm-up warm repeat got ${w2.message ?? `HTTP ${w2.status}`}`)
    }
    else {
      // A mix of short prompts only needs no warm pool: one short prompt pays the first-call costs.
      say(`${kind}: warm-up: one short prompt (not counted)`)
      const w = await sendSeeded('native-short', shortPrompt())
      if (w.status !== 200) throw new Error(`the warm-up short prompt got ${w.message ?? `HTTP ${w.status}`}`)
    }

    const levels = []
    for (const clients of levelOpts.levels) {
      const { level } = await runLevel(clients, pids)
      levels.push(level)
      const p = (x) => (x === null ? '—' : ms(x.p99))
      say(`${kind}: ${clients} clients: ${level.requests} requests, ${level.errors} errors, ${level.decodeTokensPerS === null ? '—' : level.decodeTokensPerS.toFixed(1)} decode tokens/s, TTFT p99 ${p(level.ttftMs)}, end to end p99 ${p(level.latencyMs)}, ${level.answersDiffering} of ${level.answersCompared} differ from solo, load ${level.loadAverage.end.toFixed(1)}${level.decoderBatch?.meanRows == null ? '' : `, mean batch ${level.decoderBatch.meanRows.toFixed(2)} over ${level.decoderBatch.steps} steps`}${stepTimeText(level.decoderBatch?.time)}`)
    }
    let latency = null
    if (levelOpts.latencySamples > 0) {
      say(`${kind}: latency probe: ${levelOpts.latencySamples} short prompts idle, then under a bridge of ${levelOpts.longTokens} tokens`)
      latency = await runLatencyProbe()
    }
    record = {
      schema: LOAD_LEVELS_RECORD_SCHEMA,
      runId,
      startedAt,
      finishedAt: new Date().toISOString(),
      environment,
      decoder: { kind, profile: stack.profile },
      machine: { cpus: cpus().length, cpu: cpus()[0]?.model ?? 'unknown', totalMemoryBytes: totalmem() },
      definitions: LOAD_LEVELS_DEFINITIONS,
      settings: {
        preset: PRESET,
        levels: levelOpts.levels, requestsPerClient: levelOpts.requestsPerClient, mix: opts.mix, coldTokens: opts.coldTokens, shortTokens: opts.shortTokens,
        longTokens: levelOpts.longTokens, maxTokens: opts.maxTokens, temperature: levelOpts.temperature, topP: levelOpts.topP, seed: opts.seed,
        latencySamples: levelOpts.latencySamples, requestTimeoutMs: opts.requestTimeoutMs,
      },
      levels,
      latency,
      ...loadLevelsVerdict(levels, latency),
      errorSamples: errorLog.splice(0).slice(0, 20),
    }
  }
  catch (err) {
    say(`${kind}: stopped: ${err.message}`)
    process.exitCode = 1
    keep = true
  }
  finally {
    await stopAll()
    process.removeListener('SIGINT', onSigint)
    if (!keep) await solo?.remove()
  }
  if (record !== undefined) {
    const dir = join(opts.runs, 'levels')
    await mkdir(dir, { recursive: true })
    const file = join(dir, `${runId}.json`)
    parseLoadLevelsRecord(record, file)
    await writeFile(file, JSON.stringify(record, null, 2) + '\n')
    say(`wrote ${file}`)
    process.stdout.write(`${loadLevelsHeadline(record)}\n`)
    if (record.totals.errors > 0 || record.totals.answersDiffering > 0) {
      process.exitCode = 1
      keep = true
    }
  }
  if (keep) say(`state kept: ${home} (logs in ${join(home, 'logs')})`)
  else await rm(home, { recursive: true, force: true })
  return record
}

if (!timedMode) {
  let written = 0
  for (const kind of levelOpts.decoders) if (await runKind(kind) !== undefined) written++
  if (written > 0 && regenerate) {
    try {
      const r = await generateResults(join(opts.out, 'runs'), opts.out, undefined, undefined, undefined, opts.runs)
      say(`results: ${r.loadRecords} load records, ${r.loadLevelsRecords} load-levels records -> ${r.files.map((f) => join(opts.out, f)).join(', ')}`)
    }
    catch (err) {
      say(`results not regenerated: ${err.message}`)
      process.exitCode = 1
    }
  }
  else if (written > 0 && opts.generate) say('RESULTS.md not regenerated: --runs was given without --out (pass --out DIR to write a report with these records)')
  process.exit(process.exitCode ?? 0)
}

// ---------------------------------------------------------------------------------------------

const startedAt = new Date().toISOString()
const runId = `${startedAt.replace(/[:.]/g, '-')}-load-${opts.seed}`
const base = resolveStateDir(opts.stateDir)
const home = join(base, 'runs', `load-${runId}`)
let keep = opts.keepState
let stack
let record
const pids = new Map([['protocol', process.pid]])
const samples = []
let wallMs

const stopAll = async () => { await stack?.stop().catch(() => {}) }
process.once('SIGINT', () => { void stopAll().finally(() => process.exit(130)) })

try {
  await mkdir(home, { recursive: true })
  // The front door's settings of this run: its own front.json in its own home (never the user's).
  if (opts.whenFull !== 'native') await writeFile(join(home, 'front.json'), JSON.stringify({ queue: { whenFull: opts.whenFull } }, null, 2) + '\n')
  say(`starting the embedded stack (${PRESET}, blocks of ${BLOCK}); checkpoint and sidecar in ${base}, the run's home ${home}`)
  stack = await startEmbeddedStack({
    stateDir: base, home, preset: PRESET, seed: SEED, blockSize: BLOCK, port: 0,
    onEvent: (e) => {
      if (e.kind === 'ready' || e.kind === 'restarted') pids.set(e.name, e.pid)
      if (e.kind === 'ready') say(`${e.name.padEnd(15)} ready   ${e.url}  pid ${e.pid}  (${(e.ms / 1000).toFixed(1)} s)`)
      if (e.kind === 'asset' && e.action !== 'making') say(`${e.what} ${e.action} ${e.dir}`)
    },
    onDeath: (message) => say(`a child died: ${message}`),
  })
  frontUrl = stack.urls.front
  modelName = stack.modelName
  cacheDir = stack.cacheDir
  tokenizer = await loadTokenizer(stack.checkpoint.dir)
  if (modelName !== embeddedModelName(PRESET, SEED)) throw new Error(`the stack serves ${modelName}, but verify/results/environment.ts names it ${embeddedModelName(PRESET, SEED)}; fix embeddedModelName`)
  const environment = embeddedEnvironment({ preset: PRESET, seed: SEED, blockSize: BLOCK, prefillProfile: stack.prefillLabel, sidecarFingerprint: stack.sidecar.fingerprint })
  client = new OpenAI({ baseURL: `${frontUrl}/v1`, apiKey: apiKey ?? 'none', maxRetries: 0, timeout: opts.requestTimeoutMs })

  // Warm-up, not timed: one cold prompt bridged (it seeds the warm pool), its warm repeat, one short prompt.
  say('warm-up: one cold prompt, its warm repeat and one short prompt (not counted)')
  const first = await coldPrompt()
  const w1 = await sendWhole('bridged', first)
  if (w1.status !== 200) throw new Error(`the warm-up cold prompt got ${w1.message ?? `HTTP ${w1.status}`}`)
  await remember(first)
  if (warmPool.length === 0) throw new Error(`the warm-up cold prompt (${w1.verdict}) left its blocks out of the decoder's store; no warm prompt to repeat`)
  const w2 = await sendStream('warm', first)
  const w3 = await sendStream('native-short', shortPrompt())
  say(`warm-up: cold ${w1.verdict} in ${ms(w1.ms)}; warm ${w2.verdict} in ${ms(w2.ms)}; short ${w3.verdict} in ${ms(w3.ms)}`)
  if ([w2, w3].some((s) => s.status !== 200)) throw new Error(`a warm-up request failed: ${[w2, w3].map((s) => s.message ?? `HTTP ${s.status}`).join('; ')}`)

  // The timed window: every client sends one request after another until the deadline; those in flight finish.
  say(`${opts.clients} clients for ${opts.durationS} s (mix ${ROUTES.map((r) => `${Math.round(opts.mix[r] * 100)}% ${r}`).join(', ')}, ${Math.round(opts.streamShare * 100)}% streamed, seed ${opts.seed})`)
  progress = startProgress({ label: 'load', total: opts.durationS, unit: 's' })
  const t0 = performance.now()
  const end = t0 + opts.durationS * 1000
  let errors = 0
  let limited = 0
  let inFlight = 0
  const tick = () => {
    const elapsed = Math.min(opts.durationS, (performance.now() - t0) / 1000)
    progress.tick(Math.floor(elapsed), { requests: samples.length, errors, rate_limited: limited, in_flight: inFlight })
  }
  const clientLoop = async (i) => {
    const draw = rng((opts.seed ^ Math.imul(i + 1, 0x85ebca6b)) >>> 0)
    while (performance.now() < end) {
      inFlight++
      const s = await sendOne(pickRoute(draw), draw)
      inFlight--
      samples.push(s)
      if (isLoadError(s.status)) {
        errors++
        if (errors <= 5) say(`error (${s.route}, ${s.streamed ? 'stream' : 'whole'}): ${s.message}`)
      }
      if (s.status === 429) limited++
      tick()
    }
  }
  await Promise.all(Array.from({ length: opts.clients }, (_, i) => clientLoop(i)))
  wallMs = performance.now() - t0
  progress.tick(opts.durationS, { requests: samples.length, errors, rate_limited: limited, in_flight: 0 })
  progress.done()
  progress = undefined

  const peakMemoryBytes = {}
  for (const [name, pid] of [...pids].sort(([a], [b]) => a.localeCompare(b))) {
    const peak = await peakRss(pid)
    if (peak !== undefined) peakMemoryBytes[name] = peak
  }
  record = {
    schema: LOAD_RECORD_SCHEMA,
    runId,
    startedAt,
    finishedAt: new Date().toISOString(),
    environment,
    settings: {
      clients: opts.clients, durationS: opts.durationS, mix: opts.mix, streamShare: opts.streamShare, coldTokens: opts.coldTokens,
      shortTokens: opts.shortTokens, maxTokens: opts.maxTokens, requestTimeoutMs: opts.requestTimeoutMs, whenFull: opts.whenFull, seed: opts.seed,
    },
    wallMs,
    ...loadTotals(samples),
    peakMemoryBytes,
  }
}
catch (err) {
  progress?.fail(err.message)
  progress = undefined
  say(`stopped: ${err.message}`)
  process.exitCode = 1
  keep = true
}
finally {
  await stopAll()
}

if (record !== undefined) {
  await mkdir(opts.runs, { recursive: true })
  const file = join(opts.runs, `${runId}.json`)
  parseLoadRecord(record, file)
  await writeFile(file, JSON.stringify(record, null, 2) + '\n')
  say(`wrote ${file}`)
  process.stdout.write(`${loadHeadline(record)}\n`)
  for (const r of record.routes) {
    const p = (x, k) => (x === null ? '—' : ms(x[k]))
    process.stdout.write(`  ${r.route.padEnd(13)} ${String(r.requests).padStart(5)} requests, ${r.errors} errors, ${r.rateLimited} 429s; p50 ${p(r.latencyMs, 'p50')}, p90 ${p(r.latencyMs, 'p90')}, p99 ${p(r.latencyMs, 'p99')}; TTFT p50 ${p(r.ttftMs, 'p50')}, p99 ${p(r.ttftMs, 'p99')}\n`)
    for (const v of r.verdicts) process.stdout.write(`      ${String(v.requests).padStart(5)} × ${v.verdict}\n`)
  }
  if (record.totals.errors > 0) {
    process.exitCode = 1
    keep = true
  }
  if (regenerate) {
    try {
      const r = await generateResults(join(opts.out, 'runs'), opts.out, undefined, undefined, undefined, opts.runs)
      say(`results: ${r.records} run records, ${r.microRecords} micro-benchmark records, ${r.needleRecords} needle records, ${r.faultsRecords} faults records, ${r.loadRecords} load records -> ${r.files.map((f) => join(opts.out, f)).join(', ')}`)
    }
    catch (err) {
      say(`results not regenerated: ${err.message}`)
      process.exitCode = 1
    }
  }
  else if (opts.generate) say('RESULTS.md not regenerated: --runs was given without --out (pass --out DIR to write a report with these records)')
}
if (keep) say(`state kept: ${home} (logs in ${join(home, 'logs')})`)
else await rm(home, { recursive: true, force: true })
