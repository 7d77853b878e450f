#!/usr/bin/env node
// The fault protocol (docs/BENCHMARK-PROTOCOL.md, "Faults"). Starts the embedded stack as
// `pd-bridge serve` (a child process, its own state directory under <state>/runs/, the bridged block
// store on a small tmpfs when one can be mounted) and a decoder alone beside it, then injects one
// fault after another: bit flips in a stored block, a full and a read-only store, the prefill engine
// SIGKILLed mid-bridge, the share SIGSTOPped mid-stream, requests the decoder refuses, concurrent cold
// prompts, the block writer (the front door) SIGKILLed mid-block, a manifest that does not match the
// request, a front door whose sidecar has another geometry, and a truncated layer file. For each it
// records the verdict, whether the answer equals the decoder alone's greedy tokens, whether anything
// corrupt was indexed or served, and how long until a fresh cold prompt bridged complete again. One
// record under results/faults/, then RESULTS.md is regenerated (pd-bridge results).
//
//   npx zx protocols/faults.mjs [--only NAME,NAME] [--prompt-tokens 700] [--concurrency 8] [--keep-state]
//   npx zx protocols/faults.mjs --help
import { execFileSync } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { watch } from 'node:fs'
import { mkdir, open, readdir, readFile, rm, stat, symlink, unlink, writeFile } from 'node:fs/promises'
import { once } from 'node:events'
import { createServer, request as httpRequest } from 'node:http'
import { join, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'
import { argv } from 'zx'
import { register } from 'tsx/esm/api'
import { checkArgv, helpAndExit, usageError } from './flags.mjs'
import {
  askChat, childEnv, logSize as logSizeIn, pidOf as pidIn, presentKeys as presentKeysIn, quarantined as quarantinedIn, sameAsNative,
  startServe as startServeIn, stopServe as stopServeChild, storeState as storeStateOf, waitInLog,
} from './lib/serve-stack.mjs'

const REPO = resolve(fileURLToPath(new URL('..', import.meta.url)))
const BIN = join(REPO, 'bin', 'pd-bridge.mjs')
const DEFAULT_RUNS = join(REPO, 'results', 'faults')
const DEFAULT_OUT = join(REPO, 'results')
const PRESET = 'tiny'
const SEED = 1
const BLOCK = 256
const PROFILE = 'decoder'

/** Every fault, in the order the protocol injects them. */
const FAULTS = [
  'refused-max-tokens-0', 'refused-temperature', 'bit-flip', 'enospc', 'read-only', 'prefill-sigkill',
  'share-sigstop', 'writer-sigkill', 'manifest-mismatch', 'truncated-layer', 'geometry-mismatch', 'concurrent-cold',
]

const USAGE = `Usage: npx zx protocols/faults.mjs [options]   (node runs it as well)

The fault protocol (docs/BENCHMARK-PROTOCOL.md, "Faults"): starts the embedded stack (pd-bridge serve,
preset ${PRESET}, blocks of ${BLOCK}) in a fresh state directory and a decoder alone beside it, injects
each fault, compares every answer with the decoder alone's greedy tokens, checks the block store for
corrupt blocks, times the recovery, writes one record in --runs and regenerates RESULTS.md.

Faults (in this order): ${FAULTS.join(', ')}.
enospc and read-only need a tmpfs for the store (root); without one they are recorded as skipped.

  --only NAME,NAME       inject only these faults
  --prompt-tokens N      size of each fresh cold prompt (default 700: two full blocks and a tail)
  --max-tokens N         the answer budget, greedy (default 16)
  --concurrency N        cold prompts sent at once in concurrent-cold (default 8)
  --fault-timeout-s N    the client's limit on a faulted request (default 120)
  --recovery-timeout-s N how long the stack may take to bridge again after a fault (default 60)
  --state-dir DIR        where the checkpoint and sidecars are made or reused, and the run's own
                         state directory goes (runs/faults-<id>/; default $PD_STATE_DIR or ~/.cache/pd-bridge)
  --keep-state           keep the run's state directory (logs, store) even when every fault passed
  --runs DIR             where the record goes (default results/faults in this checkout)
  --out DIR              where RESULTS.md and report.html go (default results/ in this checkout,
                         regenerated only when --runs is the default; with another --runs, give --out)
  --no-generate          do not regenerate the report
  -h, --help             this text (nothing is started or written)

Exit 0 only when every injected fault was answered correctly (the native answer, nothing corrupt
indexed or served). Progress goes to stderr, one line per step.
`
helpAndExit(USAGE)
checkArgv('faults', argv, {
  only: 'string', 'prompt-tokens': 'string', 'max-tokens': 'string', concurrency: 'string', 'fault-timeout-s': 'string',
  'recovery-timeout-s': 'string', 'state-dir': 'string', 'keep-state': 'boolean', runs: 'string', out: 'string', generate: 'negatable',
})

function fail (message) {
  usageError('faults', message)
}

function int (name, text, min) {
  if (!/^\d+$/.test(String(text)) || Number(text) < min) fail(`--${name} must be an integer >= ${min}, got ${JSON.stringify(text)}`)
  return Number(text)
}

const opts = {
  only: argv.only === undefined ? FAULTS : String(argv.only).split(',').map((s) => s.trim()).filter((s) => s !== ''),
  promptTokens: int('prompt-tokens', argv['prompt-tokens'] ?? 700, 2 * BLOCK + 1),
  maxTokens: int('max-tokens', argv['max-tokens'] ?? 16, 1),
  concurrency: int('concurrency', argv.concurrency ?? 8, 1),
  faultTimeoutMs: int('fault-timeout-s', argv['fault-timeout-s'] ?? 120, 1) * 1000,
  recoveryTimeoutMs: int('recovery-timeout-s', argv['recovery-timeout-s'] ?? 60, 1) * 1000,
  stateDir: argv['state-dir'] === undefined ? undefined : String(argv['state-dir']),
  keepState: argv['keep-state'] === true,
  runs: argv.runs === undefined ? DEFAULT_RUNS : resolve(String(argv.runs)),
  out: argv.out === undefined ? DEFAULT_OUT : resolve(String(argv.out)),
  generate: argv.generate !== false,
}
const unknownFaults = opts.only.filter((f) => !FAULTS.includes(f))
if (unknownFaults.length > 0) fail(`--only ${unknownFaults.join(',')}: no such fault (${FAULTS.join(', ')})`)
if (opts.only.length === 0) fail('--only names no fault')
const regenerate = opts.generate && (argv.out !== undefined || opts.runs === DEFAULT_RUNS)

// The stack's parts and the record are TypeScript; tsx lets this protocol import them as they are.
register()
const { ensureCheckpoint, ensureSidecar } = await import('../src/stack/assets.ts')
const { resolveStateDir, stackPaths } = await import('../src/stack/state-dir.ts')
const { Supervisor } = await import('../src/stack/supervisor.ts')
const { buildDemoPrompt } = await import('../src/stack/demo/prompt.ts')
const { loadTokenizer } = await import('../src/model/tokenizer/index.ts')
const { blockKeyChain, blockPath } = await import('../src/decode/store/index.ts')
const { SafetensorsFile } = await import('../src/formats/safetensors/index.ts')
const { embeddedEnvironment } = await import('../verify/results/environment.ts')
const { FAULTS_RECORD_SCHEMA, faultCorrect, parseFaultsRecord } = await import('../verify/results/fault-record.ts')
const { faultHeadline } = await import('../verify/results/faults-section.ts')
const { generateResults } = await import('../verify/results/generate.ts')

function say (line) {
  process.stderr.write(`[faults ${new Date().toISOString().slice(11, 19)}] ${line}\n`)
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))
const seedOf = () => randomBytes(4).readUInt32LE(0)

