#!/usr/bin/env node
// The adversary protocol (docs/BENCHMARK-PROTOCOL.md, "Adversary"): the embedded stack started as
// `pd-bridge serve` with a deployment key (PD_API_KEY), a decoder alone beside it, and what an
// attacker on 127.0.0.1 tries: other spellings of internal routes, absolute paths in answers, an
// oversized body announced with `Expect: 100-continue`, bodies the decoder refuses on long prompts, a
// block tampered with and its plain digest recomputed, children SIGKILLed while 16 clients run, and
// the whole stack killed mid-bridge then restarted. Every answer that came back 200 is compared with
// the decoder alone's greedy tokens. One record under results/adversary/ (cases tried, answers
// compared, wrong answers served, processes and bytes left behind), then RESULTS.md is regenerated.
//
//   npx zx protocols/adversary.mjs [--only NAME,NAME] [--clients 16] [--spellings 400] [--keep-state]
//   npx zx protocols/adversary.mjs --help
import { randomBytes } from 'node:crypto'
import { mkdir, readdir, readFile, rm, stat, symlink, writeFile } from 'node:fs/promises'
import { connect } from 'node:net'
import { homedir, tmpdir } from 'node:os'
import { join, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'
import { argv } from 'zx'
import { register } from 'tsx/esm/api'
import { checkArgv, helpAndExit, integerFlag, usageError } from './flags.mjs'
import {
  alive, askChat, childEnv, logSize, pidOf, presentKeys, quarantined, sameAsNative, stackRecord, startServe, stopServe, storeState,
  waitInLog, wrongAnswer,
} from './lib/serve-stack.mjs'

const REPO = resolve(fileURLToPath(new URL('..', import.meta.url)))
const BIN = join(REPO, 'bin', 'pd-bridge.mjs')
const DEFAULT_RUNS = join(REPO, 'results', 'adversary')
const DEFAULT_OUT = join(REPO, 'results')
const PRESET = 'tiny'
const SEED = 1
const BLOCK = 256
const PROFILE = 'decoder'

/** Every case, in the order the protocol runs them. */
const CASES = ['route-spellings', 'expect-continue', 'refused-bodies', 'tampered-block', 'kill-under-load', 'crash-restart', 'absolute-paths']

const USAGE = `Usage: npx zx protocols/adversary.mjs [options]   (node runs it as well)

The adversary protocol (docs/BENCHMARK-PROTOCOL.md, "Adversary"): starts the embedded stack (pd-bridge
serve, preset ${PRESET}, blocks of ${BLOCK}) with a random deployment key in a fresh state directory and a
decoder alone beside it, runs each case against 127.0.0.1 only, compares every 200 answer with the
decoder alone's greedy tokens, counts processes and bytes left behind, writes one record in --runs and
regenerates RESULTS.md.

Cases (in this order): ${CASES.join(', ')}.

  --only NAME,NAME       run only these cases (absolute-paths scans the answers of those that ran)
  --prompt-tokens N      size of each fresh cold prompt (default 700: two full blocks and a tail)
  --max-tokens N         the answer budget, greedy (default 12)
  --clients N            concurrent clients in kill-under-load (default 16)
  --requests N           requests each client sends in kill-under-load (default 3)
  --spellings N          generated spellings of internal routes (default 400; the issue's own are always sent)
  --timeout-s N          the client's limit on one request (default 180)
  --state-dir DIR        where the checkpoint and sidecar are made or reused, and the run's own state
                         directory goes (runs/adversary-<id>/; default $PD_STATE_DIR or ~/.cache/pd-bridge)
  --keep-state           keep the run's state directory even when every case passed
  --runs DIR             where the record goes (default results/adversary in this checkout)
  --out DIR              where RESULTS.md and report.html go (default results/ in this checkout,
                         regenerated only when --runs is the default; with another --runs, give --out)
  --no-generate          do not regenerate the report
  -h, --help             this text (nothing is started or written)

Exit 0 only when no case served a wrong answer, reached an internal route, leaked a path, or left a
process or a byte behind. Progress goes to stderr, one line per step.
`
helpAndExit(USAGE)
checkArgv('adversary', argv, {
  only: 'string', 'prompt-tokens': 'string', 'max-tokens': 'string', clients: 'string', requests: 'string', spellings: 'string', 'timeout-s': 'string',
  'state-dir': 'string', 'keep-state': 'boolean', runs: 'string', out: 'string', generate: 'negatable',
})

function fail (message) {
  usageError('adversary', message)
}

const int = (flag, text, min) => integerFlag('adversary', flag, text, min)

const opts = {
  only: argv.only === undefined ? CASES : String(argv.only).split(',').map((s) => s.trim()).filter((s) => s !== ''),
  promptTokens: int('prompt-tokens', argv['prompt-tokens'] ?? 700, 2 * BLOCK + 1),
  maxTokens: int('max-tokens', argv['max-tokens'] ?? 12, 1),
  clients: int('clients', argv.clients ?? 16, 1),
  requests: int('requests', argv.requests ?? 3, 1),
  spellings: int('spellings', argv.spellings ?? 400, 0),
  timeoutMs: int('timeout-s', argv['timeout-s'] ?? 180, 1) * 1000,
  stateDir: argv['state-dir'] === undefined ? undefined : String(argv['state-dir']),
  keepState: argv['keep-state'] === true,
  runs: argv.runs === undefined ? DEFAULT_RUNS : resolve(String(argv.runs)),
  out: argv.out === undefined ? DEFAULT_OUT : resolve(String(argv.out)),
  generate: argv.generate !== false,
}
const unknownCases = opts.only.filter((c) => !CASES.includes(c))
if (unknownCases.length > 0) fail(`--only ${unknownCases.join(',')}: no such case (${CASES.join(', ')})`)
if (opts.only.length === 0) fail('--only names no case')
const regenerate = opts.generate && (argv.out !== undefined || opts.runs === DEFAULT_RUNS)

register()
const { ensureCheckpoint, ensureSidecar } = await import('../src/stack/assets.ts')
const { resolveStateDir, stackPaths } = await import('../src/stack/state-dir.ts')
const { Supervisor } = await import('../src/stack/supervisor.ts')
const { buildDemoPrompt } = await import('../src/stack/demo/prompt.ts')
const { loadTokenizer } = await import('../src/model/tokenizer/index.ts')
const { blockContentDigest, blockKeyChain, blockPath, CONTENT_DIGEST_KEY, listBlockDir } = await import('../src/decode/store/index.ts')
const { SafetensorsFile, writeSafetensors } = await import('../src/formats/safetensors/index.ts')
const { embeddedEnvironment } = await import('../verify/results/environment.ts')
const { ADVERSARY_RECORD_SCHEMA, adversaryHeadline, parseAdversaryRecord } = await import('../verify/results/adversary-record.ts')
const { generateResults } = await import('../verify/results/generate.ts')

function say (line) {
  process.stderr.write(`[adversary ${new Date().toISOString().slice(11, 19)}] ${line}\n`)
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))
const seedOf = () => randomBytes(4).readUInt32LE(0)

