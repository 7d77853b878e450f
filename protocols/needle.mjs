#!/usr/bin/env node
// The needle protocol (docs/NEEDLE-PROTOCOL.md). Against the embedded stack by default (preset
// `needle`), or any OpenAI-compatible deployment with --url (the bridged front door) and
// --native-url (the decoder alone). For every cell of the depth x length grid: a fresh seed, a
// document with its needles, the seed ledger checked, the bridged leg, then the native leg, one
// JSON record under results/needle/runs/. At the end it prints the depth x length table and
// regenerates RESULTS.md (pd-bridge results) with the needle records next to the cold runs, but
// only when the records went to the checkout's results/needle/runs/ (the default) or --out names
// where the report goes: a --runs elsewhere alone is a trial and leaves results/ alone.
//
//   npx zx protocols/needle.mjs [--lengths 512,2048,4096,8192] [--depths 0,0.25,0.5,0.75,1] [--needles N] [--seed N]
//     [--out results] [--cold-runs results/runs] [--micro results/micro] [--no-generate] [--bridged-only]
//   npx zx protocols/needle.mjs --preset needle-long --lengths 1000000 --depths 0 --bridged-only   (docs/long-runs.md)
//   npx zx protocols/needle.mjs --url http://front:8012 --native-url http://decoder-alone:8000 --model NAME
//   npx zx protocols/needle.mjs --help

