#!/usr/bin/env node
// Re-runs the commands behind committed cold-prompt records at two commits and compares every
// number that does not depend on the clock (issue #19: a restructuring must leave every number the
// same). For each chosen record under results/runs/ it runs, in a worktree of each commit,
//   node protocols/cold-bench.mjs --seed S --sizes T --repeats 1 --max-tokens B --preset P --block-size N
// (the record's own seed, size, budget and preset; S is chosen so that the invocation's first run has
// the record's seed),
// then compares the two new records' token counts, finish reasons, answer digests, verdicts, routes,
// bridged tokens, capture/fetched bytes and answersAgree, and the decoder's block store after each run
// (every block file and its content digest). Times and block file sizes are reported, never compared.
//
//   node protocols/rerun-records.mjs --base REV [--head REV] [--env ID] [--sizes N,N] [--max N] [--out FILE]
//
// Exit status 0 when every compared number is equal, 1 when one differs, 2 on a usage error.
import { execFileSync, spawnSync } from 'node:child_process'
import { createHash } from 'node:crypto'
import { mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync, writeFileSync, mkdirSync, existsSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { dirname, join, relative, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'
import { parseArgs } from 'node:util'

const REPO = resolve(fileURLToPath(new URL('..', import.meta.url)))
const USAGE = `Usage: node protocols/rerun-records.mjs --base REV [options]

Re-runs committed cold-prompt records (results/runs/) at two commits of this repository and compares
the numbers that do not depend on the clock (docs/BENCHMARK-PROTOCOL.md, "Same numbers").

  --base REV     the commit before the change (required)
  --head REV     the commit after it (default HEAD)
  --env ID       only records of this environment id (default: every embedded-stack record without a GPU)
  --sizes N,N    only records of these target sizes
  --max N        at most N records, the first by file name after the filters (default 3)
  --out FILE     write the comparison as JSON here (default: print only)
  --keep         keep the worktrees and state under the work folder (printed)
  -h, --help     this text
`

function usage (message) {
  process.stderr.write(`rerun-records: ${message}\n\n${USAGE}`)
  process.exit(2)
}

let args
try {
  args = parseArgs({
    options: {
      base: { type: 'string' }, head: { type: 'string', default: 'HEAD' }, env: { type: 'string' }, sizes: { type: 'string' },
      max: { type: 'string', default: '3' }, out: { type: 'string' }, keep: { type: 'boolean', default: false }, help: { type: 'boolean', short: 'h', default: false },
    },
    strict: true,
  }).values
}
catch (err) {
  usage(err.message)
}
if (args.help) { process.stdout.write(USAGE); process.exit(0) }
if (args.base === undefined) usage('--base is required')
if (!/^\d+$/.test(args.max) || Number(args.max) < 1) usage(`--max must be a positive integer, got ${JSON.stringify(args.max)}`)
const sizes = args.sizes === undefined ? undefined : args.sizes.split(',').map((s) => { if (!/^\d+$/.test(s.trim())) usage(`--sizes must be integers, got ${JSON.stringify(args.sizes)}`); return Number(s) })

const git = (...a) => execFileSync('git', ['-C', REPO, ...a], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] }).trim()
function commitOf (rev) {
  try { return git('rev-parse', '--verify', `${rev}^{commit}`) }
  catch { usage(`${rev} is not a commit of ${REPO}`) }
}
const revs = { base: commitOf(args.base), head: commitOf(args.head) }
// The worktrees borrow this checkout's node_modules and built addon: the addon's sources and the
// installed packages (package-lock.json's entries but the root package's own) must be this checkout's.
const installed = (text) => JSON.stringify(Object.entries(JSON.parse(text).packages ?? {}).filter(([path]) => path !== ''))
const lockHere = installed(readFileSync(join(REPO, 'package-lock.json'), 'utf8'))
for (const [name, sha] of Object.entries(revs)) {
  const changed = git('diff', '--name-only', sha, '--', 'native/src', 'native/binding.gyp')
  if (changed !== '') usage(`${name} ${sha.slice(0, 12)} differs from this checkout in ${changed.split('\n').join(', ')}: the borrowed addon would not be its own`)
  if (installed(git('show', `${sha}:package-lock.json`)) !== lockHere) usage(`${name} ${sha.slice(0, 12)} installs other packages than this checkout (package-lock.json): the borrowed node_modules would not be its own`)
}