// ---------------------------------------------------------------------------------------------
// The run's state directory: the checkpoint and sidecars of the base state directory (made once,
// reused), everything else fresh, the bridged block store on a tmpfs when one can be mounted.

const startedAt = new Date().toISOString()
const runId = `${startedAt.replace(/[:.]/g, '-')}-faults-${process.pid}`
const base = resolveStateDir(opts.stateDir)
const basePaths = stackPaths(base, PRESET, SEED, PROFILE, BLOCK)
const runDir = join(base, 'runs', `faults-${runId}`)
const cacheMount = join(runDir, 'cache')
let tmpfs = false
let serve
let supervisor
let proxy
let keep = opts.keepState
const results = []

function mountTmpfs (at, size) {
  try {
    execFileSync('mount', ['-t', 'tmpfs', '-o', `size=${size}`, 'tmpfs', at], { stdio: 'ignore' })
    return true
  }
  catch {
    return false
  }
}

function remount (at, mode) {
  execFileSync('mount', ['-o', `remount,${mode}`, at], { stdio: 'ignore' })
}

function unmount (at) {
  try { execFileSync('umount', [at], { stdio: 'ignore' }) } catch { /* not mounted */ }
}

/** Start serve on the run's state directory (no PD_* from the shell). */
async function startServe () {
  return await startServeIn(BIN, runDir)
}

async function stopServe () {
  await stopServeChild(serve)
}

async function pidOf (name) {
  return await pidIn(runDir, name)
}

// ---------------------------------------------------------------------------------------------
// Requests: the official openai client, greedy, token ids returned.

let modelName
let tokenizer
let frontUrl
let nativeUrl
let cacheDir
let captureRoot

/** One chat request; what the protocol compares. Never throws: a failure is in `error`. */
async function ask (baseUrl, messages, extra = {}, timeoutMs = opts.faultTimeoutMs) {
  return await askChat({ baseUrl, model: modelName, messages, maxTokens: opts.maxTokens, extra, timeoutMs })
}