import { join, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'
import { argv } from 'zx'
import { register } from 'tsx/esm/api'
import { checkArgv, helpAndExit, prefillEngineFlags, PREFILL_ENGINE_FLAGS, prefillEngineUsage, usageError } from './flags.mjs'

const REPO = resolve(fileURLToPath(new URL('..', import.meta.url)))
const DEFAULT_RUNS = join(REPO, 'results', 'needle', 'runs')
const DEFAULT_LEDGER = join(REPO, 'results', 'needle', 'ledger.json')
const DEFAULT_OUT = join(REPO, 'results')

const USAGE = `Usage: npx zx protocols/needle.mjs [options]   (node runs it as well)

The needle retrieval protocol (docs/NEEDLE-PROTOCOL.md): for every cell of the depth x length grid a
fresh seeded document, the seed ledger checked, the bridged leg, then the decoder-alone leg, one
record in --runs; then the depth x length table, and RESULTS.md is regenerated.

  --preset NAME            embedded stack's checkpoint preset (default needle)
  --lengths N,N,...        prompt sizes in tokens (default 512,2048,4096,8192); each plus the answer
                           budget must fit the embedded stack's window (32,768 for needle and tiny,
                           1,048,576 for needle-long)
  --depths X,X,...         depths of the asked needle, 0..1 (default 0,0.25,0.5,0.75,1)
  --needles N              needles per document, 1..4 (default 1)
  --repeats N              runs per cell, each with its own seed (default 1)
  --seed N                 the invocation seed (default: 48 random bits)
  --max-tokens N           the answer budget (default 300; below 256 only with --allow-short-budget)
  --allow-short-budget     allow a budget below 256 (recorded)
  --min-distance N         least tokens from a needle's value to the end (default max(192, block size + 1))
  --bridged-only           embedded stack: no decoder-alone leg (for prompts whose native leg would
                           double a long run; the record says the native leg was not run)
  --url URL                a deployment's bridged front door instead of the embedded stack
  --native-url URL         a deployment's decoder alone
  --model NAME             the model name to ask a deployment for (default: the first it lists)
  --tokenizer DIR          a deployment's tokenizer, for exact positions
  --chars-per-token X      the estimate used without a tokenizer (default 4)
  --geometry TEXT          names the deployment's geometry when it does not report one
  --block-size N           the decoder's block size (default: from the deployment; embedded 256)
  --state-dir DIR          embedded stack's state directory (default $PD_STATE_DIR or ~/.cache/pd-bridge)
${prefillEngineUsage(27)}  --leg-timeout-s N        per leg (default 1800)
  --ledger FILE            the seed ledger (default results/needle/ledger.json in this checkout)
  --runs DIR               where run records go (default results/needle/runs in this checkout)
  --out DIR                where RESULTS.md, report.html, charts and heatmaps go (default results/ in
                           this checkout, regenerated only when --runs is the default; with another
                           --runs, give --out to get a report)
  --cold-runs DIR          cold-prompt run records for the report (default runs/ in --out)
  --micro DIR              micro-benchmark records for the report (default micro/ next to --cold-runs)
  --no-generate            do not regenerate the report
  -h, --help               this text (nothing is started or written)

Progress goes to stderr: one line per step, and a live line on a terminal (JSON lines elsewhere;
PD_PROGRESS=off to silence it, docs/progress.md).
`
helpAndExit(USAGE)
checkArgv('needle', argv, {
  preset: 'string', lengths: 'string', depths: 'string', needles: 'string', repeats: 'string', seed: 'string',
  'max-tokens': 'string', 'allow-short-budget': 'boolean', 'min-distance': 'string', 'chars-per-token': 'string',
  url: 'string', 'native-url': 'string', model: 'string', tokenizer: 'string', ledger: 'string', runs: 'string',
  geometry: 'string', 'block-size': 'string', 'state-dir': 'string', 'leg-timeout-s': 'string',
  out: 'string', 'cold-runs': 'string', micro: 'string', generate: 'negatable', 'bridged-only': 'boolean', ...PREFILL_ENGINE_FLAGS,
})
const torchFlags = prefillEngineFlags('needle', argv, argv.url !== undefined || argv['native-url'] !== undefined)

// The stack and the protocol's parts are TypeScript; tsx lets this script import them as they are.
register()
const {
  answerBudget, buildNeedleDocument, discoverGeometry, freshInvocationSeed, needleGrid, needleMarkdown, runNeedle, writeNeedleRecord,
  DEFAULT_ANSWER_BUDGET, DEFAULT_CHARS_PER_TOKEN, DEFAULT_DEPTHS, DEFAULT_LENGTHS, DEFAULT_MIN_DISTANCE,
} = await import('../verify/needle/index.ts')
const { SeedLedger } = await import('../verify/needle/seed-ledger.ts')
const { embeddedEnvironment, remoteEnvironment } = await import('../verify/results/environment.ts')
const { loadTokenizer } = await import('../src/model/tokenizer/index.ts')
const { isPresetName, presetConfig, PRESET_NAMES } = await import('../src/model/checkpoint/index.ts')
const { resolveProgressMode, startProgress } = await import('../src/progress/index.ts')

function fail (message) {
  usageError('needle', message)
}

// With PD_API_KEY set, every service of the stack requires it: the protocol's own requests send it.
const { apiKeyFromEnv, authHeaders } = await import('../src/http/api-key.ts')

// A bad --torch-* value is a usage error, found before anything starts.
const { torchPrefillEngine } = await import('../src/stack/torch-prefill.ts')
let torchPrefill
try {
  if (torchFlags !== undefined) torchPrefill = torchPrefillEngine(torchFlags)
}
catch (err) {
  fail(err.message)
}

function numberList (name, text, integer) {
  const list = String(text).split(',').map((s) => s.trim())
  const pattern = integer ? /^\d+$/ : /^\d+(\.\d+)?$/
  if (list.some((s) => !pattern.test(s))) fail(`--${name} must be ${integer ? 'positive integers' : 'numbers'} separated by commas, got ${JSON.stringify(text)}`)
  return list.map(Number)
}

function int (name, text, min) {
  if (!/^\d+$/.test(String(text)) || Number(text) < min) fail(`--${name} must be an integer >= ${min}, got ${JSON.stringify(text)}`)
  return Number(text)
}

function positive (name, text) {
  if (!/^\d+(\.\d+)?$/.test(String(text)) || !(Number(text) > 0)) fail(`--${name} must be a positive number, got ${JSON.stringify(text)}`)
  return Number(text)
}

const opts = {
  preset: String(argv.preset ?? 'needle'),
  lengths: numberList('lengths', argv.lengths ?? DEFAULT_LENGTHS.join(','), true),
  depths: numberList('depths', argv.depths ?? DEFAULT_DEPTHS.join(','), false),
  needles: int('needles', argv.needles ?? 1, 1),
  repeats: int('repeats', argv.repeats ?? 1, 1),
  seed: argv.seed === undefined ? undefined : int('seed', argv.seed, 0),
  maxTokens: int('max-tokens', argv['max-tokens'] ?? DEFAULT_ANSWER_BUDGET, 1),
  allowShortBudget: argv['allow-short-budget'] === true,
  minDistance: argv['min-distance'] === undefined ? undefined : int('min-distance', argv['min-distance'], 1),
  charsPerToken: positive('chars-per-token', argv['chars-per-token'] ?? DEFAULT_CHARS_PER_TOKEN),
  url: argv.url === undefined ? undefined : String(argv.url),
  nativeUrl: argv['native-url'] === undefined ? undefined : String(argv['native-url']),
  model: argv.model === undefined ? undefined : String(argv.model),
  tokenizer: argv.tokenizer === undefined ? undefined : String(argv.tokenizer),
  ledger: argv.ledger === undefined ? DEFAULT_LEDGER : resolve(String(argv.ledger)),
  runs: argv.runs === undefined ? DEFAULT_RUNS : resolve(String(argv.runs)),
  geometry: argv.geometry === undefined ? undefined : String(argv.geometry),
  blockSize: argv['block-size'] === undefined ? undefined : int('block-size', argv['block-size'], 1),
  stateDir: argv['state-dir'] === undefined ? undefined : String(argv['state-dir']),
  legTimeoutMs: int('leg-timeout-s', argv['leg-timeout-s'] ?? 1800, 1) * 1000,
}
const remote = opts.url !== undefined || opts.nativeUrl !== undefined
if (argv['bridged-only'] === true && remote) fail('--bridged-only is for the embedded stack; against a deployment, leave out --native-url')
if (!remote && !isPresetName(opts.preset)) fail(`--preset ${opts.preset}: not a preset (${PRESET_NAMES.join(', ')})`)
let budget
try {
  budget = answerBudget(opts.maxTokens, opts.allowShortBudget)
  resolveProgressMode(process.stderr) // a bad PD_PROGRESS is a usage error, found before anything starts
}
catch (e) {
  fail(e.message)
}
// The embedded stack serves its preset's max_position_embeddings: a length that cannot hold its
// document and the answer budget is refused now, before the stack starts (a document never has
// more tokens than its target length).
if (!remote) {
  const window = presetConfig(opts.preset).maxPositionEmbeddings
  const tooLong = opts.lengths.filter((length) => length + budget.maxTokens > window)
  if (tooLong.length > 0) {
    const n = (x) => x.toLocaleString('en-US')
    fail(`--lengths ${tooLong.join(',')}: the embedded ${opts.preset} stack serves a window of ${n(window)} tokens (max_position_embeddings), and a ${n(tooLong[0])}-token document plus the answer budget of ${n(budget.maxTokens)} (--max-tokens) does not fit; the longest length that fits is ${n(window - budget.maxTokens)}`)
  }
}
const invocationSeed = opts.seed ?? freshInvocationSeed()
let grid
try {
  grid = needleGrid({ lengths: opts.lengths, depths: opts.depths, needles: opts.needles, repeats: opts.repeats, seed: invocationSeed })
}
catch (e) {
  fail(e.message)
}

// Progress on stderr: one line per step; over the grid, a live line on a terminal (JSON lines
// elsewhere), ticked per run (src/progress). Step lines go above the live line.
let progress
function say (line) {
  const text = `[needle ${new Date().toISOString().slice(11, 19)}] ${line}`
  if (progress !== undefined) progress.log(text)
  else process.stderr.write(text + '\n')
}

/** The first model a server lists, for deployments where --model is not given. */
async function firstModel (url) {
  try {
    const res = await fetch(`${url.replace(/\/+$/, '')}/v1/models`, { headers: authHeaders(apiKeyFromEnv()), signal: AbortSignal.timeout(10_000) })
    const json = await res.json()
    return typeof json?.data?.[0]?.id === 'string' ? json.data[0].id : undefined
  }
  catch {
    return undefined
  }
}

let stack
let nativeLeg
const records = []
const stopAll = async () => { await stack?.stop().catch(() => {}) }
process.once('SIGINT', () => { void stopAll().finally(() => process.exit(130)) })

try {
  let frontUrl = opts.url
  let nativeUrl = opts.nativeUrl
  let model = opts.model
  let tokenizer
  let environment
  if (!remote) {
    const { startEmbeddedStack, startNativeLeg, EMBEDDED_DEFAULTS } = await import('../src/stack/embedded.ts')
    const { resolveStateDir } = await import('../src/stack/state-dir.ts')
    const stateDir = resolveStateDir(opts.stateDir)
    const blockSize = opts.blockSize ?? EMBEDDED_DEFAULTS.blockSize
    say(`starting the embedded stack (${opts.preset}, blocks of ${blockSize}) in ${stateDir}`)
    // Bridge every prompt with a usable block, so the shortest documents go through the bridge too.
    stack = await startEmbeddedStack({
      stateDir, preset: opts.preset, seed: EMBEDDED_DEFAULTS.seed, blockSize, port: 0, routing: { minTokens: blockSize + 1 }, torchPrefill,
      onDeath: (message) => say(`a child died: ${message}`),
    })
    frontUrl = stack.urls.front
    if (argv['bridged-only'] === true) say('--bridged-only: no decoder-alone leg')
    else {
      say('starting a second decoder with an empty block store (the decoder-alone leg)')
      const native = nativeLeg = await startNativeLeg(stack, 'needle')
      nativeUrl = native.url
    }
    model = stack.modelName
    tokenizer = await loadTokenizer(stack.checkpoint.dir)
    environment = embeddedEnvironment({ preset: opts.preset, seed: EMBEDDED_DEFAULTS.seed, blockSize, prefillProfile: stack.prefillLabel, sidecarFingerprint: stack.sidecar.fingerprint }, undefined, stack.prefillGpu)
  }
  else {
    model ??= (await firstModel(frontUrl ?? nativeUrl)) ?? 'default'
    if (opts.tokenizer !== undefined) tokenizer = await loadTokenizer(resolve(opts.tokenizer))
    environment = remoteEnvironment(frontUrl ?? nativeUrl)
  }

  const geometry = await discoverGeometry({ frontUrl, nativeUrl: frontUrl === undefined ? nativeUrl : undefined, flag: opts.geometry })
  if (opts.blockSize !== undefined && geometry.blockSize !== null && opts.blockSize !== geometry.blockSize) {
    throw new Error(`--block-size ${opts.blockSize} disagrees with the deployment, which reports blocks of ${geometry.blockSize}`)
  }
  const blockSize = geometry.blockSize ?? opts.blockSize
  if (blockSize === undefined) throw new Error('the deployment does not report its block size; pass --block-size')
  // Keep the asked value inside the bridged blocks: the prompt's last partial block (up to a whole
  // block) is prefilled by the decoder itself, so a needle there would not test the bridge.
  const minDistance = opts.minDistance ?? Math.max(DEFAULT_MIN_DISTANCE, blockSize + 1)
  const ledger = await SeedLedger.open(opts.ledger)
  say(`invocation seed ${invocationSeed}; geometry ${geometry.fingerprint.slice(0, 16)} (${geometry.source}), blocks of ${blockSize}; ledger ${opts.ledger} (${ledger.entries.length} documents)`)
  say(`${grid.length} runs: lengths ${opts.lengths.join(', ')} x depths ${opts.depths.join(', ')}${opts.repeats > 1 ? ` x ${opts.repeats} repeats` : ''}, ${opts.needles} needle(s) each, answer budget ${budget.maxTokens}, values at least ${minDistance} tokens from the end${tokenizer === undefined ? `, positions estimated at ${opts.charsPerToken} characters a token` : ''}`)

  progress = startProgress({ label: 'needle', total: grid.length, unit: 'runs' })
  for (const run of grid) {
    progress.tick(run.index, `${run.targetTokens} tokens, depth ${run.depth}`)
    const tag = `[${run.index + 1}/${grid.length}] ${run.targetTokens} tokens, depth ${run.depth}, seed ${run.seed}`
    const document = buildNeedleDocument({ seed: run.seed, targetTokens: run.targetTokens, needles: run.needles, ask: run.ask, tokenizer, minDistance, charsPerToken: opts.charsPerToken })
    const asked = document.needles.find((n) => n.key === run.ask)
    say(`${tag}: ${document.promptTokens} prompt tokens, the asked value at ${asked.position} (${asked.distance} from the end)`)
    const record = await runNeedle({
      document, cell: run, invocationSeed, environment, model, frontUrl, nativeUrl, budget, ledger, geometry, blockSize,
      legTimeoutMs: opts.legTimeoutMs, onStep: (line) => say(`${tag}:   ${line}`),
    })
    const file = await writeNeedleRecord(opts.runs, record)
    records.push(record)
    const b = record.bridged === null ? (record.refused !== null ? 'refused' : 'not run') : `${record.bridged.verdict} -> ${record.bridged.outcome}`
    const n = record.native === null ? 'not run' : record.native.outcome
    say(`${tag}: bridged ${b}; native ${n}; expected ${JSON.stringify(record.expected)}; wrote ${file}`)
  }
  progress.tick(grid.length)
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
  await nativeLeg?.remove()
}

if (records.length > 0) process.stdout.write(needleMarkdown(records))

// Regenerate RESULTS.md as cold-bench does (pd-bridge results): the cold-prompt runs (--cold-runs,
// default runs/ in --out), the micro benchmarks (--micro, default micro/ next to them) and the
// needle records in --runs. A --runs other than the checkout's results/needle/runs without --out
// is a trial run (the suites' smoke run is one): it leaves the committed report alone.
if (argv.generate !== false) {
  if (opts.runs !== DEFAULT_RUNS && argv.out === undefined) {
    say('RESULTS.md not regenerated: --runs was given without --out (pass --out DIR to write a report with these records)')
  }
  else {
    const { generateResults } = await import('../verify/results/generate.ts')
    const out = argv.out === undefined ? DEFAULT_OUT : resolve(String(argv.out))
    const coldRuns = resolve(argv['cold-runs'] ?? join(out, 'runs'))
    try {
      const r = await generateResults(coldRuns, out, argv.micro === undefined ? undefined : resolve(argv.micro), opts.runs)
      say(`results: ${r.records} run records, ${r.microRecords} micro-benchmark records, ${r.needleRecords} needle records, ${r.environments} environments -> ${r.files.map((f) => join(out, f)).join(', ')}`)
    }
    catch (err) {
      say(`results not regenerated: ${err.message}`)
      process.exitCode = 1
    }
  }
}