/** The embedded stack a record's model label names: `embedded tiny (seed 1, blocks of 256)`. */
function stackOf (record) {
  const m = /^embedded (\S+) \(seed (\d+), blocks of (\d+)\)$/.exec(record.environment.model)
  return m === null || record.environment.gpu !== undefined ? undefined : { preset: m[1], seed: Number(m[2]), blockSize: Number(m[3]) }
}

const runsDir = join(REPO, 'results', 'runs')
const chosen = readdirSync(runsDir).filter((f) => f.endsWith('.json')).sort()
  .map((file) => ({ file, record: JSON.parse(readFileSync(join(runsDir, file), 'utf8')) }))
  .filter(({ record }) => stackOf(record) !== undefined && stackOf(record).seed === 1)
  .filter(({ record }) => args.env === undefined || record.environment.id === args.env)
  .filter(({ record }) => sizes === undefined || sizes.includes(record.targetTokens))
  .slice(0, Number(args.max))
if (chosen.length === 0) usage('no committed record matches (embedded stack, checkpoint seed 1, no GPU, and the filters given)')

const work = mkdtempSync(join(tmpdir(), 'pd-bridge-rerun-'))
const say = (line) => process.stderr.write(`[rerun ${new Date().toISOString().slice(11, 19)}] ${line}\n`)
say(`base ${revs.base.slice(0, 12)}, head ${revs.head.slice(0, 12)}; ${chosen.length} record(s); work folder ${work}`)

function worktree (name, sha) {
  const dir = join(work, name)
  git('worktree', 'add', '--detach', '--quiet', dir, sha)
  symlinkSync(join(REPO, 'node_modules'), join(dir, 'node_modules'))
  rmSync(join(dir, 'native', 'build'), { recursive: true, force: true })
  symlinkSync(join(REPO, 'native', 'build'), join(dir, 'native', 'build'))
  return dir
}

/** Run one record's command in `dir`; the new record. */
function rerun (dir, name, i, record) {
  const stack = stackOf(record)
  const runs = join(work, `runs-${name}-${i}`)
  mkdirSync(runs, { recursive: true })
  const argv = ['protocols/cold-bench.mjs', '--seed', String(invocationSeedFor(record.seed)), '--sizes', String(record.targetTokens), '--repeats', '1',
    '--max-tokens', String(record.answerBudget), '--preset', stack.preset, '--block-size', String(stack.blockSize),
    '--state-dir', join(work, `state-${name}`), '--runs', runs, '--no-generate']
  say(`${name}: node ${argv.join(' ')}`)
  const r = spawnSync(process.execPath, argv, { cwd: dir, stdio: ['ignore', 'inherit', 'inherit'], env: { ...process.env, PD_PROGRESS: 'off' } })
  if (r.status !== 0) throw new Error(`${name}: cold-bench exited with ${r.status ?? r.signal} for ${record.runId}`)
  const files = readdirSync(runs).filter((f) => f.endsWith('.json'))
  if (files.length !== 1) throw new Error(`${name}: expected one record in ${runs}, found ${files.length}`)
  const fresh = JSON.parse(readFileSync(join(runs, files[0]), 'utf8'))
  if (fresh.seed !== record.seed) throw new Error(`${name}: the re-run of ${record.runId} used seed ${fresh.seed}, not the record's ${record.seed}`)
  return { record: fresh, store: storeDigest(join(work, `state-${name}`, 'cache')) }
}

/**
 * The decoder's block store after a run, clock-free: every block file's path under the store and its
 * content digest (metadata content_sha256, which covers every tensor byte and every metadata key but
 * created_at). The files' byte sizes are not clock-free: created_at is a decimal timestamp whose
 * length varies, and the safetensors header is padded to 8 bytes around it.
 */
function storeDigest (root) {
  const lines = []
  const walk = (dir) => {
    for (const e of readdirSync(dir, { withFileTypes: true })) {
      const p = join(dir, e.name)
      if (e.isDirectory()) walk(p)
      else if (e.name.endsWith('.safetensors')) lines.push(`${relative(root, p)} ${contentDigestOf(p)}`)
    }
  }
  if (existsSync(root)) walk(root)
  lines.sort()
  return { blocks: lines.length, sha256: createHash('sha256').update(lines.join('\n')).digest('hex') }
}

/** A block file's metadata content_sha256 (null when it has none). */
function contentDigestOf (file) {
  const bytes = readFileSync(file)
  const header = JSON.parse(bytes.subarray(8, 8 + Number(bytes.readBigUInt64LE(0))).toString('utf8'))
  return header.__metadata__?.content_sha256 ?? null
}