/** When the protocol's own native legs ran (start, end): recovery time leaves them out. */
const nativeLegs = []

/** The same request to the decoder alone; its time is the protocol's, not the stack's. */
async function askNative (messages, extra = {}) {
  const start = Date.now()
  const n = await ask(nativeUrl, messages, extra)
  nativeLegs.push([start, Date.now()])
  return n
}

/** Milliseconds of native legs inside [from, to]. */
function nativeTimeWithin (from, to) {
  return nativeLegs.reduce((a, [s, e]) => a + Math.max(0, Math.min(e, to) - Math.max(s, from)), 0)
}

/** A fresh cold prompt of about `tokens` tokens, checked absent from the bridged store. */
async function freshPrompt (tokens = opts.promptTokens) {
  for (;;) {
    const p = buildDemoPrompt(tokenizer, tokens, seedOf())
    const keys = blockKeyChain(modelName, p.tokens, BLOCK)
    const present = await Promise.all(keys.map((k) => stat(blockPath(cacheDir, k)).then(() => true, () => false)))
    if (!present.some(Boolean)) return { ...p, keys }
  }
}

function short (a) {
  return `HTTP ${a.status ?? 'none'}, ${a.verdict ?? 'no verdict'}, cached ${a.cachedTokens}, ${(a.ms / 1000).toFixed(2)} s`
}

// ---------------------------------------------------------------------------------------------
// The store: what is in it, what is corrupt, what is quarantined.

async function storeState () {
  return await storeStateOf(cacheDir)
}

async function quarantined () {
  return await quarantinedIn(cacheDir)
}

async function captureCount () {
  try {
    return (await readdir(captureRoot)).length
  }
  catch {
    return 0
  }
}

async function presentKeys (keys) {
  return await presentKeysIn(cacheDir, keys)
}

// ---------------------------------------------------------------------------------------------
// Recovery: fresh cold prompts until one bridges complete with the native tokens.

async function recover (via, since) {
  const end = since + opts.recoveryTimeoutMs
  let attempts = 0
  let last
  while (Date.now() < end) {
    attempts++
    const p = await freshPrompt()
    const a = await ask(via, p.messages, {}, Math.max(1000, end - Date.now()))
    last = a
    if (a.status === 200 && a.verdict === 'complete') {
      const at = Date.now()
      const n = await askNative(p.messages)
      return { recoveryMs: at - since - nativeTimeWithin(since, at), attempts, equal: sameAsNative(a, n), last: short(a) }
    }
    await sleep(250)
  }
  return { recoveryMs: null, attempts, equal: null, last: last === undefined ? 'no attempt' : short(last) }
}

// ---------------------------------------------------------------------------------------------
// A fault proxy between extra front doors and the share: it can rewrite the manifest or cut a layer.

async function startProxy (target) {
  const p = { url: '', fault: 'pass', hits: 0 }
  const server = createServer((req, res) => {
    const url = new URL(req.url ?? '/', target)
    const fault = p.fault
    const up = httpRequest(url, { method: req.method, headers: { ...req.headers, host: url.host } }, (upRes) => {
      const chunks = []
      upRes.on('data', (c) => chunks.push(c))
      upRes.on('end', () => {
        let body = Buffer.concat(chunks)
        const headers = { ...upRes.headers }
        if (fault === 'manifest-token-count' && /manifest\.json$/.test(url.pathname) && upRes.statusCode === 200) {
          const m = JSON.parse(body.toString('utf8'))
          m.tokenCount += 1
          body = Buffer.from(JSON.stringify(m, null, 2) + '\n')
          delete headers['x-content-sha256']
          p.hits++
        }
        if (fault === 'truncate-layer' && /layer-001\.safetensors$/.test(url.pathname) && body.length > 100) {
          body = body.subarray(0, body.length >> 1)
          p.hits++
        }
        delete headers['transfer-encoding']
        headers['content-length'] = String(body.length)
        res.writeHead(upRes.statusCode ?? 502, headers)
        res.end(body)
      })
      upRes.on('error', () => res.destroy())
    })
    up.on('error', () => res.destroy())
    req.pipe(up)
  })
  server.listen(0, '127.0.0.1')
  await once(server, 'listening')
  p.url = `http://127.0.0.1:${server.address().port}`
  p.close = async () => {
    server.closeAllConnections()
    await new Promise((resolve) => server.close(() => resolve()))
  }
  return p
}

/** Start another front door on the stack's engines, with `change` applied to the stack's own config. */
async function startExtraFront (name, change) {
  const cfg = JSON.parse(await readFile(join(runDir, 'run', 'front.json'), 'utf8'))
  const mine = change({ ...cfg, listen: { host: '127.0.0.1', port: 0 }, capture: { ...cfg.capture, spoolDir: join(runDir, `spool-${name}`) } })
  const file = join(runDir, 'run', `${name}.json`)
  await writeFile(file, JSON.stringify(mine, null, 2) + '\n')
  const ready = await supervisor.start({ name, args: ['front', '--config', file], env: childEnv(), readyTimeoutMs: 120_000 })
  return ready.url
}