const startedAt = new Date().toISOString()
const runId = `${startedAt.replace(/[:.]/g, '-')}-adversary-${process.pid}`
const base = resolveStateDir(opts.stateDir)
const basePaths = stackPaths(base, PRESET, SEED, PROFILE, BLOCK)
const runDir = join(base, 'runs', `adversary-${runId}`)
const key = randomBytes(24).toString('base64url')
const serveEnv = childEnv({ PD_API_KEY: key })
const auth = { authorization: `Bearer ${key}` }
let serve
let supervisor
let keep = opts.keepState
const results = []

let modelName
let tokenizer
let frontUrl
let nativeUrl
let cacheDir
let paths

/** Every answer a caller without the key got (any port): the absolute-paths case scans them all. */
const anonymousAnswers = []
/** Pids of stacks the protocol started besides the main one (processes left are counted over them too). */
const extraPids = []

// ---------------------------------------------------------------------------------------------
// Requests

async function ask (baseUrl, messages, extra = {}) {
  return await askChat({ baseUrl, model: modelName, messages, maxTokens: opts.maxTokens, apiKey: key, extra, timeoutMs: opts.timeoutMs })
}

/** A fresh cold prompt of about `tokens` tokens, none of its blocks in the bridged store. */
async function freshPrompt (tokens = opts.promptTokens) {
  for (;;) {
    const p = buildDemoPrompt(tokenizer, tokens, seedOf())
    const keys = blockKeyChain(modelName, p.tokens, BLOCK)
    if (await presentKeys(cacheDir, keys) === 0) return { ...p, keys }
  }
}

/** A raw HTTP exchange (undici and fetch normalize paths; an attacker does not): status, headers, body text. */
async function rawRequest (url, method, target, { headers = {}, body, readBody = true, timeoutMs = 30_000 } = {}) {
  const { hostname, port } = new URL(url)
  return await new Promise((resolve) => {
    const socket = connect({ host: hostname, port: Number(port) })
    let data = Buffer.alloc(0)
    const done = (extra = {}) => {
      clearTimeout(timer)
      socket.destroy()
      resolve({ ...parseRaw(data), ...extra })
    }
    const timer = setTimeout(() => done({ timedOut: true }), timeoutMs)
    socket.on('error', (e) => done({ socketError: e.code ?? e.message }))
    socket.on('data', (c) => {
      data = Buffer.concat([data, c])
      const parsed = parseRaw(data)
      if (parsed.status !== null && (!readBody || parsed.complete)) done()
    })
    socket.on('end', () => done())
    socket.on('connect', () => {
      const lines = [`${method} ${target} HTTP/1.1`, `host: ${hostname}:${port}`, 'connection: close']
      for (const [k, v] of Object.entries(headers)) lines.push(`${k}: ${v}`)
      if (body !== undefined && headers['content-length'] === undefined) lines.push(`content-length: ${Buffer.byteLength(body)}`)
      socket.write(lines.join('\r\n') + '\r\n\r\n')
      if (body !== undefined) socket.write(body)
    })
  })
}

/** Status line, headers and body of a raw response so far (interim 1xx answers listed apart). */
function parseRaw (buf) {
  const text = buf.toString('latin1')
  const interim = []
  let rest = text
  for (;;) {
    const m = /^HTTP\/1\.1 (1\d\d)[^\r\n]*\r\n(?:[^\r\n]+\r\n)*\r\n/.exec(rest)
    if (m === null) break
    interim.push(Number(m[1]))
    rest = rest.slice(m[0].length)
  }
  const head = rest.indexOf('\r\n\r\n')
  if (head === -1) return { status: null, interim, headers: {}, body: '', complete: false }
  const [statusLine, ...headerLines] = rest.slice(0, head).split('\r\n')
  const headers = {}
  for (const l of headerLines) {
    const i = l.indexOf(':')
    if (i > 0) headers[l.slice(0, i).trim().toLowerCase()] = l.slice(i + 1).trim()
  }
  let body = rest.slice(head + 4)
  let complete = false
  if (headers['content-length'] !== undefined) complete = Buffer.byteLength(body, 'latin1') >= Number(headers['content-length'])
  else if (/chunked/i.test(headers['transfer-encoding'] ?? '')) {
    complete = body.endsWith('0\r\n\r\n')
    if (complete) body = dechunk(body)
  }
  return { status: Number(statusLine.split(' ')[1]), interim, headers, body: Buffer.from(body, 'latin1').toString('utf8'), complete }
}

