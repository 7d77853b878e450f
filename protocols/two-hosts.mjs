#!/usr/bin/env node
// The two-host protocol (docs/two-hosts.md): the prefill side and the decode side on two hosts,
// made here as two network namespaces joined by one veth link shaped with tc. It runs the two-host
// quick start in them (harness/two-hosts), then for each link profile bridges fresh cold prompts of
// several sizes across the link and records what crossed it and how long that took against
// bytes / link rate, next to the decoder alone's answer; and on the fault profile, with a bridge in
// flight, cuts the link for less and for more than the stall deadline, adds loss and delay (where
// the kernel has netem), kills the prefill host's processes and partitions the hosts, each time
// checking the answer against the decoder alone's, the block store for anything half-written, and
// timing the next `complete` bridge. One record per link profile under results/two-host/, then
// RESULTS.md is regenerated. Everything is torn down whatever happens (also on Ctrl-C).
//
//   npx zx protocols/two-hosts.mjs [--profiles 10gbe,1gbe] [--sizes 1024,4096] [--faults all|none|NAME,NAME]
//   npx zx protocols/two-hosts.mjs --help
import { randomBytes } from 'node:crypto'
import { loadavg, tmpdir } from 'node:os'
import { mkdir, readdir, rm, stat, writeFile } from 'node:fs/promises'
import { join, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'
import { argv } from 'zx'
import { register } from 'tsx/esm/api'
import { checkArgv, helpAndExit, integerFlag, usageError } from './flags.mjs'

const REPO = resolve(fileURLToPath(new URL('..', import.meta.url)))
const DEFAULT_RUNS = join(REPO, 'results', 'two-host')
const DEFAULT_OUT = join(REPO, 'results')
const SEED = 1
const FAULTS = ['cut-short', 'cut-long', 'loss-1', 'loss-10', 'delay-50', 'prefill-host-killed', 'partition-heals']

const USAGE = `Usage: npx zx protocols/two-hosts.mjs [options]   (node runs it as well; needs root)

The two-host protocol (docs/two-hosts.md): two network namespaces joined by a veth pair shaped with
tc, the prefill side (prefill-engine, share) in one and the decode side (decoder, front) in the
other, a decoder alone beside them. For each link profile: fresh cold prompts bridged across the
link (bytes per token, transfer time against bytes / link rate, the stage table); on the fault
profile, the link faults with a bridge in flight. One record per profile in --runs, then RESULTS.md.

Faults (in this order): ${FAULTS.join(', ')}.
loss-* and delay-50 use netem when the kernel has it. Without netem, loss-* drop packets with
nftables (numgen random drop on each host's input from the link; skipped, with why, where nft
fails) and delay-50 restarts the front door through userspace relays on the decode host that hold
every chunk 50 ms in each direction (not per packet).

  --profiles LIST        link profiles, in order (default 10gbe,1gbe; known: 10gbe, 1gbe)
  --sizes LIST           cold prompt sizes in tokens (default 1024,4096)
  --faults WHICH         all (default), none, or NAME,NAME
  --fault-profile NAME   the profile the faults run on (default: the first of --profiles)
  --fault-tokens N       size of the prompt a fault hits in flight (default 3072)
  --recovery-tokens N    size of the prompts that time the recovery (default 768)
  --stall-s N            the front door's stall deadline (deadlines.stallMs; default 10)
  --max-tokens N         the answer budget, greedy (default 16)
  --preset NAME          checkpoint preset (default tiny)
  --block-size N         decoder blocks (default 256)
  --home DIR             the run's files (both hosts' checkpoints, store, logs; default a fresh temporary folder)
  --keep-state           keep --home afterwards (default: removed when the run passed)
  --runs DIR             where the records go (default results/two-host in this checkout)
  --out DIR              where RESULTS.md and report.html go (default results/ in this checkout,
                         regenerated only when --runs is the default; with another --runs, give --out)
  --no-generate          do not regenerate the report
  -h, --help             this text (nothing is started or written)

Exit 0 only when every cold prompt bridged complete with the decoder alone's answer and every
injected fault was answered correctly with nothing half-written; 2 on a usage mistake or where
network namespaces cannot be made (the message says why).
`
helpAndExit(USAGE)
checkArgv('two-hosts', argv, {
  profiles: 'string', sizes: 'string', faults: 'string', 'fault-profile': 'string', 'fault-tokens': 'string', 'recovery-tokens': 'string',
  'stall-s': 'string', 'max-tokens': 'string', preset: 'string', 'block-size': 'string', home: 'string', 'keep-state': 'boolean',
  runs: 'string', out: 'string', generate: 'negatable',
})

function fail (message) {
  usageError('two-hosts', message)
}

const int = (flag, text, min) => integerFlag('two-hosts', flag, text, min)

const list = (text) => String(text).split(',').map((s) => s.trim()).filter((s) => s !== '')
const blockSize = int('block-size', argv['block-size'] ?? 256, 128)
const opts = {
  profiles: list(argv.profiles ?? '10gbe,1gbe'),
  sizes: list(argv.sizes ?? '1024,4096').map((s) => int('sizes', s, 2 * blockSize)),
  faults: argv.faults === undefined || argv.faults === 'all' ? FAULTS : argv.faults === 'none' ? [] : list(argv.faults),
  faultTokens: int('fault-tokens', argv['fault-tokens'] ?? 3072, 2 * blockSize),
  recoveryTokens: int('recovery-tokens', argv['recovery-tokens'] ?? 768, 2 * blockSize),
  stallMs: int('stall-s', argv['stall-s'] ?? 10, 2) * 1000,
  maxTokens: int('max-tokens', argv['max-tokens'] ?? 16, 1),
  preset: String(argv.preset ?? 'tiny'),
  blockSize,
  home: argv.home === undefined ? undefined : resolve(String(argv.home)),
  keepState: argv['keep-state'] === true,
  runs: argv.runs === undefined ? DEFAULT_RUNS : resolve(String(argv.runs)),
  out: argv.out === undefined ? DEFAULT_OUT : resolve(String(argv.out)),
  generate: argv.generate !== false,
}
const faultProfile = String(argv['fault-profile'] ?? opts.profiles[0])
const unknownFaults = opts.faults.filter((f) => !FAULTS.includes(f))
if (unknownFaults.length > 0) fail(`--faults ${unknownFaults.join(',')}: no such fault (${FAULTS.join(', ')})`)
const regenerate = opts.generate && (argv.out !== undefined || opts.runs === DEFAULT_RUNS)

register()
const { LINK_PROFILES, leftovers, lossTablesHere, makeTwoHosts, namespacesUnavailable } = await import('../harness/two-hosts/netns.ts')
const { startDeployment } = await import('../harness/two-hosts/deployment.ts')
const { probeLink } = await import('../harness/two-hosts/probe.ts')
const { chatBody, runLeg, sameAnswer } = await import('../src/stack/demo/legs.ts')
const { buildDemoPrompt } = await import('../src/stack/demo/prompt.ts')
const { stageItems } = await import('../src/stack/demo/table.ts')
const { loadTokenizer } = await import('../src/model/tokenizer/index.ts')
const { isPresetName } = await import('../src/model/checkpoint/index.ts')
const { blockKeyChain, blockPath, listBlockDir, verifyBlockDir } = await import('../src/decode/store/index.ts')
const { describeEnvironment, gitCommit, shortSha } = await import('../verify/results/environment.ts')
const { faultCorrect } = await import('../verify/results/fault-record.ts')
const { TWO_HOST_RECORD_SCHEMA, parseTwoHostRecord } = await import('../verify/results/two-host-record.ts')
const { generateResults } = await import('../verify/results/generate.ts')

for (const p of [...opts.profiles, faultProfile]) if (LINK_PROFILES[p] === undefined) fail(`--profiles ${p}: no such link profile (${Object.keys(LINK_PROFILES).join(', ')})`)
if (!opts.profiles.includes(faultProfile) && opts.faults.length > 0) fail(`--fault-profile ${faultProfile} is not one of --profiles`)
if (!isPresetName(opts.preset)) fail(`--preset ${opts.preset}: no such preset`)
const unavailable = namespacesUnavailable()
if (unavailable !== null) {
  process.stderr.write(`two-hosts: cannot make two hosts here: ${unavailable}\n`)
  process.exit(2)
}

function say (line) {
  process.stderr.write(`[two-hosts ${new Date().toISOString().slice(11, 19)}] ${line}\n`)
}
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))
const seedOf = () => randomBytes(4).readUInt32LE(0)