// ---------------------------------------------------------------------------------------------
// The faults. Each returns the record's fields; `fault()` adds the store check and the rule.

/** A faulted request's common fields against the native answer of the same prompt. */
function compared (a, n) {
  return { verdict: a.verdict ?? '(no verdict)', status: a.status, answer_equals_native: sameAsNative(a, n), answer_ms: a.ms }
}

async function logSize (name) {
  return await logSizeIn(runDir, name)
}

/** A request the decoder refuses, sent through the front door and to the decoder alone. */
async function refused (extra, what) {
  const p = await freshPrompt()
  const before = { captures: await captureCount(), blocks: (await storeState()).blocks }
  const a = await ask(frontUrl, p.messages, extra)
  const n = await askNative(p.messages, extra)
  const after = { captures: await captureCount(), blocks: (await storeState()).blocks }
  say(`  ${what}: ${short(a)}; native HTTP ${n.status}`)
  const bridgeWork = after.captures - before.captures + (await presentKeys(p.keys))
  return {
    ...compared(a, n),
    // A refusal equal to the decoder's own is the correct answer only if no bridge work was done first.
    answer_equals_native: sameAsNative(a, n) && bridgeWork === 0,
    recoveryVia: frontUrl,
    faultEnd: Date.now(),
    details: { front: a.error, native: n.error, captures_made: after.captures - before.captures, prompt_blocks_written: await presentKeys(p.keys) },
  }
}