function dechunk (body) {
  let out = ''
  let at = 0
  for (;;) {
    const eol = body.indexOf('\r\n', at)
    const size = parseInt(body.slice(at, eol), 16)
    if (!(size > 0)) return out
    out += body.slice(eol + 2, eol + 2 + size)
    at = eol + 2 + size + 2
  }
}

// ---------------------------------------------------------------------------------------------
// Cases. Each returns { tried, answers_compared, wrong_answers_served, correct, details }.

/** The issue's own spellings, then generated ones: percent-encoding, dot segments, slashes, case, queries. */
function routeSpellings (count) {
  const internal = [
    { method: 'POST', path: '/v1/cache/rescan', what: 'the decoder\'s rescan' },
    { method: 'GET', path: '/v1/cache', what: 'the decoder\'s cache routes' },
    { method: 'GET', path: '/health', what: 'the decoder\'s /health', viaDecoder: true },
  ]
  const fixed = [
    ['POST', '/v1/%63ache/rescan'], ['POST', '/v1/./cache/rescan'], ['GET', '/v1/%2e%2e/health'], ['GET', '/v1/x/../../health'],
    ['POST', '/v1/cache/rescan/'], ['POST', '/v1//cache/rescan'], ['POST', '/V1/CACHE/RESCAN'], ['POST', '/v1/cache%2frescan'],
    ['POST', '/v1\\cache\\rescan'], ['POST', '/v1/cache/rescan%00'], ['POST', '/v1/cache/rescan?x=1'], ['GET', '/v1/models/../../health'],
    ['POST', '/v1/models/..%2f..%2fv1%2fcache%2frescan'], ['GET', '/%2e/health'], ['POST', '/./v1/cache/./rescan'], ['POST', '/v1/cache/rescan#x'],
  ].map(([method, path]) => ({ method, path, target: path.startsWith('/health') ? 'health' : 'internal' }))
  let state = seedOf() || 1
  const rand = (n) => {
    state ^= state << 13; state ^= state >>> 17; state ^= state << 5
    return ((state >>> 0) % n)
  }
  const encodeChar = (c) => {
    const hex = c.charCodeAt(0).toString(16).padStart(2, '0')
    return '%' + (rand(2) === 0 ? hex : hex.toUpperCase())
  }
  const generated = []
  for (let i = 0; i < count; i++) {
    const route = internal[rand(internal.length)]
    const segments = route.path.slice(1).split('/')
    const out = []
    for (const seg of segments) {
      if (rand(4) === 0) out.push(['.', 'x/..', '.%2e/x', '%2e', 'y/%2e%2e'][rand(5)])
      let s = ''
      for (const c of seg) {
        const r = rand(10)
        s += r === 0 ? encodeChar(c) : r === 1 ? c.toUpperCase() : c
      }
      out.push(s)
    }
    let path = '/' + out.join(rand(6) === 0 ? '//' : '/')
    if (route.viaDecoder) path = `/v1/${['..', '%2e%2e', '%2E%2E', '.%2e', 'x/../..'][rand(5)]}${path}`
    if (rand(5) === 0) path += '/'
    if (rand(5) === 0) path += ['?', '?a=1', '?path=/v1/cache/rescan', '#frag'][rand(4)]
    if (rand(12) === 0) path = path.replace(/\//g, (m) => (rand(3) === 0 ? '%2f' : rand(3) === 0 ? '\\' : m))
    generated.push({ method: route.method, path, target: route.viaDecoder ? 'health' : 'internal' })
  }
  return [...fixed, ...generated]
}

/** The top-level keys of a JSON body, or null. */
function keysOf (text) {
  try {
    const v = JSON.parse(text)
    return v !== null && typeof v === 'object' && !Array.isArray(v) ? Object.keys(v).sort().join(',') : null
  } catch {
    return null
  }
}

const CASE_SPECS = {
  'route-spellings': {
    tried: 'spellings of the decoder\'s internal routes (POST /v1/cache/rescan, /v1/cache, the decoder\'s own /health) sent to the front door, with the key',
    expected: 'none reaches the decoder\'s internal route: no 2xx with the rescan\'s or the decoder /health\'s body',
    run: async () => {
      // What an internal answer looks like, asked of the decoder itself (an operator on its address).
      const decoderUrl = (await stackRecord(runDir)).processes.find((p) => p.name === 'decoder').url
      const rescan = await rawRequest(decoderUrl, 'POST', '/v1/cache/rescan', { headers: auth })
      const health = await rawRequest(decoderUrl, 'GET', '/health', { headers: auth })
      const frontHealth = await rawRequest(frontUrl, 'GET', '/health', { headers: auth })
      const internalShapes = new Set([keysOf(rescan.body), keysOf(health.body)].filter((k) => k !== null && k !== keysOf(frontHealth.body)))
      const spellings = routeSpellings(opts.spellings)
      const statuses = {}
      const reached = []
      let forwarded = 0
      for (const s of spellings) {
        const r = await rawRequest(frontUrl, s.method, s.path, { headers: { ...auth, 'content-type': 'application/json' }, body: s.method === 'POST' ? '{}' : undefined })
        statuses[r.status ?? 'none'] = (statuses[r.status ?? 'none'] ?? 0) + 1
        if (/passthrough/.test(r.headers['x-pd-bridge'] ?? '')) forwarded++
        if (r.status !== null && r.status >= 200 && r.status < 300 && internalShapes.has(keysOf(r.body))) reached.push(`${s.method} ${s.path}`)
        const anonymous = await rawRequest(frontUrl, s.method, s.path, { body: s.method === 'POST' ? '{}' : undefined, headers: { 'content-type': 'application/json' } })
        anonymousAnswers.push({ from: `front ${s.method} ${s.path} (no key)`, text: JSON.stringify(anonymous.headers) + anonymous.body })
      }
      say(`  ${spellings.length} spellings: statuses ${JSON.stringify(statuses)}; ${forwarded} forwarded to the decoder; ${reached.length} reached an internal route`)
      return {
        tried: spellings.length * 2,
        answers_compared: spellings.length,
        wrong_answers_served: 0,
        internal_routes_reached: reached.length,
        correct: reached.length === 0 && internalShapes.size > 0,
        details: { statuses, forwarded_to_decoder: forwarded, reached: reached.slice(0, 20), internal_shapes_known: internalShapes.size },
      }
    },
  },
  'expect-continue': {
    tried: 'a 50 MB completion body announced with Expect: 100-continue (and one without), headers only',
    expected: '413 before any body byte is read, no 100 Continue; the same 413 without the header',
    run: async () => {
      const headers = { ...auth, 'content-type': 'application/json', 'content-length': String(50 * 1024 * 1024) }
      const withExpect = await rawRequest(frontUrl, 'POST', '/v1/chat/completions', { headers: { ...headers, expect: '100-continue' }, readBody: false })
      const without = await rawRequest(frontUrl, 'POST', '/v1/chat/completions', { headers, readBody: false, body: '{"model":' })
      say(`  with Expect: interim ${JSON.stringify(withExpect.interim)}, status ${withExpect.status}; without: status ${without.status}`)
      const ok = withExpect.status === 413 && withExpect.interim.length === 0 && without.status === 413
      return {
        tried: 2, answers_compared: 2, wrong_answers_served: 0, correct: ok,
        details: { with_expect: { interim: withExpect.interim, status: withExpect.status, socket: withExpect.socketError ?? null }, without_expect: { status: without.status } },
      }
    },
  },
  'refused-bodies': {
    tried: 'bodies the decoder refuses (a __proto__ key, max_tokens 0, an unknown role) on long cold prompts and on a short one, through the front door and to the decoder alone',
    expected: 'the decoder\'s own status and error, a refused verdict, and no bridge work first (the engine prefilled no token, no capture, no block)',
    run: async () => {
      const engineUrl = (await stackRecord(runDir)).processes.find((p) => p.name === 'prefill-engine').url
      const prefilled = async () => JSON.parse((await rawRequest(engineUrl, 'GET', '/health', { headers: auth })).body).engine_prefilled_tokens
      const variants = [
        { name: '__proto__ key', body: (p) => `{"__proto__":{"x":1},"model":${JSON.stringify(modelName)},"messages":${JSON.stringify(p.messages)},"max_tokens":${opts.maxTokens}}` },
        { name: 'max_tokens 0', body: (p) => JSON.stringify({ model: modelName, messages: p.messages, max_tokens: 0 }) },
        { name: 'unknown role', body: (p) => JSON.stringify({ model: modelName, messages: [...p.messages, { role: 'wizard', content: 'x' }], max_tokens: opts.maxTokens }) },
      ]
      const rows = []
      for (const v of variants) {
        for (const size of ['long', 'short']) {
          const p = size === 'long' ? await freshPrompt() : buildDemoPrompt(tokenizer, 40, seedOf())
          const before = await prefilled()
          const body = v.body(p)
          const headers = { ...auth, 'content-type': 'application/json' }
          const a = await rawRequest(frontUrl, 'POST', '/v1/chat/completions', { headers, body, timeoutMs: opts.timeoutMs })
          const n = await rawRequest(nativeUrl, 'POST', '/v1/chat/completions', { headers, body, timeoutMs: opts.timeoutMs })
          const after = await prefilled()
          const blocks = size === 'long' ? await presentKeys(cacheDir, p.keys) : 0
          const sameError = a.status === n.status && a.status >= 400 && JSON.stringify(JSON.parse(a.body).error) === JSON.stringify(JSON.parse(n.body).error)
          const verdict = a.headers['x-pd-bridge'] ?? null
          rows.push({ variant: v.name, prompt: size, status: a.status, native_status: n.status, same_error: sameError, verdict, engine_tokens_prefilled: after - before, blocks_written: blocks })
          say(`  ${v.name}, ${size}: front ${a.status} (${verdict}), native ${n.status}, same error ${sameError}, engine prefilled ${after - before}, blocks ${blocks}`)
        }
      }
      const ok = rows.every((r) => r.same_error && r.engine_tokens_prefilled === 0 && r.blocks_written === 0 && /refused/.test(r.verdict ?? ''))
      return { tried: rows.length, answers_compared: rows.length, wrong_answers_served: 0, correct: ok, details: { rows } }
    },
  },
  'tampered-block': {
    tried: 'one tensor of a bridged prompt\'s second block changed and its plain content_sha256 recomputed (the keyed digest left as it was), then the same prompt again',
    expected: 'the tampered block is a miss (cached_tokens at most one block), it is quarantined, and the answer equals the decoder alone\'s',
    run: async () => {
      const p = await freshPrompt()
      const first = await ask(frontUrl, p.messages)
      const n = await ask(nativeUrl, p.messages)
      say(`  bridged first: ${first.verdict}, cached ${first.cachedTokens}`)
      const file = blockPath(cacheDir, p.keys[1])
      const tampered = await tamperBlock(file)
      const a = await ask(frontUrl, p.messages)
      const q = await quarantined(cacheDir)
      const inQuarantine = q.some((x) => x.endsWith(`${p.keys[1]}.safetensors`))
      const used = a.cachedTokens > BLOCK
      say(`  after tampering with ${tampered.tensor}: ${a.verdict}, cached ${a.cachedTokens}, quarantined ${inQuarantine}, equals native ${sameAsNative(a, n)}`)
      return {
        tried: 1, answers_compared: 2, wrong_answers_served: (wrongAnswer(a, n) ? 1 : 0) + (wrongAnswer(first, n) ? 1 : 0),
        correct: !used && inQuarantine && sameAsNative(a, n) && sameAsNative(first, n),
        details: {
          first_verdict: first.verdict, first_equals_native: sameAsNative(first, n), tensor: tampered.tensor, cached_tokens_after: a.cachedTokens,
          tampered_block_used: used, quarantined: inQuarantine, verdict_after: a.verdict,
        },
      }
    },
  },
  'kill-under-load': {
    tried: `${opts.clients} clients x ${opts.requests} requests (cold, short and warm prompts mixed) while the prefill engine, the share, the decoder and the front door are SIGKILLed in turn`,
    expected: 'every 200 equals the decoder alone\'s greedy tokens; the rest are clear errors; serve restarts every child',
    run: async () => await killUnderLoad(),
  },
  'crash-restart': {
    tried: 'the whole stack SIGKILLed mid-bridge (once with the engine\'s job queued, once with a block half written), then serve started again on the same state directory',
    expected: 'after the restart: no capture, spool file, staged block or carry left but what retention keeps; the next cold prompt bridges complete with the native tokens',
    run: async () => await crashRestart(),
  },
  'absolute-paths': {
    tried: 'every answer a caller without the key got in this run, probes of every process (/health, /v1/models, an unknown route, the rescan), and the same with a second stack started without any key (spellings through its front door, probes of every process)',
    expected: 'no absolute path of the deployment in any body or header',
    run: async () => {
      await probeEveryProcess(runDir, '')
      // A deployment without a key: nobody holds one, so no answer may carry a path (the issue's finding).
      const openDir = join(runDir, 'open')
      await mkdir(openDir, { recursive: true })
      await symlink(join(base, 'models'), join(openDir, 'models'))
      await symlink(join(base, 'sidecars'), join(openDir, 'sidecars'))
      const open = await startServe(BIN, openDir, childEnv())
      try {
        extraPids.push(open.child.pid, ...(await stackRecord(openDir)).processes.map((x) => x.pid))
        for (const s of routeSpellings(Math.ceil(opts.spellings / 4))) {
          const r = await rawRequest(open.ready.front, s.method, s.path, { body: s.method === 'POST' ? '{}' : undefined, headers: { 'content-type': 'application/json' } })
          anonymousAnswers.push({ from: `keyless front ${s.method} ${s.path}`, text: JSON.stringify(r.headers) + r.body })
        }
        await probeEveryProcess(openDir, 'keyless ')
      } finally {
        await stopServe(open)
      }
      const roots = deploymentPaths()
      const leaks = anonymousAnswers.filter((a) => roots.some((r) => a.text.includes(r)))
      say(`  ${anonymousAnswers.length} answers without the key scanned for ${roots.length} deployment paths: ${leaks.length} carry one`)
      return {
        tried: anonymousAnswers.length, answers_compared: 0, wrong_answers_served: 0, paths_leaked: leaks.length, correct: leaks.length === 0,
        details: { scanned: anonymousAnswers.length, paths_looked_for: roots.length, leaks: leaks.slice(0, 10).map((l) => l.from) },
      }
    },
  },
}

/** Probe every process of the stack in `dir` without the key; the answers join the scanned set. */
async function probeEveryProcess (dir, label) {
  for (const p of (await stackRecord(dir)).processes) {
    for (const [method, target] of [['GET', '/health'], ['GET', '/v1/models'], ['GET', '/nope'], ['GET', '/health?verbose=1'], ['POST', '/v1/cache/rescan'], ['GET', '/captures/x/manifest.json']]) {
      const r = await rawRequest(p.url, method, target)
      anonymousAnswers.push({ from: `${label}${p.name} ${method} ${target}`, text: JSON.stringify(r.headers) + r.body })
    }
  }
}

/** Absolute paths of this deployment an attacker must not learn (the state directory, its parts, the checkout, home, tmp). */
function deploymentPaths () {
  const set = new Set([runDir, base, REPO, homedir(), cacheDir, paths.captures, join(tmpdir(), 'pd-bridge')])
  return [...set].filter((p) => p !== undefined && p.length > 4)
}

/** Change one tensor of a block file and write it back with the plain digest recomputed; other metadata as it was. */
async function tamperBlock (file) {
  const f = await SafetensorsFile.open(file)
  const metadata = { ...f.metadata }
  const raw = await f.readAll()
  await f.close()
  const [name, t] = [...raw].sort((x, y) => y[1].data.byteLength - x[1].data.byteLength)[0]
  const data = new Uint8Array(t.data)
  for (let i = 0; i < data.length; i += 2) data[i] ^= 0x40
  raw.set(name, { ...t, data })
  metadata[CONTENT_DIGEST_KEY] = blockContentDigest(metadata, [...raw].map(([n, x]) => ({ name: n, ...x })))
  await writeSafetensors(file, raw, metadata)
  return { tensor: name }
}

/** The prompts of kill-under-load: cold (fresh), short, warm (a cold one again). */
async function killUnderLoad () {
  const warmPool = []
  const sent = []
  const order = ['prefill-engine', 'share', 'decoder', 'front']
  const kills = []
  let answered = 0
  const total = opts.clients * opts.requests
  const killAt = order.map((_, i) => Math.floor(((i + 1) * total) / (order.length + 1)))
  const killer = (async () => {
    for (let i = 0; i < order.length; i++) {
      while (answered < killAt[i]) await sleep(50)
      const pid = await pidOf(runDir, order[i])
      try {
        process.kill(pid, 'SIGKILL')
        kills.push({ name: order[i], pid, after_answers: answered })
        say(`  SIGKILL ${order[i]} (pid ${pid}) after ${answered} answers`)
      } catch (e) {
        kills.push({ name: order[i], pid, error: e.code })
      }
    }
  })()
  const client = async (c) => {
    for (let r = 0; r < opts.requests; r++) {
      const kind = ['cold', 'short', 'warm'][(c + r) % 3]
      let p
      if (kind === 'short') p = buildDemoPrompt(tokenizer, 60, seedOf())
      else if (kind === 'warm' && warmPool.length > 0) p = warmPool[(c * 7 + r) % warmPool.length]
      else p = await freshPrompt()
      const a = await ask(frontUrl, p.messages)
      answered++
      if (kind !== 'short' && a.status === 200) warmPool.push(p)
      sent.push({ kind, p, a })
    }
  }
  await Promise.all(Array.from({ length: opts.clients }, (_, c) => client(c)))
  await killer
  // Every 200 against the decoder alone (one native answer per distinct prompt).
  const natives = new Map()
  let wrong = 0
  let compared = 0
  const tally = {}
  for (const s of sent) {
    const v = s.a.status === 200 ? `200 ${(s.a.verdict ?? '').replace(/\d+/g, 'N').slice(0, 60)}` : `error ${s.a.status ?? (s.a.verdict ?? '').slice(0, 40)}`
    tally[v] = (tally[v] ?? 0) + 1
    if (s.a.status !== 200) continue
    const k = s.p.tokens.join(',')
    if (!natives.has(k)) natives.set(k, await ask(nativeUrl, s.p.messages))
    compared++
    if (wrongAnswer(s.a, natives.get(k))) wrong++
  }
  const restarted = await waitAllHealthy()
  say(`  ${sent.length} requests: ${Object.entries(tally).map(([v, n]) => `${n} x ${v}`).join('; ')}; ${compared} compared, ${wrong} wrong; every child back: ${restarted}`)
  return {
    tried: sent.length, answers_compared: compared, wrong_answers_served: wrong, correct: wrong === 0 && restarted && compared > 0,
    details: { kills, outcomes: tally, all_children_back: restarted },
  }
}

/** Wait (bounded) until every child of the stack answers /health again. */
async function waitAllHealthy (ms = 120_000) {
  const end = Date.now() + ms
  while (Date.now() < end) {
    try {
      const rec = await stackRecord(runDir)
      const answers = await Promise.all(rec.processes.map((p) => rawRequest(p.url, 'GET', '/health', { timeoutMs: 5000 })))
      if (answers.every((r) => r.status === 200)) return true
    } catch { /* a child is between lives */ }
    await sleep(500)
  }
  return false
}

/** Everything under a directory: files and bytes (0 when it does not exist). */
async function sizeOf (dir) {
  let files = 0
  let bytes = 0
  const walk = async (d) => {
    let entries
    try {
      entries = await readdir(d, { withFileTypes: true })
    } catch {
      return
    }
    for (const e of entries) {
      const p = join(d, e.name)
      if (e.isDirectory()) await walk(p)
      else {
        files++
        bytes += (await stat(p)).size
      }
    }
  }
  await walk(dir)
  return { files, bytes }
}

/**
 * What a stopped or restarted stack left on disk, apart from the checkpoint, the sidecar, the block
 * store's blocks and the logs: capture folders (a failed bridge's capture is kept by the retention
 * rule, docs/configuration.md `capture.retain`; any other is a leftover), the spool, temp block files.
 */
async function leftovers () {
  const captures = []
  let entries = []
  try {
    entries = await readdir(paths.captures, { withFileTypes: true })
  } catch { /* none */ }
  for (const e of entries) {
    // A dot-file is a live process's lock (the engine's root lock), not a capture; after the stop it is gone too (after_stop).
    if (e.name.startsWith('.')) continue
    const dir = join(paths.captures, e.name)
    let state = 'no manifest'
    try {
      state = JSON.parse(await readFile(join(dir, 'manifest.json'), 'utf8')).state
    } catch { /* none */ }
    captures.push({ name: e.name, state, ...(await sizeOf(dir)) })
  }
  // The spool's request folders and the in-flight marks of interrupted bridges; the live front door's lock is not a leftover.
  let spoolEntries = []
  try {
    spoolEntries = await readdir(paths.spool, { withFileTypes: true })
  } catch { /* none */ }
  const spool = { files: 0, bytes: 0 }
  for (const e of spoolEntries) {
    if (e.name.startsWith('.') && e.name !== '.inflight') continue
    const p = join(paths.spool, e.name)
    const got = e.isDirectory() ? await sizeOf(p) : { files: 1, bytes: (await stat(p)).size }
    spool.files += got.files
    spool.bytes += got.bytes
  }
  let temps = 0
  try {
    temps = (await listBlockDir(cacheDir)).filter((e) => e.kind === 'temp').length
  } catch { /* no store */ }
  const retained = captures.filter((c) => c.state === 'failed')
  const left = captures.filter((c) => c.state !== 'failed')
  return {
    captures_left: left.length, capture_states: captures.map((c) => c.state), retained_failed_captures: retained.length,
    spool_files: spool.files, temp_block_files: temps,
    bytes_left: left.reduce((a, c) => a + c.bytes, 0) + spool.bytes,
  }
}

/** Kill serve and every child at once (what a power cut or OOM killer does). */
async function killEverything () {
  const rec = await stackRecord(runDir)
  for (const p of [serve.child.pid, ...rec.processes.map((x) => x.pid)]) {
    try { process.kill(p, 'SIGKILL') } catch { /* gone */ }
  }
  await serve.exited
  const end = Date.now() + 10_000
  while (rec.processes.some((p) => alive(p.pid)) && Date.now() < end) await sleep(100)
}

async function crashRestart () {
  const rows = []
  let wrong = 0
  let compared = 0
  for (const stage of ['engine job queued', 'block half written']) {
    const p = await freshPrompt(stage === 'block half written' ? 10 * BLOCK + 100 : opts.promptTokens)
    const pending = ask(frontUrl, p.messages)
    let reached
    if (stage === 'engine job queued') {
      reached = await waitInLog(join(runDir, 'logs', 'prefill-engine.log'), await logSize(runDir, 'prefill-engine'), '"event":"queued"', 60_000)
    } else {
      const end = Date.now() + 120_000
      reached = false
      while (!reached && Date.now() < end) {
        try { reached = (await listBlockDir(cacheDir)).some((e) => e.kind === 'temp') } catch { /* no store yet */ }
        if (!reached) await sleep(2)
      }
    }
    await killEverything()
    await pending
    const afterKill = await leftovers()
    serve = await startServe(BIN, runDir, serveEnv)
    frontUrl = serve.ready.front
    await waitAllHealthy()
    // Reconciliation retires interrupted captures in the background: give it a bounded while.
    let afterRestart = await leftovers()
    for (const end = Date.now() + 60_000; Date.now() < end && (afterRestart.captures_left > 0 || afterRestart.spool_files > 0 || afterRestart.temp_block_files > 0);) {
      await sleep(500)
      afterRestart = await leftovers()
    }
    const again = await ask(frontUrl, p.messages)
    const n = await ask(nativeUrl, p.messages)
    compared++
    if (wrongAnswer(again, n)) wrong++
    const store = await storeState(cacheDir)
    rows.push({ stage, stage_reached: reached, after_kill: afterKill, after_restart: afterRestart, retry_verdict: again.verdict, retry_equals_native: sameAsNative(again, n), corrupt_blocks: store.corrupt })
    say(`  killed with ${stage} (${reached ? 'reached' : 'not seen'}): before restart ${afterKill.captures_left} captures, ${afterKill.spool_files} spool files, ${afterKill.temp_block_files} temp blocks; ` +
      `after restart ${afterRestart.captures_left} captures (${afterRestart.retained_failed_captures} failed kept), ${afterRestart.spool_files} spool files, ${afterRestart.temp_block_files} temp blocks; retry ${again.verdict}`)
  }
  const clean = rows.every((r) => r.after_restart.captures_left === 0 && r.after_restart.spool_files === 0 && r.after_restart.temp_block_files === 0 && r.corrupt_blocks === 0)
  return {
    tried: rows.length, answers_compared: compared, wrong_answers_served: wrong, correct: clean && wrong === 0 && rows.every((r) => r.retry_equals_native),
    bytes_left: rows.reduce((a, r) => a + r.after_restart.bytes_left, 0),
    details: { rows },
  }
}

/** Run one case; never throws. */
async function runCase (name) {
  const spec = CASE_SPECS[name]
  say(`${name}: ${spec.tried}`)
  const entry = { name, tried_what: spec.tried, expected: spec.expected }
  try {
    const r = await spec.run()
    const out = {
      ...entry, tried: r.tried, answers_compared: r.answers_compared, wrong_answers_served: r.wrong_answers_served,
      internal_routes_reached: r.internal_routes_reached ?? 0, paths_leaked: r.paths_leaked ?? 0, bytes_left: r.bytes_left ?? 0,
      correct: r.correct, details: r.details,
    }
    say(`${name}: ${out.correct ? 'correct' : 'NOT CORRECT'}`)
    return out
  } catch (e) {
    say(`${name}: the protocol failed: ${e.message}`)
    return { ...entry, tried: 0, answers_compared: 0, wrong_answers_served: 0, internal_routes_reached: 0, paths_leaked: 0, bytes_left: 0, correct: false, details: { error: String(e.stack ?? e) } }
  }
}

// ---------------------------------------------------------------------------------------------

let environment
let finalLeft = null
let processesLeft
process.once('SIGINT', () => {
  void (async () => {
    await stopServe(serve)
    await supervisor?.stopAll()
    process.exit(130)
  })()
})

try {
  say(`checkpoint and sidecar in ${base} (made once, reused)`)
  const checkpoint = await ensureCheckpoint(basePaths.model, PRESET, SEED)
  const sidecar = await ensureSidecar(basePaths.sidecar, checkpoint, PROFILE, BLOCK)
  environment = embeddedEnvironment({ preset: PRESET, seed: SEED, blockSize: BLOCK, prefillProfile: PROFILE, sidecarFingerprint: sidecar.fingerprint })
  await mkdir(runDir, { recursive: true })
  await symlink(join(base, 'models'), join(runDir, 'models'))
  await symlink(join(base, 'sidecars'), join(runDir, 'sidecars'))
  paths = stackPaths(runDir, PRESET, SEED, PROFILE, BLOCK)
  serve = await startServe(BIN, runDir, serveEnv)
  frontUrl = serve.ready.front
  const frontCfg = JSON.parse(await readFile(join(runDir, 'run', 'front.json'), 'utf8'))
  modelName = frontCfg.decoder.modelName
  cacheDir = frontCfg.decoder.cacheDir
  tokenizer = await loadTokenizer(checkpoint.dir)
  say(`serve ready with a deployment key: front door ${frontUrl} (pid ${serve.ready.pid})`)
  supervisor = new Supervisor({ logDir: join(runDir, 'logs'), graceMs: 5000 })
  await mkdir(join(runDir, 'native-cache'), { recursive: true })
  nativeUrl = (await supervisor.start({
    name: 'decoder-native',
    args: ['decoder', '--model', checkpoint.dir, '--profile', PROFILE, '--cache-dir', join(runDir, 'native-cache'), '--block-size', String(BLOCK), '--port', '0', '--model-name', modelName],
    env: serveEnv,
    readyTimeoutMs: 120_000,
  })).url
  say(`the decoder alone at ${nativeUrl}, its own empty store`)
  const p = await freshPrompt()
  const a = await ask(frontUrl, p.messages)
  const n = await ask(nativeUrl, p.messages)
  if (a.verdict !== 'complete' || !sameAsNative(a, n)) throw new Error(`the stack does not bridge a cold prompt complete with the native tokens before any case (${a.verdict}, HTTP ${a.status})`)
  say('baseline: a cold prompt bridged complete with the native tokens')
  for (const name of CASES.filter((c) => opts.only.includes(c))) {
    results.push(await runCase(name))
    if (serve.child.exitCode !== null || serve.child.signalCode !== null) {
      say(`serve exited (${serve.child.exitCode ?? serve.child.signalCode}): the remaining cases cannot run\n${serve.stderr().slice(-1500)}`)
      break
    }
  }
} catch (err) {
  say(`stopped: ${err.message}`)
  process.exitCode = 1
  keep = true
} finally {
  // Processes left: every pid the stack ever recorded, after a normal stop.
  const pids = [...extraPids]
  try { pids.push(...(await stackRecord(runDir)).processes.map((x) => x.pid)) } catch { /* never started */ }
  await stopServe(serve)
  await supervisor?.stopAll()
  const end = Date.now() + 15_000
  while (pids.some(alive) && Date.now() < end) await sleep(100)
  processesLeft = pids.filter(alive).length
  if (paths !== undefined && cacheDir !== undefined) finalLeft = await leftovers()
}

if (results.length > 0) {
  const record = {
    schema: ADVERSARY_RECORD_SCHEMA,
    runId,
    startedAt,
    finishedAt: new Date().toISOString(),
    environment,
    settings: { promptTokens: opts.promptTokens, maxTokens: opts.maxTokens, clients: opts.clients, requestsPerClient: opts.requests, spellings: opts.spellings, timeoutMs: opts.timeoutMs, keyed: true },
    cases: results,
    after_stop: {
      processes_left: processesLeft ?? 0, bytes_left: finalLeft?.bytes_left ?? 0, captures_left: finalLeft?.captures_left ?? 0,
      spool_files: finalLeft?.spool_files ?? 0, temp_block_files: finalLeft?.temp_block_files ?? 0,
    },
  }
  await mkdir(opts.runs, { recursive: true })
  const file = join(opts.runs, `${runId}.json`)
  parseAdversaryRecord(record, file)
  await writeFile(file, JSON.stringify(record, null, 2) + '\n')
  say(`wrote ${file}`)
  process.stdout.write(`${adversaryHeadline(record)}\n`)
  for (const c of results) {
    process.stdout.write(`  ${c.correct ? 'ok  ' : 'FAIL'} ${c.name.padEnd(18)} tried ${c.tried}, compared ${c.answers_compared}, wrong ${c.wrong_answers_served}, routes reached ${c.internal_routes_reached}, paths leaked ${c.paths_leaked}, bytes left ${c.bytes_left}\n`)
  }
  if (results.some((c) => !c.correct) || record.after_stop.processes_left > 0 || record.after_stop.bytes_left > 0) {
    process.exitCode = 1
    keep = true
  }
  if (regenerate) {
    try {
      const r = await generateResults(join(opts.out, 'runs'), opts.out)
      say(`results regenerated: ${r.files.map((f) => join(opts.out, f)).join(', ')}`)
    } catch (err) {
      say(`results not regenerated: ${err.message}`)
      process.exitCode = 1
    }
  } else if (opts.generate) say('RESULTS.md not regenerated: --runs was given without --out (pass --out DIR to write a report with these records)')
}
if (keep) say(`state kept: ${runDir} (logs in ${join(runDir, 'logs')})`)
else await rm(runDir, { recursive: true, force: true })