/** cold-bench's run i (from 0) uses seed invocation + (i + 1) * 0x9e3779b1 (mod 2^32): the invocation seed whose first run is `seed`. */
function invocationSeedFor (seed) {
  return (seed - 0x9e3779b1 + 2 ** 32) % 2 ** 32
}

/** The numbers of a record that do not depend on the clock (block file sizes do: see storeDigest). */
function clockFree (r) {
  const leg = (l) => l === null ? null : { promptTokens: l.promptTokens, completionTokens: l.completionTokens, finishReason: l.finishReason, answerSha256: l.answerSha256 ?? null }
  return {
    native: leg(r.native),
    bridged: r.bridged === null ? null : {
      ...leg(r.bridged), verdict: r.bridged.verdict, route: r.bridged.route, bridgedTokens: r.bridged.bridgedTokens,
      captureBytes: r.bridged.bytes.capture, fetchedBytes: r.bridged.bytes.fetched,
    },
    answersAgree: r.answersAgree,
  }
}

/** Paths (a.b.c) where two clock-free objects differ. */
function differences (a, b, at = '') {
  if (typeof a !== 'object' || a === null || typeof b !== 'object' || b === null) return a === b ? [] : [`${at.slice(1)}: ${JSON.stringify(a)} vs ${JSON.stringify(b)}`]
  return [...new Set([...Object.keys(a), ...Object.keys(b)])].flatMap((k) => differences(a[k], b[k], `${at}.${k}`))
}

const rows = []
let failed = false
try {
  const dirs = { base: worktree('base', revs.base), head: worktree('head', revs.head) }
  chosen.forEach(({ file, record }, i) => {
    const ran = { base: rerun(dirs.base, 'base', i, record), head: rerun(dirs.head, 'head', i, record) }
    const fresh = { base: ran.base.record, head: ran.head.record }
    for (const r of Object.values(fresh)) if (r.native?.answerSha256 === undefined) throw new Error(`${file}: a re-run record has no answerSha256 (cold-bench at that commit predates it); choose a later --base`)
    const numbers = (k) => ({ ...clockFree(fresh[k]), store: ran[k].store })
    const diff = differences(numbers('base'), numbers('head'))
    if (diff.length > 0) failed = true
    rows.push({
      record: file, seed: record.seed, targetTokens: record.targetTokens,
      base: numbers('base'), head: numbers('head'), differences: diff,
      blockFileBytes: { base: fresh.base.bridged?.bytes.blocks, head: fresh.head.bridged?.bytes.blocks },
      seconds: { base: { native: fresh.base.native?.totalMs / 1000, bridged: fresh.base.bridged?.totalMs / 1000 }, head: { native: fresh.head.native?.totalMs / 1000, bridged: fresh.head.bridged?.totalMs / 1000 } },
      committed: clockFree(record),
    })
    say(`${file}: ${diff.length === 0 ? 'same numbers' : `DIFFERENT: ${diff.join('; ')}`}`)
  })
}
finally {
  if (!args.keep) {
    for (const name of ['base', 'head']) if (existsSync(join(work, name))) git('worktree', 'remove', '--force', join(work, name))
    rmSync(work, { recursive: true, force: true })
  }
}

const report = {
  schema: 'pd-bridge/rerun@1', date: new Date().toISOString(), base: revs.base, head: revs.head,
  compared: 'token counts, finish reasons, answer SHA-256, verdict, route, bridged tokens, capture and fetched bytes, answersAgree, and the decoder store after each run (every block file and its content_sha256); times and block file sizes (created_at is a timestamp of varying length) are reported, not compared',
  records: rows.length, same: rows.filter((r) => r.differences.length === 0).length, rows,
}
for (const r of rows) {
  process.stdout.write(`${r.record}  ${r.targetTokens} tokens  ${r.differences.length === 0 ? 'same' : 'DIFFERENT'}  verdict ${r.head.bridged?.verdict}  bridged ${r.head.bridged?.bridgedTokens}  store ${r.head.store.blocks} blocks ${r.head.store.sha256.slice(0, 12)}  answer ${r.head.native?.answerSha256?.slice(0, 12)}\n`)
}
process.stdout.write(`${report.same}/${report.records} records: same numbers at ${revs.base.slice(0, 12)} and ${revs.head.slice(0, 12)}\n`)
if (args.out !== undefined) {
  mkdirSync(dirname(resolve(args.out)), { recursive: true })
  writeFileSync(resolve(args.out), JSON.stringify(report, null, 2) + '\n')
}
process.exitCode = failed ? 1 : 0