const FAULT_SPECS = {
  'refused-max-tokens-0': {
    injected: 'a cold prompt with max_tokens 0 through the front door',
    expected: 'refused before any bridge work (no capture, no block) with exactly the decoder\'s own status and error',
    run: async () => await refused({ max_tokens: 0 }, 'max_tokens 0'),
  },
  'refused-temperature': {
    // 2.5 is past OpenAI's range (0 to 2); 0.7 was refused until the decoder sampled (records before that say 0.7).
    injected: 'a cold prompt with temperature 2.5 through the front door',
    expected: 'refused before any bridge work (no capture, no block) with exactly the decoder\'s own status and error',
    run: async () => await refused({ temperature: 2.5 }, 'temperature 2.5'),
  },
  'bit-flip': {
    injected: 'one bit flipped in the payload of the second block of a bridged prompt, then the same prompt again',
    expected: 'the flipped block is a miss (cached_tokens below it), the answer the native tokens, the block in the quarantine',
    run: async () => {
      const p = await freshPrompt()
      const first = await ask(frontUrl, p.messages)
      const n = await askNative(p.messages)
      say(`  bridged first: ${short(first)}`)
      const key = p.keys[1]
      const path = blockPath(cacheDir, key)
      const f = await SafetensorsFile.open(path)
      const [name, info] = [...f.tensors].sort((x, y) => (y[1].end - y[1].begin) - (x[1].end - x[1].begin))[0]
      const at = f.dataStart + info.begin + ((info.end - info.begin) >> 1)
      await f.close()
      const fh = await open(path, 'r+')
      const byte = Buffer.alloc(1)
      await fh.read(byte, 0, 1, at)
      byte[0] ^= 0x10
      await fh.write(byte, 0, 1, at)
      await fh.close()
      const a = await ask(frontUrl, p.messages)
      say(`  same prompt after the flip: ${short(a)}`)
      const q = await quarantined()
      return {
        ...compared(a, n),
        // The flipped block holds tokens [256, 512): a cached_tokens above 256 means it was used.
        corruptServed: a.cachedTokens > BLOCK ? 1 : 0,
        recoveryVia: frontUrl,
        faultEnd: Date.now(),
        details: {
          first_verdict: first.verdict, first_equals_native: sameAsNative(first, n), flipped: { block: 1, tensor: name, byte: at }, cached_tokens: a.cachedTokens,
          quarantined: q.some((x) => x.endsWith(`${key}.safetensors`)),
        },
        extraCorrect: q.some((x) => x.endsWith(`${key}.safetensors`)),
      }
    },
  },
  enospc: {
    needsTmpfs: true,
    injected: 'the bridged block store\'s tmpfs filled to the last byte, then a cold prompt',
    expected: 'HTTP 200 with the native tokens (the bridge declines, the decoder\'s write-back is best-effort); bridging resumes once space is back',
    run: async () => {
      const filler = join(cacheMount, 'filler')
      const fh = await open(filler, 'w')
      const codes = []
      for (const size of [1 << 20, 65536, 4096, 1]) {
        try { for (;;) await fh.write(Buffer.alloc(size, 1)) } catch (e) { codes.push(e.code ?? String(e)) }
      }
      await fh.close()
      const p = await freshPrompt()
      const a = await ask(frontUrl, p.messages)
      const n = await askNative(p.messages)
      say(`  store full (${codes.join(', ')}): ${short(a)}`)
      await unlink(filler)
      return { ...compared(a, n), recoveryVia: frontUrl, faultEnd: Date.now(), details: { fill_stopped_by: codes, cached_tokens: a.cachedTokens } }
    },
  },
  'read-only': {
    needsTmpfs: true,
    injected: 'the bridged block store\'s tmpfs remounted read-only, then a cold prompt',
    expected: 'HTTP 200 with the native tokens; bridging resumes once the store is writable again',
    run: async () => {
      remount(cacheMount, 'ro')
      let a, n
      try {
        const p = await freshPrompt()
        a = await ask(frontUrl, p.messages)
        n = await askNative(p.messages)
        say(`  store read-only: ${short(a)}`)
      }
      finally {
        remount(cacheMount, 'rw')
      }
      return { ...compared(a, n), recoveryVia: frontUrl, faultEnd: Date.now(), details: { cached_tokens: a.cachedTokens } }
    },
  },
  'prefill-sigkill': {
    injected: 'the prefill engine SIGKILLed once it has queued the bridge\'s prefill job',
    expected: 'HTTP 200 with the native tokens; serve restarts the engine and bridging resumes',
    run: async () => {
      const pid = await pidOf('prefill-engine')
      const from = await logSize('prefill-engine')
      const p = await freshPrompt()
      const pending = ask(frontUrl, p.messages)
      const queued = await waitInLog(join(runDir, 'logs', 'prefill-engine.log'), from, '"event":"queued"', 30_000)
      process.kill(pid, 'SIGKILL')
      const killedAt = Date.now()
      const a = await pending
      const n = await askNative(p.messages)
      say(`  engine pid ${pid} killed${queued ? ' with the job queued' : ' (the job was never seen queued)'}: ${short(a)}`)
      return { ...compared(a, n), recoveryVia: frontUrl, faultEnd: killedAt, details: { killed_pid: pid, job_was_queued: queued } }
    },
  },
  'share-sigstop': {
    injected: 'the share SIGSTOPped once the engine has queued the bridge\'s job (the capture mid-stream), SIGCONT after the answer',
    expected: 'HTTP 200 with the native tokens, within the client\'s limit; bridging resumes after SIGCONT',
    run: async () => {
      const pid = await pidOf('share')
      const from = await logSize('prefill-engine')
      const p = await freshPrompt()
      const pending = ask(frontUrl, p.messages)
      const queued = await waitInLog(join(runDir, 'logs', 'prefill-engine.log'), from, '"event":"queued"', 30_000)
      process.kill(pid, 'SIGSTOP')
      let a
      try {
        a = await pending
      }
      finally {
        process.kill(pid, 'SIGCONT')
      }
      const n = await askNative(p.messages)
      say(`  share pid ${pid} stopped: ${short(a)}`)
      return { ...compared(a, n), recoveryVia: frontUrl, faultEnd: Date.now(), details: { stopped_pid: pid, job_was_queued: queued, client_limit_ms: opts.faultTimeoutMs } }
    },
  },
  'writer-sigkill': {
    injected: 'the front door (the block writer) SIGKILLed while a block file is half written, then the same prompt again after serve restarted it',
    expected: 'no corrupt block indexed (whole blocks or none), the retry HTTP 200 with the native tokens',
    run: async () => {
      const pid = await pidOf('front')
      // A longer prompt: more blocks, more moments to catch one half written.
      const p = await freshPrompt(Math.max(opts.promptTokens, 10 * BLOCK + 100))
      for (const sub of '0123456789abcdef') await mkdir(join(cacheDir, sub), { recursive: true })
      let caught = null
      let stops = 0
      let killed = false
      const signal = (sig) => { try { process.kill(pid, sig) } catch { /* gone */ } }
      const watchers = []
      const done = new Promise((resolve) => {
        const onEvent = (sub) => (_type, file) => {
          if (killed || typeof file !== 'string' || !file.includes('.partial-')) return
          // Freeze the writer, then look: a temp file still there is a block half written.
          signal('SIGSTOP')
          stops++
          readdir(join(cacheDir, sub)).then((names) => {
            if (killed) return
            const partial = names.find((x) => x.includes('.partial-'))
            if (partial !== undefined || stops >= 12) {
              killed = true
              caught = partial ?? null
              signal('SIGKILL')
              signal('SIGCONT')
              resolve()
            }
            else signal('SIGCONT')
          }, () => signal('SIGCONT'))
        }
        for (const sub of '0123456789abcdef') watchers.push(watch(join(cacheDir, sub), onEvent(sub)))
      })
      const pending = ask(frontUrl, p.messages)
      await Promise.race([pending, done])
      const killedAt = Date.now()
      const first = await pending
      for (const w of watchers) w.close()
      if (!killed) say('  the writer was never caught writing a block (no temp file seen)')
      const mid = await storeState()
      // serve restarts the front door on its port; wait for its /health.
      const end = Date.now() + opts.recoveryTimeoutMs
      while (Date.now() < end) {
        const h = await fetch(`${frontUrl}/health`, { signal: AbortSignal.timeout(2000) }).then((r) => r.json(), () => null)
        if (h?.bridge?.ready === true) break
        await sleep(200)
      }
      const retry = await ask(frontUrl, p.messages)
      const retryAt = Date.now()
      const n = await askNative(p.messages)
      say(`  front pid ${pid} ${killed ? `killed ${caught !== null ? `with ${caught} half written` : 'between blocks'}` : 'never killed'}; first: ${short(first)}; retry: ${short(retry)}`)
      const written = await presentKeys(p.keys)
      return {
        verdict: `first: ${first.verdict}; retry: ${retry.verdict}`,
        status: retry.status,
        answer_equals_native: sameAsNative(retry, n),
        answer_ms: retry.ms,
        recoveryVia: frontUrl,
        faultEnd: killedAt,
        // The retry bridging complete with the native tokens is the recovery (the restarted writer at work).
        recoveredAt: retry.verdict === 'complete' && sameAsNative(retry, n) ? retryAt : undefined,
        details: {
          killed_pid: pid, killed: killed, half_written_file_seen: caught !== null, sigstops: stops, blocks_of_prompt: p.keys.length,
          prompt_blocks_after_retry: written, corrupt_right_after_kill: mid.corrupt, temp_files_right_after_kill: mid.temps,
          temp_files_after_retry: (await storeState()).temps, retry_cached_tokens: retry.cachedTokens,
        },
      }
    },
  },
  'manifest-mismatch': {
    injected: 'a front door on the stack\'s engines reading the share through a proxy that adds 1 to the manifest\'s tokenCount',
    expected: 'HTTP 200 with the native tokens, declined as a manifest mismatch, none of the prompt\'s blocks written',
    run: async () => await viaProxy('manifest-token-count'),
  },
  'truncated-layer': {
    injected: 'a front door on the stack\'s engines reading the share through a proxy that cuts layer-001.safetensors to half its bytes',
    expected: 'HTTP 200 with the native tokens, declined (size or checksum), none of the prompt\'s blocks written',
    run: async () => await viaProxy('truncate-layer'),
  },
  'geometry-mismatch': {
    injected: 'a front door on the stack\'s engines whose sidecar was exported for blocks of 512 (the store has 256)',
    expected: 'HTTP 200 with the native tokens, declined as a geometry mismatch before any bridge work',
    run: async () => {
      const url = await startExtraFront('front-geometry', (c) => ({ ...c, sidecar: sidecar512.dir }))
      const p = await freshPrompt()
      const before = await captureCount()
      const a = await ask(url, p.messages)
      const n = await askNative(p.messages)
      say(`  sidecar of blocks of 512: ${short(a)}`)
      const h = await fetch(`${url}/health`).then((r) => r.json(), () => null)
      // The misconfigured front door can never bridge; the stack's own one shows bridging goes on.
      return {
        ...compared(a, n), recoveryVia: frontUrl, faultEnd: Date.now(),
        details: { captures_made: (await captureCount()) - before, prompt_blocks_written: await presentKeys(p.keys), health_status: h?.status ?? null, health_problem: h?.bridge?.problems?.[0] ?? null },
      }
    },
  },
  'concurrent-cold': {
    injected: `${opts.concurrency} fresh cold prompts sent at once through the front door`,
    expected: 'every answer HTTP 200 with its native tokens (bridged, or declined for the queue, never wrong)',
    run: async () => {
      const prompts = []
      for (let i = 0; i < opts.concurrency; i++) prompts.push(await freshPrompt())
      const answers = await Promise.all(prompts.map((p) => ask(frontUrl, p.messages)))
      const natives = []
      for (const p of prompts) natives.push(await askNative(p.messages))
      const equal = answers.map((a, i) => sameAsNative(a, natives[i]))
      const tally = {}
      for (const a of answers) {
        const v = (a.verdict ?? `HTTP ${a.status}`).replace(/\d+/g, 'N').slice(0, 90)
        tally[v] = (tally[v] ?? 0) + 1
      }
      say(`  ${answers.length} at once: ${Object.entries(tally).map(([v, c]) => `${c} × ${v}`).join('; ')}; ${equal.filter(Boolean).length} equal the native tokens`)
      return {
        verdict: Object.entries(tally).map(([v, c]) => `${c}× ${v}`).join('; '),
        status: answers.every((a) => a.status === 200) ? 200 : (answers.find((a) => a.status !== 200)?.status ?? null),
        answer_equals_native: equal.every(Boolean),
        answer_ms: Math.max(...answers.map((a) => a.ms)),
        recoveryVia: frontUrl,
        faultEnd: Date.now(),
        details: {
          answers: answers.map((a, i) => ({ status: a.status, verdict: a.verdict, cached_tokens: a.cachedTokens, equals_native: equal[i], ms: Math.round(a.ms) })),
          unreachable_verdicts: answers.filter((a) => /unreachable/.test(a.verdict ?? '')).length,
        },
      }
    },
  },
}