// ---------------------------------------------------------------------------------------------
// The two hosts, the deployment, and the teardown whatever happens.

const hosts = makeTwoHosts()
const home = opts.home ?? join(tmpdir(), `pd-bridge-two-hosts-${hosts.tag}`)
let deployment
let tornDown = false
async function teardown () {
  if (tornDown) return
  tornDown = true
  await deployment?.stop()
  hosts.destroy()
  const left = leftovers(hosts.tag)
  const tables = lossTablesHere()
  say(`teardown: ${left.namespaces.length} namespaces and ${left.links.length} interfaces of ${hosts.tag} left; the loss rules died with the namespaces (${tables === null ? 'no nft here to check this namespace' : `${tables.length} loss tables in this machine's own namespace`})`)
}
for (const signal of ['SIGINT', 'SIGTERM']) {
  process.once(signal, () => {
    say(`${signal}: tearing down`)
    void teardown().finally(() => process.exit(130))
  })
}

const apiKey = randomBytes(24).toString('base64url')
// This process's own requests (runLeg) read the key from its environment, as a client would.
process.env.PD_API_KEY = apiKey
let tokenizer
let failures = 0

/** One request through `url`; never throws: a failure is a status and an error text. */
async function ask (name, url, messages, timeoutMs = 600_000) {
  try {
    return { ...(await runLeg(name, url, chatBody(deployment.modelName, messages, opts.maxTokens), timeoutMs)), error: null }
  }
  catch (e) {
    return { ms: 0, text: '', tokenIds: undefined, finishReason: '', promptTokens: 0, completionTokens: 0, cachedTokens: 0, verdict: undefined, bridge: undefined, error: e.message }
  }
}

/** A fresh prompt none of whose blocks is in the decode host's store. */
async function freshPrompt (tokens) {
  for (;;) {
    const p = buildDemoPrompt(tokenizer, tokens, seedOf())
    const keys = blockKeyChain(deployment.modelName, p.tokens, opts.blockSize)
    const present = await Promise.all(keys.map((k) => stat(blockPath(deployment.decodeHost.cacheDir, k)).then(() => true, () => false)))
    if (!present.some(Boolean)) return p
  }
}

/** What sits in the decode host's store and spool: blocks that fail their digest, temporary files, spool entries. */
async function storeState () {
  const v = await verifyBlockDir(deployment.decodeHost.cacheDir).catch(() => ({ blocks: [], corrupt: 0, unverified: 0, unreadable: 0 }))
  const temps = (await listBlockDir(deployment.decodeHost.cacheDir).catch(() => [])).filter((e) => e.kind === 'temp').length
  const spool = (await readdir(deployment.decodeHost.spool).catch(() => [])).length
  return { blocks: v.blocks.length, corrupt: v.corrupt + v.unverified + v.unreadable, temps, spool }
}

/** Resolves once the prefill host has started a capture it did not have before (the bridge is in flight). */
async function captureStarted (before, limitMs = 120_000) {
  const end = Date.now() + limitMs
  while (Date.now() < end) {
    const now = (await readdir(deployment.prefillHost.captures).catch(() => [])).length
    if (now > before) return true
    await sleep(100)
  }
  return false
}

const captureCount = async () => (await readdir(deployment.prefillHost.captures).catch(() => [])).length

/** Fresh cold prompts until one bridges complete with the decoder alone's answer (asked after it, outside the time); ms from `since`. */
async function recover (since, limitMs = 180_000) {
  let attempts = 0
  let last = 'no attempt'
  while (Date.now() - since < limitMs) {
    attempts++
    const p = await freshPrompt(opts.recoveryTokens)
    const a = await ask('recovery', deployment.frontUrl, p.messages)
    last = a.error ?? a.verdict ?? 'no verdict'
    if (a.error === null && a.verdict === 'complete') {
      const at = Date.now()
      const n = await ask('alone', deployment.aloneUrl, p.messages)
      return { recoveryMs: at - since, attempts, equal: n.error === null && sameAnswer(a, n), last }
    }
    await sleep(500)
  }
  return { recoveryMs: null, attempts, equal: null, last }
}

// ---------------------------------------------------------------------------------------------
// Cold prompts across the link.

async function coldRun (profile, target) {
  const p = await freshPrompt(target)
  const before = hosts.counters().prefillSentBytes
  const b = await ask('bridged', deployment.frontUrl, p.messages)
  const wireBytes = hosts.counters().prefillSentBytes - before
  const n = await ask('alone', deployment.aloneUrl, p.messages)
  if (b.error !== null || n.error !== null) throw new Error(`cold prompt of ${target} tokens: ${b.error ?? n.error}`)
  const bytes = b.bridge?.bytes ?? {}
  const stages = Object.fromEntries(Object.entries(b.bridge?.timings_ms ?? {}).filter(([, v]) => typeof v === 'number'))
  const fetched = bytes.fetched ?? 0
  const run = {
    targetTokens: target, promptTokens: b.promptTokens, seed: p.seed, verdict: b.verdict ?? 'no verdict', bridgedTokens: b.bridge?.bridged_tokens ?? 0,
    answersAgree: sameAnswer(b, n), bridgedMs: b.ms, nativeMs: n.ms,
    captureBytes: bytes.capture ?? 0, fetchedBytes: fetched, blockBytes: bytes.blocks ?? 0, wireBytes,
    transferMs: stages.transfer ?? 0, idealTransferMs: (fetched * 8) / profile.rateBitsPerSecond * 1000, stagesMs: stages,
  }
  say(`  ${target} tokens: ${run.verdict}, answers ${run.answersAgree ? 'equal' : 'DIFFER'}, fetched ${fetched} B (${(fetched / Math.max(1, run.bridgedTokens)).toFixed(0)} B/token; blocks ${(run.blockBytes / Math.max(1, run.bridgedTokens)).toFixed(0)} B/token), on the wire ${wireBytes} B, transfer ${run.transferMs.toFixed(0)} ms vs ${run.idealTransferMs.toFixed(1)} ms at the link rate`)
  say(`    stages: ${stageItems(b.bridge?.timings_ms).join(', ')}`)
  if (run.verdict !== 'complete' || !run.answersAgree) failures++
  return run
}

// ---------------------------------------------------------------------------------------------
// Link faults, each with a bridge in flight.

/**
 * A fault that hits a bridge in flight: send, wait for its capture to start on the prefill host,
 * then `inject(pending)`, which resolves with the time the link (or host) was whole again.
 */
async function inFlight (inject) {
  const p = await freshPrompt(opts.faultTokens)
  const before = await captureCount()
  const pending = ask('faulted', deployment.frontUrl, p.messages)
  if (!(await captureStarted(before))) say('  the capture never started on the prefill host; injecting anyway')
  const healedAt = await inject(pending)
  return { p, a: await pending, healedAt }
}

async function shaped (profile, inject) {
  hosts.shape(profile)
  try {
    return await inject()
  }
  finally {
    hosts.shape(LINK_PROFILES[faultProfile])
  }
}

const FAULT_SPECS = {
  'cut-short': {
    injected: () => `the link pulled down (ip link set down, both ends) for ${opts.stallMs * 0.4 / 1000} s, less than the ${opts.stallMs / 1000} s stall deadline, with a bridge in flight`,
    expected: 'the decoder alone\'s answer (bridged complete if the stream rides out the cut, else declined and served natively); nothing half-written',
    run: async () => await inFlight(async () => {
      hosts.linkDown()
      await sleep(opts.stallMs * 0.4)
      hosts.linkUp()
      return Date.now()
    }),
  },
  'cut-long': {
    injected: () => `the link pulled down for ${opts.stallMs * 1.5 / 1000} s, more than the ${opts.stallMs / 1000} s stall deadline, with a bridge in flight`,
    expected: 'declined (stalled or unreachable) and served natively with the decoder alone\'s answer; nothing half-written; bridging resumes once the link is up',
    // The link comes back on its own schedule, whatever the request does meanwhile.
    run: async () => await inFlight(async () => {
      hosts.linkDown()
      await sleep(opts.stallMs * 1.5)
      hosts.linkUp()
      return Date.now()
    }),
  },
  'loss-1': lossFault(1),
  'loss-10': lossFault(10),
  'delay-50': {
    injected: () => '50 ms of delay added to each direction with a bridge in flight',
    expected: 'the decoder alone\'s answer, bridged complete (slower polls and transfer, no stall)',
    netem: { delayMs: 50, lossPercent: 0 },
  },
  'prefill-host-killed': {
    injected: () => 'the prefill host\'s processes (prefill-engine and share) SIGKILLed with a bridge in flight, then started again',
    expected: 'declined (unreachable) and served natively with the decoder alone\'s answer; nothing half-written; bridging resumes once the prefill host is back',
    run: async () => await inFlight(async (pending) => {
      await deployment.killPrefillHost()
      // The machine comes back once the faulted request has its answer (an operator, or systemd).
      await pending
      const at = Date.now()
      await deployment.startPrefillHost()
      return at
    }),
  },
  'partition-heals': {
    injected: () => `the hosts partitioned (link down) before a cold prompt arrives and for ${opts.stallMs * 1.5 / 1000} s, then healed`,
    expected: 'declined (prefill engine unreachable at pre-flight) and served natively with the decoder alone\'s answer; bridging resumes once the partition heals',
    run: async () => {
      hosts.linkDown()
      const downAt = Date.now()
      const p = await freshPrompt(opts.faultTokens)
      const a = await ask('partitioned', deployment.frontUrl, p.messages)
      await sleep(Math.max(0, downAt + opts.stallMs * 1.5 - Date.now()))
      hosts.linkUp()
      return { p, a, healedAt: Date.now() }
    },
  },
}

function lossFault (percent) {
  return {
    injected: () => `${percent}% random loss added to each direction with a bridge in flight`,
    expected: 'the decoder alone\'s answer: bridged complete (TCP retransmits) or declined and served natively; nothing half-written',
    netem: { delayMs: 0, lossPercent: percent },
  }
}

async function fault (name, profile) {
  const spec = FAULT_SPECS[name]
  let injected = typeof spec.injected === 'function' ? spec.injected() : spec.injected
  const base = { name, injected, expected: spec.expected, skipped: null, verdict: '', status: null, answer_equals_native: null, corrupt_blocks_indexed: 0, corrupt_blocks_served: 0, recovery_ms: null, answer_ms: null, correct: false, details: {} }
  let r
  let mechanism = null
  let dropped = null
  if (spec.netem !== undefined) {
    const shape = hosts.shape({ ...profile, name: `${profile.name}+${name}`, ...spec.netem })
    if (shape.netem) {
      // The kernel's netem, per packet on each end's egress.
      mechanism = 'netem'
      injected = `${injected} (netem, per packet: ${shape.qdiscs.join('; ')})`
      r = await shaped(profile, async () => await inFlight(async (pending) => { await pending; return Date.now() }))
    }
    else if (spec.netem.lossPercent > 0) {
      // No netem: nftables drops the share of packets each end receives from the link.
      hosts.shape(profile)
      const loss = hosts.setLoss(spec.netem.lossPercent)
      if (!loss.applied) {
        say(`${name}: skipped: ${shape.netemMissing}; ${loss.missing}`)
        return { ...base, skipped: `${shape.netemMissing}; and nftables could not add the loss: ${loss.missing}`, verdict: 'not injected' }
      }
      mechanism = 'nftables numgen random drop'
      injected = `${injected} (nftables numgen random drop on each host's input from the link, not netem (${shape.netemMissing}): ${loss.rules.join('; ')})`
      say(`${name}: ${loss.rules.join('; ')}`)
      try {
        r = await inFlight(async (pending) => {
          await pending
          dropped = hosts.lossDropped()
          hosts.clearLoss()
          return Date.now()
        })
      }
      finally {
        hosts.clearLoss()
      }
    }
    else {
      // No netem: the front door reaches the prefill host through userspace relays that hold
      // every chunk the delay in each direction (harness/two-hosts/delay-relay.mjs).
      hosts.shape(profile)
      const delayMs = spec.netem.delayMs
      const urls = await deployment.restartFront(delayMs)
      mechanism = 'delay added by a userspace relay (per chunk, each direction), not per packet by netem'
      injected = `${injected} (${mechanism}; ${shape.netemMissing}): the front door restarted with the prefill engine at ${urls.prefillEngine} and the share at ${urls.share}, relays on the decode host's loopback to ${deployment.linkUrls.prefillEngine} and ${deployment.linkUrls.share} holding each chunk ${delayMs} ms`
      say(`${name}: front door restarted through the delay relays (${urls.prefillEngine}, ${urls.share})`)
      try {
        // Healed once the front door talks straight across the link again.
        r = await inFlight(async (pending) => { await pending; await deployment.restartFront(0); return Date.now() })
      }
      catch (e) {
        await deployment.restartFront(0).catch(() => {})
        throw e
      }
    }
  }
  else {
    r = await spec.run()
  }
  const n = await ask('alone', deployment.aloneUrl, r.p.messages)
  const store = await storeState()
  const rec = await recover(r.healedAt)
  const equal = r.a.error === null && n.error === null && sameAnswer(r.a, n)
  const halfWritten = store.temps + store.spool
  const result = {
    ...base, injected,
    verdict: r.a.error !== null ? `no answer: ${r.a.error}` : r.a.verdict ?? 'no verdict',
    status: r.a.error === null ? 200 : null,
    answer_equals_native: equal,
    corrupt_blocks_indexed: store.corrupt,
    corrupt_blocks_served: 0,
    recovery_ms: rec.recoveryMs,
    answer_ms: r.a.ms,
    details: { ...(mechanism === null ? {} : { mechanism }), ...(dropped === null ? {} : { dropped_packets: dropped }),
      ...(spec.netem === undefined ? {} : { stages_ms: Object.fromEntries(Object.entries(r.a.bridge?.timings_ms ?? {}).filter(([, v]) => typeof v === 'number')) }),
      store_blocks: store.blocks, half_written: halfWritten, store_temp_files: store.temps, spool_entries: store.spool, cached_tokens: r.a.cachedTokens,
      recovery_attempts: rec.attempts, recovery_answer_equal: rec.equal, recovery_last: rec.last },
  }
  result.correct = faultCorrect(result) && halfWritten === 0 && rec.recoveryMs !== null && rec.equal === true
  if (dropped !== null) say(`${name}: the loss rules dropped ${dropped.prefill} packets on the prefill host and ${dropped.decode} on the decode host`)
  say(`${name}: ${result.verdict}; answer ${equal ? 'equals' : 'DIFFERS from'} the decoder alone's; store ${store.blocks} blocks, ${store.corrupt} corrupt, ${halfWritten} half-written; next complete after ${rec.recoveryMs === null ? 'never' : `${(rec.recoveryMs / 1000).toFixed(1)} s`}`)
  if (!result.correct) failures++
  return result
}

// ---------------------------------------------------------------------------------------------
// The run.

const records = []
try {
  await mkdir(home, { recursive: true })
  hosts.shape(LINK_PROFILES[opts.profiles[0]])
  say(`hosts ${hosts.prefillNs} and ${hosts.decodeNs}, starting the two-host quick start in ${home}`)
  deployment = await startDeployment({
    hosts, home, preset: opts.preset, seed: SEED, blockSize: opts.blockSize, apiKey, stallMs: opts.stallMs, engineStallMs: 120_000, minTokens: 2 * opts.blockSize,
    onEvent: (e) => { if (e.kind === 'ready') say(`  ${e.name} ready at ${e.url} (${(e.ms / 1000).toFixed(1)} s)`) },
  })
  tokenizer = await loadTokenizer(deployment.decodeHost.model)
  const environment = describeEnvironment({
    configFingerprint: `two-host-${shortSha(JSON.stringify({ preset: opts.preset, seed: SEED, blockSize: opts.blockSize, model: deployment.modelName }))}`,
    model: `two hosts (network namespaces, one veth link): ${opts.preset} (seed ${SEED}, blocks of ${opts.blockSize})`,
    commit: gitCommit(REPO),
  })
  say('warm-up: one cold prompt bridged and on the decoder alone (not recorded)')
  const warm = await freshPrompt(1024)
  await ask('warm-up', deployment.frontUrl, warm.messages)
  await ask('warm-up', deployment.aloneUrl, warm.messages)
  for (const name of opts.profiles) {
    const profile = LINK_PROFILES[name]
    const startedAt = new Date().toISOString()
    const shape = hosts.shape(profile)
    say(`link ${name}: ${shape.qdiscs.join('; ')}${shape.netem ? '' : ` (${shape.netemMissing})`}`)
    const probe = await probeLink(hosts, Math.min(512 * 1024 ** 2, Math.round(profile.rateBitsPerSecond / 8)))
    say(`  probe: ${(probe.bytes / 1e6).toFixed(0)} MB in ${(probe.ms / 1000).toFixed(2)} s, ${(probe.bitsPerSecond / 1e9).toFixed(2)} Gbit/s of ${(profile.rateBitsPerSecond / 1e9).toFixed(0)}`)
    const loadAverage = loadavg().map((x) => Math.round(x * 100) / 100)
    const runs = []
    for (const size of opts.sizes) runs.push(await coldRun(profile, size))
    const faults = []
    if (name === faultProfile) for (const f of opts.faults) faults.push(await fault(f, profile))
    const record = {
      schema: TWO_HOST_RECORD_SCHEMA,
      runId: `${startedAt.replace(/[:.]/g, '-')}-two-host-${name}-${process.pid}`,
      startedAt, finishedAt: new Date().toISOString(), environment,
      link: { across: 'network namespaces', profile: name, rateBitsPerSecond: profile.rateBitsPerSecond, delayMs: profile.delayMs, lossPercent: profile.lossPercent,
        netem: shape.netem, netemMissing: shape.netemMissing, qdiscs: shape.qdiscs, probe },
      settings: { preset: opts.preset, blockSize: opts.blockSize, maxTokens: opts.maxTokens, stallMs: opts.stallMs, faultPromptTokens: opts.faultTokens, loadAverage },
      runs, faults,
    }
    parseTwoHostRecord(record, 'the new record')
    records.push(record)
    await mkdir(opts.runs, { recursive: true })
    const file = join(opts.runs, `${record.runId}.json`)
    await writeFile(file, JSON.stringify(record, null, 2) + '\n')
    say(`record ${file}`)
  }
}
catch (e) {
  failures++
  say(`stopped: ${e.stack ?? e.message}`)
}
finally {
  await teardown()
}
if (regenerate && records.length > 0) {
  const r = await generateResults(join(opts.out, 'runs'), opts.out, undefined, undefined, undefined, undefined, undefined, opts.runs)
  say(`RESULTS.md regenerated (${r.environments} environments)`)
}
if (failures === 0 && !opts.keepState) await rm(home, { recursive: true, force: true })
else say(`the run's files are kept in ${home}`)
process.exit(failures === 0 ? 0 : 1)
