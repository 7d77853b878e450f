#!/usr/bin/env node
// The warm-extend protocol (docs/warm-extend.md): on the embedded stack, per run a prompt B of
// --prompt tokens and its first --prefix tokens A (token ids, sent to /v1/completions, so A is a
// prefix of B token for token):
//   1. A through the front door: bridged cold; the decoder's store then holds A's blocks;
//   2. B through the front door: bridged warm, the prefill engine continuing from the decoder's cache
//      at the last stored boundary P and prefilling only the tail;
//   3. the alternative: a prompt of B's length from another seed, nothing stored, bridged from token 0
//      (what a warm prompt costs when the engine cannot continue the decoder's cache);
//   4. the decoder alone (a second decoder on its own store): A, then B, natively (B's prefix is then
//      in its store too, so it prefills only the tail);
// then B's chain of blocks in the bridged store is compared tensor by tensor with the decoder
// alone's (verify-blocks), and the answers are compared. One record per run under results/warm/,
// then RESULTS.md is regenerated (unless --no-generate).
//
//   node protocols/warm-extend.mjs --pairs 2048:6144 [--preset tiny] [--repeats 1]
import { createHash, randomBytes } from 'node:crypto'
import { mkdir, readFile, rm, writeFile } from 'node:fs/promises'
import { join, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'
import { argv } from 'zx'
import { Agent, fetch } from 'undici'
import { register } from 'tsx/esm/api'
import { checkArgv, helpAndExit, usageError } from './flags.mjs'
import { forEachEvent } from './sse-events.mjs'

const REPO = resolve(fileURLToPath(new URL('..', import.meta.url)))
const DEFAULT_WARM = join(REPO, 'results', 'warm')
const DEFAULT_RUNS = join(REPO, 'results', 'runs')
const DEFAULT_OUT = join(REPO, 'results')

const USAGE = `Usage: node protocols/warm-extend.mjs [options]

Warm-extended prompts on the embedded stack (docs/warm-extend.md): per run, prompt A (the first
--prefix tokens of B) bridged cold, B bridged warm from the last stored boundary, a prompt of B's
length bridged from token 0, and the decoder alone on A then B; B's blocks compared with the decoder
alone's. One record per run in --warm; then RESULTS.md is regenerated.

  --pairs A:B,A:B,...    prefix and prompt sizes in tokens (default 2048:6144)
  --repeats N            runs per pair, each with its own seed (default 1)
  --seed N               the invocation seed (default: random)
  --max-tokens N         the answer budget (default 32)
  --preset NAME          embedded stack's checkpoint preset (default tiny)
  --block-size N         embedded stack's decoder block size (default 256)
  --state-dir DIR        embedded stack's state directory (default $PD_STATE_DIR or ~/.cache/pd-bridge)
  --leg-timeout-s N      per leg (default 3600)
  --warm DIR             where records go (default results/warm in this checkout)
  --out DIR              where RESULTS.md and report.html go (default results/ in this checkout,
                         regenerated only when --warm is the default; with another --warm, give --out)
  --no-generate          do not regenerate the report
  -h, --help             this text (nothing is started or written)
`
helpAndExit(USAGE)
checkArgv('warm-extend', argv, {
  pairs: 'string', repeats: 'string', seed: 'string', 'max-tokens': 'string', preset: 'string', 'block-size': 'string',
  'state-dir': 'string', 'leg-timeout-s': 'string', warm: 'string', out: 'string', generate: 'negatable',
})

function fail (message) {
  usageError('warm-extend', message)
}

function int (name, text, min) {
  if (!/^\d+$/.test(String(text)) || Number(text) < min) fail(`--${name} must be an integer >= ${min}, got ${JSON.stringify(text)}`)
  return Number(text)
}

function pairs (text) {
  return String(text).split(',').map((p) => {
    const m = /^\s*(\d+):(\d+)\s*$/.exec(p)
    if (m === null) fail(`--pairs must be PREFIX:PROMPT token counts separated by commas, got ${JSON.stringify(text)}`)
    const [a, b] = [Number(m[1]), Number(m[2])]
    if (a < 1 || b <= a) fail(`--pairs ${p}: the prefix must be at least 1 token and shorter than the prompt`)
    return { prefix: a, prompt: b }
  })
}

const opts = {
  pairs: pairs(argv.pairs ?? '2048:6144'),
  repeats: int('repeats', argv.repeats ?? 1, 1),
  seed: argv.seed === undefined ? randomBytes(4).readUInt32LE(0) : int('seed', argv.seed, 0),
  maxTokens: int('max-tokens', argv['max-tokens'] ?? 32, 1),
  preset: String(argv.preset ?? 'tiny'),
  blockSize: int('block-size', argv['block-size'] ?? 256, 1),
  stateDir: argv['state-dir'] === undefined ? undefined : String(argv['state-dir']),
  legTimeoutMs: int('leg-timeout-s', argv['leg-timeout-s'] ?? 3600, 1) * 1000,
  warm: argv.warm === undefined ? DEFAULT_WARM : resolve(String(argv.warm)),
  out: argv.out === undefined ? DEFAULT_OUT : resolve(String(argv.out)),
  generate: argv.generate !== false,
}
const regenerate = opts.generate && (argv.out !== undefined || opts.warm === DEFAULT_WARM)
for (const p of opts.pairs) {
  if (p.prefix < opts.blockSize) fail(`--pairs ${p.prefix}:${p.prompt}: the prefix must hold at least one block of ${opts.blockSize} tokens`)
}

register()
const { startEmbeddedStack, startNativeLeg, EMBEDDED_DEFAULTS } = await import('../src/stack/embedded.ts')
const { buildDemoPrompt } = await import('../src/stack/demo/prompt.ts')
const { promptBlockKeys, presentKeys, verifyPromptBlocks } = await import('../src/stack/demo/blocks.ts')
const { loadTokenizer } = await import('../src/model/tokenizer/index.ts')
const { isPresetName, presetConfig, PRESET_NAMES } = await import('../src/model/checkpoint/index.ts')
const { resolveStateDir } = await import('../src/stack/state-dir.ts')
const { apiKeyFromEnv, authHeaders } = await import('../src/http/api-key.ts')
const { generateResults } = await import('../verify/results/generate.ts')
const { embeddedEnvironment } = await import('../verify/results/environment.ts')
const { WARM_RECORD_SCHEMA, parseWarmRecord, warmBitExact } = await import('../verify/results/warm-record.ts')

if (!isPresetName(opts.preset)) fail(`--preset ${opts.preset}: not a preset (${PRESET_NAMES.join(', ')})`)
const window = presetConfig(opts.preset).maxPositionEmbeddings
for (const p of opts.pairs) {
  if (p.prompt + opts.maxTokens > window) fail(`--pairs ${p.prefix}:${p.prompt}: the ${opts.preset} stack serves ${window} tokens; the prompt and the answer budget of ${opts.maxTokens} do not fit`)
}

function say (line) {
  process.stderr.write(`[warm-extend ${new Date().toISOString().slice(11, 19)}] ${line}\n`)
}

let dispatcher
function legDispatcher () {
  dispatcher ??= new Agent({ headersTimeout: opts.legTimeoutMs, bodyTimeout: opts.legTimeoutMs })
  return dispatcher
}

function sha256 (text) {
  return createHash('sha256').update(text, 'utf8').digest('hex')
}

function num (v) {
  return typeof v === 'number' && Number.isFinite(v) && v >= 0 ? v : null
}

/** A streamed /v1/completions of token ids: time to first token, the answer, usage and pd_bridge. */
async function leg (name, baseUrl, model, tokens) {
  const body = { model, prompt: tokens, max_tokens: opts.maxTokens, temperature: 0, stream: true, stream_options: { include_usage: true } }
  const started = performance.now()
  let res
  try {
    res = await fetch(`${baseUrl}/v1/completions`, {
      method: 'POST', headers: { 'content-type': 'application/json', ...authHeaders(apiKeyFromEnv()) }, body: JSON.stringify(body), signal: AbortSignal.timeout(opts.legTimeoutMs), dispatcher: legDispatcher(),
    })
  } catch (err) {
    throw new Error(`${name} leg: ${baseUrl} did not answer: ${err.message}`, { cause: err })
  }
  if (res.status !== 200) throw new Error(`${name} leg: ${baseUrl} answered HTTP ${res.status}: ${(await res.text()).slice(0, 300)}`)
  let ttftMs = null
  let text = ''
  let finishReason = ''
  let usage
  let bridge
  await forEachEvent(res.body, (event) => {
    const choice = event.choices?.[0]
    if (typeof choice?.text === 'string' && choice.text !== '') {
      ttftMs ??= performance.now() - started
      text += choice.text
    }
    if (choice?.finish_reason) finishReason = choice.finish_reason
    if (event.usage) usage = event.usage
    if (event.pd_bridge) bridge = event.pd_bridge
  })
  if (usage === undefined) throw new Error(`${name} leg: ${baseUrl} sent no usage chunk`)
  const answer = { totalMs: performance.now() - started, ttftMs, promptTokens: usage.prompt_tokens, completionTokens: usage.completion_tokens, finishReason, answerSha256: sha256(text) }
  return { answer, text, bridge, header: res.headers.get('x-pd-bridge') ?? undefined, cached: usage.prompt_tokens_details?.cached_tokens }
}

function bridged (l) {
  const b = l.bridge ?? {}
  const t = b.timings_ms ?? {}
  const bytes = b.bytes ?? {}
  return {
    ...l.answer,
    verdict: b.verdict ?? l.header ?? 'declined',
    resumedFrom: b.resumed_from ?? null,
    bridgedTokens: b.bridged_tokens ?? 0,
    cachedTokens: l.cached ?? null,
    warmDeclined: b.warm_extend_declined ?? null,
    stagesMs: {
      carry: num(t.carry), enginePrefill: num(t.engine_prefill), transfer: num(t.transfer), assembly: num(t.assembly),
      blockWrite: num(t.block_write), decoderTtft: num(t.decoder_ttft), bridgeTotal: num(t.bridge_total),
    },
    bytes: { carry: bytes.carry ?? 0, capture: bytes.capture ?? 0, blocks: bytes.blocks ?? 0 },
  }
}

async function peakRss (pid) {
  try {
    const m = /VmHWM:\s+(\d+) kB/.exec(await readFile(`/proc/${pid}/status`, 'utf8'))
    return m ? Number(m[1]) * 1024 : undefined
  } catch {
    return undefined
  }
}

/** Token ids of about `size` tokens for `seed`, cut to exactly `size` (a prompt is ids here, not chat). */
function idsOf (tokenizer, size, seed) {
  return buildDemoPrompt(tokenizer, size, seed).tokens.slice(0, size)
}

let stack
let native
const pids = new Map([['protocol', process.pid]])
process.once('SIGINT', () => { void stack?.stop().finally(() => process.exit(130)) })

try {
  const stateDir = resolveStateDir(opts.stateDir)
  say(`starting the embedded stack (${opts.preset}, blocks of ${opts.blockSize}) in ${stateDir}`)
  stack = await startEmbeddedStack({
    stateDir, preset: opts.preset, seed: EMBEDDED_DEFAULTS.seed, blockSize: opts.blockSize, port: 0,
    onEvent: (e) => { if (e.kind === 'ready') pids.set(e.name, e.pid) },
    onDeath: (message) => say(`a child died: ${message}`),
  })
  say('starting a second decoder with an empty block store (the decoder alone)')
  native = await startNativeLeg(stack, 'warm-extend')
  const model = stack.modelName
  const tokenizer = await loadTokenizer(stack.checkpoint.dir)
  const env = embeddedEnvironment({
    preset: opts.preset, seed: EMBEDDED_DEFAULTS.seed, blockSize: opts.blockSize, prefillProfile: stack.prefillLabel, sidecarFingerprint: stack.sidecar.fingerprint,
  }, undefined, stack.prefillGpu)
  const warmUp = idsOf(tokenizer, 600, (opts.seed ^ 0x5a5a5a5a) >>> 0)
  say('warming both legs')
  await leg('warm-up bridged', stack.urls.front, model, warmUp)
  await leg('warm-up native', native.url, model, warmUp)
  await mkdir(opts.warm, { recursive: true })
  let i = 0
  for (const pair of opts.pairs) {
    for (let repeat = 0; repeat < opts.repeats; repeat++, i++) {
      const seed = (opts.seed + (i + 1) * 0x9e3779b1) >>> 0
      const startedAt = new Date().toISOString()
      const b = idsOf(tokenizer, pair.prompt, seed)
      const a = b.slice(0, pair.prefix)
      const other = idsOf(tokenizer, b.length, (seed ^ 0xa5a5a5a5) >>> 0)
      for (const [what, ids] of [['B', b], ['the from-0 prompt', other]]) {
        const present = await presentKeys(stack.cacheDir, promptBlockKeys(model, ids, opts.blockSize))
        if (present.length > 0) throw new Error(`run ${i + 1}: ${what} of seed ${seed} already has ${present.length} blocks in the decoder's store`)
      }
      const tag = `[${i + 1}] ${a.length}:${b.length}, seed ${seed}`
      say(`${tag}: A (${a.length} tokens) bridged cold`)
      const first = bridged(await leg('A', stack.urls.front, model, a))
      say(`${tag}:   ${first.verdict} in ${(first.totalMs / 1000).toFixed(2)} s`)
      say(`${tag}: B (${b.length} tokens) bridged warm`)
      const w = await leg('B', stack.urls.front, model, b)
      const warm = bridged(w)
      say(`${tag}:   ${warm.verdict} in ${(warm.totalMs / 1000).toFixed(2)} s`)
      say(`${tag}: a ${other.length}-token prompt, nothing stored, bridged from 0`)
      const cold = bridged(await leg('from 0', stack.urls.front, model, other))
      say(`${tag}:   ${cold.verdict} in ${(cold.totalMs / 1000).toFixed(2)} s`)
      say(`${tag}: the decoder alone: A, then B`)
      await leg('native A', native.url, model, a)
      const n = await leg('native B', native.url, model, b)
      say(`${tag}:   decoder alone on B: ${(n.answer.totalMs / 1000).toFixed(2)} s`)
      const usable = Math.floor((b.length - 1) / opts.blockSize)
      const keys = promptBlockKeys(model, b, opts.blockSize).slice(0, usable)
      const work = join(stack.paths.stateDir, 'runs', `warm-verify-${Date.now()}`)
      const check = await verifyPromptBlocks(stack.cacheDir, native.cacheDir, keys, work)
      await rm(work, { recursive: true, force: true })
      const differences = [
        ...check.missingBridged.map((k) => `${k}: not in the bridged store`),
        ...check.missingNative.map((k) => `${k}: not in the decoder alone's store`),
        ...check.report.blocks.flatMap((x) => x.differences.map((d) => `${x.hash}: ${d}`)),
      ].slice(0, 20)
      const peakMemoryBytes = {}
      for (const [name, pid] of pids) {
        const peak = await peakRss(pid)
        if (peak !== undefined) peakMemoryBytes[name] = peak
      }
      const record = {
        schema: WARM_RECORD_SCHEMA,
        runId: `${startedAt.replace(/[:.]/g, '-')}-${a.length}-${b.length}-r${repeat}-${seed}`,
        startedAt,
        environment: env,
        seed,
        answerBudget: opts.maxTokens,
        prefixTokens: a.length,
        promptTokens: b.length,
        first,
        warm,
        cold,
        native: n.answer,
        answersAgree: n.text === w.text && n.answer.finishReason === warm.finishReason && n.answer.completionTokens === warm.completionTokens,
        blocks: { keys: keys.length, identical: check.report.identical, differences },
        peakMemoryBytes,
      }
      const file = join(opts.warm, `${record.runId}.json`)
      parseWarmRecord(record, file)
      await writeFile(file, JSON.stringify(record, null, 2) + '\n')
      say(`${tag}: blocks ${record.blocks.identical}/${record.blocks.keys} identical, answers ${record.answersAgree ? 'equal' : 'differ'}: ${warmBitExact(record) ? 'bit-exact' : 'NOT bit-exact'}; wrote ${file}`)
    }
  }
} catch (err) {
  say(`stopped: ${err.message}`)
  process.exitCode = 1
} finally {
  await stack?.stop().catch(() => {})
  await native?.remove()
  await dispatcher?.close()
}

if (regenerate && process.exitCode !== 1) {
  const r = await generateResults(DEFAULT_RUNS, opts.out, undefined, undefined, undefined, undefined, opts.warm)
  say(`results: ${r.records} run records, ${r.warmRecords} warm records, ${r.environments} environments -> ${r.files.map((f) => join(opts.out, f)).join(', ')}`)
}