let proxyFront
async function viaProxy (fault) {
  proxy ??= await startProxy(shareUrl)
  proxyFront ??= await startExtraFront('front-proxy', (c) => ({ ...c, share: { ...c.share, url: proxy.url } }))
  proxy.fault = fault
  proxy.hits = 0
  const p = await freshPrompt()
  let a
  try {
    a = await ask(proxyFront, p.messages)
  }
  finally {
    proxy.fault = 'pass'
  }
  const n = await askNative(p.messages)
  say(`  ${fault} (${proxy.hits} response(s) altered): ${short(a)}`)
  return { ...compared(a, n), recoveryVia: proxyFront, faultEnd: Date.now(), details: { altered_responses: proxy.hits, prompt_blocks_written: await presentKeys(p.keys), cached_tokens: a.cachedTokens } }
}

/** Run one fault: inject, compare, check the store, recover; never throws. */
async function fault (name) {
  const spec = FAULT_SPECS[name]
  const entry = { name, injected: spec.injected, expected: spec.expected, skipped: null, verdict: '', status: null, answer_equals_native: null, corrupt_blocks_indexed: 0, corrupt_blocks_served: 0, recovery_ms: null, answer_ms: null, correct: false, details: {} }
  if (spec.needsTmpfs && !tmpfs) {
    entry.skipped = 'no tmpfs could be mounted for the block store (needs root)'
    say(`${name}: skipped (${entry.skipped})`)
    return entry
  }
  say(`${name}: ${spec.injected}`)
  let r
  try {
    r = await spec.run()
  }
  catch (e) {
    say(`${name}: the protocol failed: ${e.message}`)
    return { ...entry, verdict: `protocol error: ${e.message}`, details: { error: String(e.stack ?? e) } }
  }
  const store = await storeState()
  const rec = await recover(r.recoveryVia, r.faultEnd)
  if (r.recoveredAt !== undefined) rec.recoveryMs = r.recoveredAt - r.faultEnd - nativeTimeWithin(r.faultEnd, r.recoveredAt)
  say(`  store: ${store.blocks} blocks, ${store.corrupt} corrupt, ${store.temps} temp files, ${store.quarantined.length} quarantined; recovery ${rec.recoveryMs === null ? `none within ${opts.recoveryTimeoutMs / 1000} s (${rec.last})` : `${(rec.recoveryMs / 1000).toFixed(2)} s (${rec.attempts} attempt(s))`}`)
  const out = {
    ...entry,
    verdict: r.verdict,
    status: r.status,
    answer_equals_native: r.answer_equals_native,
    corrupt_blocks_indexed: store.corrupt,
    corrupt_blocks_served: r.corruptServed ?? 0,
    recovery_ms: rec.recoveryMs,
    answer_ms: r.answer_ms,
    details: { ...r.details, store_blocks: store.blocks, store_temp_files: store.temps, quarantined_files: store.quarantined.length, recovery_attempts: rec.attempts,
      recovery_answer_equals_native: rec.equal, recovery_last: rec.last },
  }
  out.correct = faultCorrect(out) && (r.extraCorrect ?? true)
  say(`${name}: ${out.correct ? 'correct' : 'NOT CORRECT'}`)
  return out
}

