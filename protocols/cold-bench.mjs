#!/usr/bin/env node
// The cold-prompt benchmark protocol (docs/BENCHMARK-PROTOCOL.md). Against the embedded stack by
// default, or a deployment with --url (bridged front door) and --native-url (decoder alone).
// Per run: a fresh seed and a unique document, the bridged leg, then the native leg, one JSON
// record under results/runs/. At the end it regenerates RESULTS.md (pd-bridge results) from those
// records and the micro-benchmark records in results/micro/ (--micro; default: micro/ next to --runs),
// but only when the records went to the checkout's results/runs/ (the default) or --out names
// where the report goes: a --runs elsewhere alone is a trial and leaves results/ alone.
//
//   npx zx protocols/cold-bench.mjs --sizes 4096,16384,32000 --repeats 3 [--seed N]
//   npx zx protocols/cold-bench.mjs --help
import { createHash, randomBytes } from 'node:crypto'
import { mkdir, readFile, rename, writeFile } from 'node:fs/promises'
import { basename, join, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'
import { argv } from 'zx'
import { Agent, fetch } from 'undici'
import { register } from 'tsx/esm/api'
import { checkArgv, helpAndExit, prefillEngineFlags, PREFILL_ENGINE_FLAGS, prefillEngineUsage, usageError } from './flags.mjs'
import { forEachEvent } from './sse-events.mjs'

const REPO = resolve(fileURLToPath(new URL('..', import.meta.url)))
const DEFAULT_RUNS = join(REPO, 'results', 'runs')
const DEFAULT_OUT = join(REPO, 'results')
const DEFAULT_SIZES = '4096,16384,32000'
// buildDemoPrompt goes past its target by less than one sentence (at most 48 tokens in the
// committed runs); the up-front window check keeps this much room for it.
const PROMPT_SLACK = 64

const USAGE = `Usage: npx zx protocols/cold-bench.mjs [options]   (node runs it as well)

The cold-prompt benchmark (docs/BENCHMARK-PROTOCOL.md): per run a fresh document, the bridged leg,
then the decoder-alone leg, one record in --runs; then RESULTS.md is regenerated.

  --sizes N,N,...        prompt sizes in tokens (default ${DEFAULT_SIZES}); each plus --max-tokens
                         must fit the served window (the embedded presets: tiny and needle 32,768,
                         small 65,536), else the run is refused before anything starts
  --repeats N            runs per size, each with its own seed (default 3)
  --seed N               the invocation seed (default: random)
  --max-tokens N         the answer budget (default 300)
  --preset NAME          embedded stack's checkpoint preset (default tiny)
  --block-size N         embedded stack's decoder block size (default 256)
  --decoder KIND         embedded stack's decoder: ours (default) or llama.cpp (an f32 GGUF of the
                         checkpoint on as many threads as ours; with --prefill-engine torch, give
                         --torch-dtype f32): both legs run it, the bridged one and the one alone
  --state-dir DIR        embedded stack's state directory (default $PD_STATE_DIR or ~/.cache/pd-bridge)
${prefillEngineUsage(25)}  --url URL              a deployment's bridged front door instead of the embedded stack
  --native-url URL       that deployment's decoder alone (with --url)
  --model NAME           the model name to ask a deployment for
  --leg-timeout-s N      per leg (default 1800)
  --stop-unless-complete stop at the first bridged leg whose verdict is not complete, before its
                         decoder-alone leg (no record for it): for runs whose alone legs are costly
  --bridged-only         no decoder-alone leg at all (records with native: null): the long runs
                         (docs/long-runs.md), where the alone leg would double hours of prefill
  --alone-only           the decoder-alone legs only (embedded stack), each written to --legs to
                         wait for its bridged leg: for a pair too long for one call of a lender
                         that ends its processes with the call (docs/BENCHMARK-PROTOCOL.md)
  --pair-apart           the bridged leg of every leg waiting in --legs from this environment and
                         commit, on the same prompt and answer budget (so no --sizes, --repeats,
                         --seed or --max-tokens); one run record per pair, the leg moved to paired/
  --legs DIR             where --alone-only writes and --pair-apart reads (default: legs/ in the
                         state directory, which outlives the checkout on a lent machine)
  --stream-blocks        the embedded stack's front door writes blocks while the engine runs
                         (capture.streamBlocks; the engine must say stream_blocks in its /health,
                         else it falls back to writing after the seal); records carry stream timings
  --runs DIR             where run records go (default results/runs in this checkout)
  --micro DIR            micro-benchmark records for the report (default micro/ next to --runs)
  --out DIR              where RESULTS.md, report.html and the charts go (default results/ in this
                         checkout, regenerated only when --runs is the default; with another
                         --runs, give --out to get a report)
  --no-generate          do not regenerate the report
  -h, --help             this text (nothing is started or written)

Progress goes to stderr: one line per step, and a live line on a terminal (JSON lines elsewhere;
PD_PROGRESS=off to silence it, docs/progress.md).
`
helpAndExit(USAGE)
checkArgv('cold-bench', argv, {
  sizes: 'string', repeats: 'string', seed: 'string', 'max-tokens': 'string', url: 'string', 'native-url': 'string',
  runs: 'string', micro: 'string', out: 'string', generate: 'negatable', preset: 'string', 'block-size': 'string', decoder: 'string',
  'state-dir': 'string', 'leg-timeout-s': 'string', model: 'string', 'stop-unless-complete': 'boolean', 'bridged-only': 'boolean',
  'alone-only': 'boolean', 'pair-apart': 'boolean', legs: 'string', 'stream-blocks': 'boolean', ...PREFILL_ENGINE_FLAGS,
})

function fail (message) {
  usageError('cold-bench', message)
}

function intList (name, text) {
  const list = String(text).split(',').map((s) => s.trim())
  if (list.some((s) => !/^\d+$/.test(s) || Number(s) < 1)) fail(`--${name} must be positive integers separated by commas, got ${JSON.stringify(text)}`)
  return list.map(Number)
}

function int (name, text, min) {
  if (!/^\d+$/.test(String(text)) || Number(text) < min) fail(`--${name} must be an integer >= ${min}, got ${JSON.stringify(text)}`)
  return Number(text)
}

const opts = {
  sizes: intList('sizes', argv.sizes ?? DEFAULT_SIZES),
  repeats: int('repeats', argv.repeats ?? 3, 1),
  seed: argv.seed === undefined ? randomBytes(4).readUInt32LE(0) : int('seed', argv.seed, 0),
  maxTokens: int('max-tokens', argv['max-tokens'] ?? 300, 1),
  url: argv.url === undefined ? undefined : String(argv.url),
  nativeUrl: argv['native-url'] === undefined ? undefined : String(argv['native-url']),
  runs: argv.runs === undefined ? DEFAULT_RUNS : resolve(String(argv.runs)),
  micro: argv.micro === undefined ? undefined : String(argv.micro),
  out: argv.out === undefined ? DEFAULT_OUT : resolve(String(argv.out)),
  generate: argv.generate !== false,
  preset: String(argv.preset ?? 'tiny'),
  blockSize: int('block-size', argv['block-size'] ?? 256, 1),
  decoder: argv.decoder === undefined ? undefined : String(argv.decoder),
  stateDir: argv['state-dir'] === undefined ? undefined : String(argv['state-dir']),
  legTimeoutMs: int('leg-timeout-s', argv['leg-timeout-s'] ?? 1800, 1) * 1000,
  model: argv.model === undefined ? undefined : String(argv.model),
  stopUnlessComplete: argv['stop-unless-complete'] === true,
  bridgedOnly: argv['bridged-only'] === true,
  aloneOnly: argv['alone-only'] === true,
  pairApart: argv['pair-apart'] === true,
  streamBlocks: argv['stream-blocks'] === true,
  legs: argv.legs === undefined ? undefined : resolve(String(argv.legs)),
  torchFlags: prefillEngineFlags('cold-bench', argv, argv.url !== undefined),
}
// The report is regenerated from --runs alone; into the checkout's results/ only from the
// checkout's own records, anywhere else only where --out says.
// --alone-only writes no run record, so there is nothing new to report.
const regenerate = opts.generate && !opts.aloneOnly && (argv.out !== undefined || opts.runs === DEFAULT_RUNS)
if ((opts.url === undefined) !== (opts.nativeUrl === undefined) && opts.url === undefined) fail('--native-url needs --url (the bridged front door) too')
if (opts.bridgedOnly && opts.nativeUrl !== undefined) fail('--bridged-only runs no decoder-alone leg: leave out --native-url')
if ([opts.bridgedOnly, opts.aloneOnly, opts.pairApart].filter(Boolean).length > 1) fail('--bridged-only, --alone-only and --pair-apart each choose the legs: give one')
if ((opts.aloneOnly || opts.pairApart) && opts.url !== undefined) fail(`--${opts.aloneOnly ? 'alone-only' : 'pair-apart'} runs on the embedded stack: leave out --url`)
if (opts.legs !== undefined && !opts.aloneOnly && !opts.pairApart) fail('--legs goes with --alone-only or --pair-apart')
if (opts.decoder !== undefined && opts.url !== undefined) fail('--decoder chooses the embedded stack\'s decoder: leave it out with --url')
if (opts.pairApart) {
  const given = ['sizes', 'repeats', 'seed', 'max-tokens'].filter((f) => argv[f] !== undefined)
  if (given.length > 0) fail(`--pair-apart takes each prompt's size, seed and answer budget from its decoder-alone leg: leave out ${given.map((f) => `--${f}`).join(', ')}`)
  if (opts.stopUnlessComplete) fail('--pair-apart runs no decoder-alone leg for --stop-unless-complete to spare: leave it out')
}

// The stack and the generator are TypeScript; tsx lets this protocol import them as they are.
register()
const { startEmbeddedStack, startNativeLeg, decoderLabel, EMBEDDED_DEFAULTS } = await import('../src/stack/embedded.ts')
const { decoderEngineOption } = await import('../src/cli/commands/serve.ts')
const { buildDemoPrompt } = await import('../src/stack/demo/prompt.ts')
const { promptBlockKeys, presentKeys } = await import('../src/stack/demo/blocks.ts')
const { loadTokenizer } = await import('../src/model/tokenizer/index.ts')
const { isPresetName, presetConfig, PRESET_NAMES } = await import('../src/model/checkpoint/index.ts')
const { resolveStateDir } = await import('../src/stack/state-dir.ts')
const { torchPrefillEngine } = await import('../src/stack/torch-prefill.ts')
// With PD_API_KEY set, every service of the stack requires it (they inherit the environment): the legs send it.
const { apiKeyFromEnv, authHeaders } = await import('../src/http/api-key.ts')
let torchPrefill
let decoderEngine
try {
  if (opts.torchFlags !== undefined) torchPrefill = torchPrefillEngine(opts.torchFlags)
  if (opts.decoder !== undefined) decoderEngine = decoderEngineOption(opts.decoder)
}
catch (err) {
  fail(err.message)
}
const { generateResults } = await import('../verify/results/generate.ts')
const { embeddedEnvironment, embeddedModelName, remoteEnvironment } = await import('../verify/results/environment.ts')
const { RUN_RECORD_SCHEMA, bridgedOverEngine, parseRunRecord } = await import('../verify/results/record.ts')
const { APART_LEG_SCHEMA, pairApartLeg, parseApartLeg, promptDigest, readApartLegs, runIdOf } = await import('../verify/results/apart-leg.ts')
const { resolveProgressMode, startProgress } = await import('../src/progress/index.ts')
try {
  resolveProgressMode(process.stderr) // a bad PD_PROGRESS is a usage error, found before anything starts
}
catch (err) {
  fail(err.message)
}

// The embedded stack serves its preset's max_position_embeddings: a size that cannot hold its
// prompt and the answer budget is refused now, not after the stack started and the earlier sizes ran.
let window
if (opts.url === undefined) {
  if (!isPresetName(opts.preset)) fail(`--preset ${opts.preset}: not a preset (${PRESET_NAMES.join(', ')})`)
  window = presetConfig(opts.preset).maxPositionEmbeddings
  const largest = window - opts.maxTokens - PROMPT_SLACK
  const tooBig = opts.sizes.filter((size) => size > largest)
  if (tooBig.length > 0) {
    const n = (x) => x.toLocaleString('en-US')
    fail(`--sizes ${tooBig.join(',')}: the embedded ${opts.preset} stack serves a window of ${n(window)} tokens (max_position_embeddings), and a ${n(tooBig[0])}-token prompt (up to ${PROMPT_SLACK} tokens more as built) plus the answer budget of ${n(opts.maxTokens)} (--max-tokens) does not fit; the largest size that fits is ${largest > 0 ? n(largest) : 'none'}`)
  }
}

// Progress on stderr: one line per step, numbered by run; over the grid, a live line on a terminal
// (JSON lines elsewhere), ticked per run (src/progress). Step lines go above the live line.
let progress
function say (line) {
  const text = `[cold-bench ${new Date().toISOString().slice(11, 19)}] ${line}`
  if (progress !== undefined) progress.log(text)
  else process.stderr.write(text + '\n')
}

/** Seed of run `i`: each run its own, so no two documents share anything (the seed is hashed). */
function runSeed (i) {
  return (opts.seed + i * 0x9e3779b1) >>> 0
}

let dispatcher
/**
 * The legs' connection pool. A decoder streams nothing while it prefills, and fetch's default pool
 * ends a response after 300 s of silence ('terminated'): a 32K-token decoder-alone leg on the H200
 * (~345 s) was cut there. The leg's own timeout is the only limit.
 */
function legDispatcher () {
  dispatcher ??= new Agent({ headersTimeout: opts.legTimeoutMs, bodyTimeout: opts.legTimeoutMs })
  return dispatcher
}

/** POST a streamed chat completion; the time to the first content token, the answer and pd_bridge. */
async function streamLeg (name, baseUrl, model, messages) {
  const body = { model, messages, max_tokens: opts.maxTokens, temperature: 0, stream: true, stream_options: { include_usage: true } }
  const started = performance.now()
  let res
  try {
    res = await fetch(`${baseUrl}/v1/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json', ...authHeaders(apiKeyFromEnv()) }, body: JSON.stringify(body), signal: AbortSignal.timeout(opts.legTimeoutMs), dispatcher: legDispatcher() })
  }
  catch (err) {
    throw new Error(`${name} leg: ${baseUrl} did not answer: ${err.message}`, { cause: err })
  }
  if (res.status !== 200) throw new Error(`${name} leg: ${baseUrl} answered HTTP ${res.status}: ${(await res.text()).slice(0, 300)}`)
  let ttftMs = null
  let text = ''
  let finishReason = ''
  let usage
  let bridge
  let timings
  await forEachEvent(res.body, (event) => {
    const choice = event.choices?.[0]
    if (typeof choice?.delta?.content === 'string' && choice.delta.content !== '') {
      ttftMs ??= performance.now() - started
      text += choice.delta.content
    }
    if (choice?.finish_reason) finishReason = choice.finish_reason
    if (event.usage) usage = event.usage
    // The decoder's own clock, on its usage chunk (src/engines/decoder/responses.ts DecoderTimings).
    if (event.pd_decoder) timings = event.pd_decoder
    if (event.pd_bridge) bridge = event.pd_bridge
  })
  const totalMs = performance.now() - started
  if (usage === undefined) throw new Error(`${name} leg: ${baseUrl} sent no usage chunk`)
  return { totalMs, ttftMs, text, finishReason, usage, bridge, timings, header: res.headers.get('x-pd-bridge') ?? undefined }
}

function num (v) {
  return typeof v === 'number' && Number.isFinite(v) && v >= 0 ? v : null
}

function finite (v) {
  return typeof v === 'number' && Number.isFinite(v) ? v : null
}

/** The decoder's own prefill and decode ms, when its usage chunk said them (absent from other deployments). */
function decoderMs (leg) {
  const prefill = num(leg.timings?.prefill_ms)
  const decode = num(leg.timings?.decode_ms)
  return prefill === null || decode === null ? {} : { decoderMs: { prefill, decode } }
}

function bridgedLeg (leg) {
  const b = leg.bridge ?? {}
  const t = b.timings_ms ?? {}
  const bytes = b.bytes ?? {}
  const stagesMs = { enginePrefill: num(t.engine_prefill), transfer: num(t.transfer), assembly: num(t.assembly), blockWrite: num(t.block_write), decoderTtft: num(t.decoder_ttft), bridgeTotal: num(t.bridge_total) }
  const overEngine = bridgedOverEngine({ totalMs: leg.totalMs, ttftMs: leg.ttftMs, stagesMs })
  return {
    totalMs: leg.totalMs,
    ttftMs: leg.ttftMs,
    promptTokens: leg.usage.prompt_tokens,
    completionTokens: leg.usage.completion_tokens,
    finishReason: leg.finishReason,
    answerSha256: sha256(leg.text),
    ...decoderMs(leg),
    // No verdict at all is not a bridge: record it as declined, never as complete.
    verdict: b.verdict ?? leg.header ?? 'declined',
    route: b.route ?? 'unknown',
    bridgedTokens: b.bridged_tokens ?? 0,
    stagesMs,
    bytes: { capture: bytes.capture ?? 0, fetched: bytes.fetched ?? 0, blocks: bytes.blocks ?? 0 },
    // Blocks written while the engine ran: how far the writes overlapped the engine.
    ...(b.stream === undefined
      ? {}
      : {
          stream: {
            blocksBeforeSeal: b.stream.blocks_before_seal, blocks: b.blocks?.bridged ?? 0, captureMs: num(t.capture), firstBlockMs: num(t.first_block), afterSealMs: num(t.after_seal),
            // Where the engine's clock sits in the capture (an engine that stamps it: torch); two clocks, so a sign either way.
            ...(t.engine_start === undefined ? {} : { engineStartMs: finite(t.engine_start), sealSeenMs: finite(t.seal_seen) }),
            // What the segments cost the engine's thread (inside torch's enginePrefill), and its writer thread beside it (torch).
            ...(t.engine_segment_write === undefined ? {} : { engineSegmentWriteMs: finite(t.engine_segment_write) }),
            ...(t.segment_writer === undefined ? {} : { segmentWriterMs: finite(t.segment_writer) }),
          },
        }),
    // Bridged / engine and its floor (docs/torch-rung.md), with or without the streamed write.
    ...(overEngine === null ? {} : { overEngine }),
  }
}

// The capture's peak held bytes, from the embedded TypeScript engine's own `prefill-end` line for
// this request in its log (the torch engine does not log it): what issue #20's streaming capture bounds.
async function captureMemory (stack, requestId) {
  if (typeof requestId !== 'string') return {}
  const { logPathOf } = await import('../src/stack/embedded.ts')
  let text
  try {
    text = await readFile(logPathOf(stack.paths, 'prefill-engine'), 'utf8')
  } catch {
    return {}
  }
  for (const line of text.split('\n').reverse()) {
    if (!line.includes(requestId) || !line.includes('"prefill-end"')) continue
    try {
      const e = JSON.parse(line)
      if (e.event === 'prefill-end' && e.request_id === requestId && Number.isSafeInteger(e.capture_peak_held_bytes)) {
        return { capturePeakHeldBytes: e.capture_peak_held_bytes, captureSpill: process.env.PD_CAPTURE_SPILL === '1' || process.env.PD_CAPTURE_SPILL === 'true' }
      }
    } catch {
      // Not a JSON line: another writer's output.
    }
  }
  return {}
}

function nativeLeg (leg) {
  return {
    totalMs: leg.totalMs, ttftMs: leg.ttftMs, promptTokens: leg.usage.prompt_tokens, completionTokens: leg.usage.completion_tokens, finishReason: leg.finishReason,
    answerSha256: sha256(leg.text), ...decoderMs(leg),
  }
}

/** The answer's digest in the record: what protocols/rerun-records.mjs compares between commits. */
function sha256 (text) {
  return createHash('sha256').update(text, 'utf8').digest('hex')
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

// An approximate tokenizer for remote deployments (4 characters a token): the record keeps the
// token counts the servers report, so only the prompt's size is approximate.
const roughTokenizer = {
  encode: (text) => ({ length: Math.ceil(text.length / 4) }),
  encodeChat: (messages) => ({ length: Math.ceil(messages.map((m) => m.content).join('\n').length / 4) }),
}

let stack
let nativeUrl = opts.nativeUrl
let frontUrl = opts.url
let modelName = opts.model ?? 'default'
let tokenizer = roughTokenizer
// The environment block (verify/results/environment.ts, shared with the micro benchmarks).
let env = remoteEnvironment(opts.url ?? '')
let nativeDecoder
// --alone-only writes its legs here, --pair-apart reads them (the state directory's legs/ unless --legs).
let legsDir
const pids = new Map([['protocol', process.pid]])

const stopAll = async () => { await stack?.stop().catch(() => {}) }
process.once('SIGINT', () => { void stopAll().finally(() => process.exit(130)) })

try {
  if (frontUrl === undefined) {
    const stateDir = resolveStateDir(opts.stateDir)
    say(`starting the embedded stack (${opts.preset}, blocks of ${opts.blockSize}) in ${stateDir}`)
    stack = await startEmbeddedStack({
      stateDir, preset: opts.preset, seed: EMBEDDED_DEFAULTS.seed, blockSize: opts.blockSize, port: 0, torchPrefill, decoderEngine, ...(opts.streamBlocks ? { streamBlocks: true } : {}),
      onEvent: (e) => { if (e.kind === 'ready') pids.set(e.name, e.pid) },
      onDeath: (message) => say(`a child died: ${message}`),
    })
    frontUrl = stack.urls.front
    if (!opts.bridgedOnly && !opts.pairApart) {
      say('starting a second decoder with an empty block store (the decoder-alone leg)')
      const native = nativeDecoder = await startNativeLeg(stack, 'cold-bench')
      nativeUrl = native.url
    }
    modelName = stack.modelName
    tokenizer = await loadTokenizer(stack.checkpoint.dir)
    // The micro benchmarks derive the model name from preset and seed; it must be the stack's.
    const decoder = decoderLabel(stack)
    // The micro benchmarks derive our decoder's model name from preset and seed; it must be the stack's.
    if (decoder === undefined && modelName !== embeddedModelName(opts.preset, EMBEDDED_DEFAULTS.seed)) throw new Error(`the stack serves ${modelName}, but verify/results/environment.ts names it ${embeddedModelName(opts.preset, EMBEDDED_DEFAULTS.seed)}; fix embeddedModelName`)
    env = embeddedEnvironment({ preset: opts.preset, seed: EMBEDDED_DEFAULTS.seed, blockSize: opts.blockSize, prefillProfile: stack.prefillLabel,
      sidecarFingerprint: stack.sidecar.fingerprint, ...(decoder !== undefined ? { decoder, modelName } : {}) }, undefined, stack.prefillGpu)
    legsDir = opts.legs ?? join(stateDir, 'legs')
  }

  // The runs: sizes x repeats with fresh seeds, or (--pair-apart) the legs waiting for this environment and commit.
  const jobs = []
  if (opts.pairApart) {
    const waiting = await readApartLegs(legsDir)
    for (const { file, record } of waiting) {
      if (record.environment.id === env.id && record.environment.commit === env.commit) jobs.push({ size: record.targetTokens, repeat: record.repeat, seed: record.seed, leg: record, file })
      else say(`leaving ${basename(file)}: it ran in ${record.environment.id} at ${record.environment.commit}, this is ${env.id} at ${env.commit}`)
    }
    if (jobs.length === 0) throw new Error(`--pair-apart: no decoder-alone leg of environment ${env.id} at commit ${env.commit} waits in ${legsDir} (${waiting.length} other${waiting.length === 1 ? '' : 's'}); run --alone-only first`)
    const budgets = [...new Set(jobs.map((j) => j.leg.answerBudget))]
    if (budgets.length > 1) throw new Error(`--pair-apart: the legs in ${legsDir} have answer budgets ${budgets.join(', ')}; pair one budget per invocation (move the others aside)`)
    opts.maxTokens = budgets[0]
  }
  else {
    let i = 0
    for (const size of opts.sizes) {
      for (let repeat = 0; repeat < opts.repeats; repeat++, i++) jobs.push({ size, repeat, seed: runSeed(i + 1) })
    }
  }

  // Warm both legs on a prompt of their own, so engines, kernels and connections are hot.
  const warmPrompt = buildDemoPrompt(tokenizer, Math.min(1024, Math.max(...jobs.map((j) => j.size))), (opts.seed ^ 0x5a5a5a5a) >>> 0)
  if (!opts.aloneOnly) {
    say('warming the bridged leg')
    await streamLeg('warm-up bridged', frontUrl, modelName, warmPrompt.messages)
  }
  if (nativeUrl !== undefined) {
    say('warming the decoder-alone leg')
    await streamLeg('warm-up native', nativeUrl, modelName, warmPrompt.messages)
  }

  await mkdir(opts.runs, { recursive: true })
  if (legsDir !== undefined) await mkdir(join(legsDir, 'paired'), { recursive: true })
  const total = jobs.length
  progress = startProgress({ label: 'cold-bench', total, unit: 'runs' })
  for (const [i, { size, repeat, seed, leg, file: legFile }] of jobs.entries()) {
    const repeats = opts.pairApart ? 1 : opts.repeats
    progress.tick(i, `${size} tokens, repeat ${repeat + 1}/${repeats}`)
    const startedAt = new Date().toISOString()
    const prompt = buildDemoPrompt(tokenizer, size, seed)
    if (window !== undefined && prompt.tokens.length + opts.maxTokens > window) {
      throw new Error(`run ${i + 1}: the prompt of seed ${seed} has ${prompt.tokens.length} tokens; with the answer budget of ${opts.maxTokens} it does not fit the window of ${window}; use a smaller size`)
    }
    if (stack !== undefined) {
      const warm = await presentKeys(stack.cacheDir, promptBlockKeys(modelName, prompt.tokens, opts.blockSize))
      if (warm.length > 0) throw new Error(`run ${i + 1}: the prompt of seed ${seed} already has ${warm.length} blocks in the decoder's store; not a cold prompt`)
    }
    let b
    let bridged = null
    if (!opts.aloneOnly) {
      say(`[${i + 1}/${total}] ${size} tokens, repeat ${repeat + 1}/${repeats}, seed ${seed}: bridged leg`)
      b = await streamLeg('bridged', frontUrl, modelName, prompt.messages)
      bridged = bridgedLeg(b)
      if (stack !== undefined) Object.assign(bridged, await captureMemory(stack, b.bridge?.capture?.request_id))
      say(`[${i + 1}/${total}]   bridged: ${bridged.verdict} in ${(bridged.totalMs / 1000).toFixed(2)} s`)
      if (opts.stopUnlessComplete && !bridged.verdict.startsWith('complete')) {
        throw new Error(`run ${i + 1}: the bridged leg's verdict is "${bridged.verdict}", not complete (--stop-unless-complete: no decoder-alone leg, no record)`)
      }
    }
    let native = null
    let n
    if (nativeUrl !== undefined) {
      say(`[${i + 1}/${total}] ${opts.aloneOnly ? `${size} tokens, repeat ${repeat + 1}/${repeats}, seed ${seed}: ` : '  '}decoder-alone leg`)
      n = await streamLeg('native', nativeUrl, modelName, prompt.messages)
      native = nativeLeg(n)
      say(`[${i + 1}/${total}]   decoder alone: ${(native.totalMs / 1000).toFixed(2)} s`)
    }
    const peakMemoryBytes = {}
    for (const [name, pid] of pids) {
      const peak = await peakRss(pid)
      if (peak !== undefined) peakMemoryBytes[name] = peak
    }
    const runId = runIdOf(startedAt, size, repeat, seed)
    if (opts.aloneOnly) {
      const waiting = { schema: APART_LEG_SCHEMA, startedAt, environment: env, targetTokens: size, seed, repeat, answerBudget: opts.maxTokens,
        promptSha256: promptDigest(prompt.tokens), native, peakMemoryBytes }
      const file = join(legsDir, `${runId}.json`)
      parseApartLeg(waiting, file)
      await writeFile(file, JSON.stringify(waiting, null, 2) + '\n')
      say(`[${i + 1}/${total}]   wrote ${file} (its bridged leg: cold-bench --pair-apart)`)
      continue
    }
    const record = leg !== undefined
      ? pairApartLeg(leg, { environment: env, promptSha256: promptDigest(prompt.tokens), answerBudget: opts.maxTokens, bridged, peakMemoryBytes })
      : {
          schema: RUN_RECORD_SCHEMA,
          runId,
          startedAt,
          environment: env,
          targetTokens: size,
          seed,
          repeat,
          answerBudget: opts.maxTokens,
          native,
          bridged,
          peakMemoryBytes,
          answersAgree: n === undefined ? null : n.text === b.text && n.finishReason === b.finishReason && native.completionTokens === bridged.completionTokens,
        }
    const file = join(opts.runs, `${record.runId}.json`)
    parseRunRecord(record, file)
    await writeFile(file, JSON.stringify(record, null, 2) + '\n')
    say(`[${i + 1}/${total}]   wrote ${file}`)
    // Paired: the leg leaves the waiting list, kept under paired/ (the record holds its numbers).
    if (legFile !== undefined) await rename(legFile, join(legsDir, 'paired', basename(legFile)))
  }
  progress.tick(total)
  progress.done()
  progress = undefined
}
catch (err) {
  progress?.fail(err.message)
  progress = undefined
  say(`stopped: ${err.message}`)
  process.exitCode = 1
}
finally {
  await stopAll()
  await nativeDecoder?.remove()
  await dispatcher?.close()
}

if (regenerate) {
  // Micro-benchmark records (protocols/bench-kernels.ts, bench-capture.ts) go into the same report.
  const r = await generateResults(opts.runs, opts.out, opts.micro === undefined ? undefined : resolve(opts.micro))
  say(`results: ${r.records} run records, ${r.microRecords} micro-benchmark records, ${r.environments} environments -> ${r.files.map((f) => join(opts.out, f)).join(', ')}`)
}
else if (opts.generate && !opts.aloneOnly) {
  say('RESULTS.md not regenerated: --runs was given without --out (pass --out DIR to write a report with these records)')
}