// ---------------------------------------------------------------------------------------------

let sidecar512
let shareUrl
let environment
process.once('SIGINT', () => {
  void (async () => {
    await stopServe()
    await supervisor?.stopAll()
    unmount(cacheMount)
    process.exit(130)
  })()
})

try {
  say(`checkpoint and sidecars in ${base} (made once, reused)`)
  const checkpoint = await ensureCheckpoint(basePaths.model, PRESET, SEED)
  const sidecar = await ensureSidecar(basePaths.sidecar, checkpoint, PROFILE, BLOCK)
  sidecar512 = await ensureSidecar(stackPaths(base, PRESET, SEED, PROFILE, 2 * BLOCK).sidecar, checkpoint, PROFILE, 2 * BLOCK)
  environment = embeddedEnvironment({ preset: PRESET, seed: SEED, blockSize: BLOCK, prefillProfile: PROFILE, sidecarFingerprint: sidecar.fingerprint })
  await mkdir(runDir, { recursive: true })
  await symlink(join(base, 'models'), join(runDir, 'models'))
  await symlink(join(base, 'sidecars'), join(runDir, 'sidecars'))
  await mkdir(cacheMount, { recursive: true })
  tmpfs = mountTmpfs(cacheMount, '64m')
  say(`run state directory ${runDir}; bridged store ${tmpfs ? 'on a 64 MiB tmpfs' : 'on disk (no tmpfs: enospc and read-only will be skipped)'}`)
  serve = await startServe()
  frontUrl = serve.ready.front
  shareUrl = serve.ready.share
  const frontCfg = JSON.parse(await readFile(join(runDir, 'run', 'front.json'), 'utf8'))
  modelName = frontCfg.decoder.modelName
  cacheDir = frontCfg.decoder.cacheDir
  captureRoot = stackPaths(runDir, PRESET, SEED, PROFILE, BLOCK).captures
  tokenizer = await loadTokenizer(checkpoint.dir)
  say(`serve ready: front door ${frontUrl} (pid ${serve.ready.pid})`)
  supervisor = new Supervisor({ logDir: join(runDir, 'logs'), graceMs: 5000 })
  await mkdir(join(runDir, 'native-cache'), { recursive: true })
  nativeUrl = (await supervisor.start({
    name: 'decoder-native',
    args: ['decoder', '--model', checkpoint.dir, '--profile', PROFILE, '--cache-dir', join(runDir, 'native-cache'), '--block-size', String(BLOCK), '--port', '0', '--model-name', modelName],
    env: childEnv(),
    readyTimeoutMs: 120_000,
  })).url
  say(`the decoder alone at ${nativeUrl}, its own empty store`)

  // The baseline: the stack bridges a cold prompt complete with the native tokens, or nothing below means anything.
  const baseline = await recover(frontUrl, Date.now())
  if (baseline.recoveryMs === null || baseline.equal !== true) throw new Error(`the stack does not bridge a cold prompt complete with the native tokens before any fault (${baseline.last})`)
  say(`baseline: a cold prompt bridged complete with the native tokens in ${(baseline.recoveryMs / 1000).toFixed(2)} s`)

  for (const name of FAULTS.filter((f) => opts.only.includes(f))) {
    results.push(await fault(name))
    if (serve.child.exitCode !== null || serve.child.signalCode !== null) {
      say(`serve exited (${serve.child.exitCode ?? serve.child.signalCode}): the remaining faults cannot run\n${serve.stderr().slice(-1500)}`)
      break
    }
  }
}
catch (err) {
  say(`stopped: ${err.message}`)
  process.exitCode = 1
  keep = true
}
finally {
  await stopServe()
  await supervisor?.stopAll()
  await proxy?.close()
  unmount(cacheMount)
}

if (results.length > 0) {
  const record = {
    schema: FAULTS_RECORD_SCHEMA,
    runId,
    startedAt,
    finishedAt: new Date().toISOString(),
    environment,
    settings: { promptTokens: opts.promptTokens, maxTokens: opts.maxTokens, concurrency: opts.concurrency, faultTimeoutMs: opts.faultTimeoutMs, recoveryTimeoutMs: opts.recoveryTimeoutMs, tmpfsStore: tmpfs },
    faults: results,
  }
  await mkdir(opts.runs, { recursive: true })
  const file = join(opts.runs, `${runId}.json`)
  parseFaultsRecord(record, file)
  await writeFile(file, JSON.stringify(record, null, 2) + '\n')
  const line = faultHeadline(record)
  say(`wrote ${file}`)
  process.stdout.write(`${line}\n`)
  for (const f of results) {
    process.stdout.write(`  ${f.correct ? 'ok  ' : f.skipped !== null ? 'skip' : 'FAIL'} ${f.name.padEnd(22)} ${f.skipped ?? `${f.verdict.slice(0, 100)} | native ${f.answer_equals_native} | corrupt ${f.corrupt_blocks_indexed}/${f.corrupt_blocks_served} | recovery ${f.recovery_ms === null ? '—' : `${(f.recovery_ms / 1000).toFixed(2)} s`}`}\n`)
  }
  const wrong = results.filter((f) => f.skipped === null && !f.correct)
  if (wrong.length > 0) {
    process.exitCode = 1
    keep = true
  }
  if (regenerate) {
    try {
      const r = await generateResults(join(opts.out, 'runs'), opts.out, undefined, undefined, opts.runs)
      say(`results: ${r.records} run records, ${r.microRecords} micro-benchmark records, ${r.needleRecords} needle records, ${r.faultsRecords} faults records -> ${r.files.map((f) => join(opts.out, f)).join(', ')}`)
    }
    catch (err) {
      say(`results not regenerated: ${err.message}`)
      process.exitCode = 1
    }
  }
  else if (opts.generate) say('RESULTS.md not regenerated: --runs was given without --out (pass --out DIR to write a report with these records)')
}
if (keep) say(`state kept: ${runDir} (logs in ${join(runDir, 'logs')})`)
else await rm(runDir, { recursive: true, force: true })
