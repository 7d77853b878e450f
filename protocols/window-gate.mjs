#!/usr/bin/env node
// The window gate as one CI step, to run before a context-window change ships (docs/window-gate.md).
//
//   node protocols/window-gate.mjs --launch launch.env --prefill-config prefill/config.json \
//     --sidecar sidecar/ --decoder-config decoder/config.json [--store DIR] [--ledger FILE] ...
//     (--needle-url URL [--needle-native-url URL] [--needle-seed N] [--needle-tokens N] | --needle-record FILE|DIR...)
//     [--suite]
//   node protocols/window-gate.mjs --embedded [--state-dir DIR] [--preset needle] [--suite]
//   node protocols/window-gate.mjs --help
//
// --embedded gates the embedded stack of the state directory: a running `pd-bridge serve`, or one
// the gate starts there and stops after (no prior serve needed); without --needle-record or
// --needle-url the gate runs one needle through the deployment's front door itself, each leg
// bounded by --needle-timeout-s (default 600), and says so on its finding.
//
// Every argument except --suite goes to `pd-bridge gate` as is. Stages:
//   1. `pd-bridge gate`: the four places, stale limits, store geometry, seeds, bridge vs native,
//      and the needle law;
//   2. with --suite: `vitest run suites/consistency` (the gate's own tests: each mutation still fails).
// Prints a short report (one line per stage, every failing finding) and exits 0 only when every
// stage passed. A window change is not done until the hook matches the decoder above the native
// window (a skipped bridge-vs-native check, --no-native, fails the protocol) and a needle was
// retrieved through the bridge above the native window with a fresh seed (the gate fails without
// one). The full gate report stays in the report directory: --report-dir, default a new folder
// under the state directory ($PD_STATE_DIR or ~/.cache/pd-bridge, or --state-dir)/gate-reports/.
// A command-line mistake (an unknown flag, a missing value, a missing required flag) is one line
// and exit 2, with nothing run.
import { spawnSync } from 'node:child_process'
import { readFile, stat } from 'node:fs/promises'
import { homedir } from 'node:os'
import { join, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'
import { $ } from 'zx'
import { helpAndExit, usageError, wantsHelp } from './flags.mjs'

const repo = resolve(fileURLToPath(new URL('..', import.meta.url)))
const bin = join(repo, 'bin', 'pd-bridge.mjs')
const args = process.argv.slice(2)

if (wantsHelp(args)) {
  // The gate's own options, from `pd-bridge gate --help` (commander prints them and exits 0; it
  // starts and writes nothing).
  const gateHelp = spawnSync(process.execPath, [bin, 'gate', '--help'], { encoding: 'utf8' })
  helpAndExit(`Usage: node protocols/window-gate.mjs <pd-bridge gate options> [--suite]   (npx zx runs it as well)

The window gate as one CI step (docs/window-gate.md): runs \`pd-bridge gate\` with the options given,
then with --suite \`vitest run suites/consistency\`; prints one line per stage and every failing
finding, and ends with "window gate: PASS" (exit 0) or "window gate: FAIL" (exit 1). A skipped
bridge-vs-native check (--no-native) and a report without a passing needle finding fail it. A
command-line mistake is one line and exit 2.

  --embedded           gate the embedded stack of the state directory (a running serve, or one
                       started for the gate and stopped after); without needle evidence the gate
                       runs one needle through its front door (self-run, bounded by
                       --needle-timeout-s). The CI step: node protocols/window-gate.mjs --embedded
  --suite              also run the gate's own tests (suites/consistency)
  --report-dir DIR     where the gate's report goes (default: a new folder under
                       <state dir>/gate-reports/, the state dir being --state-dir, $PD_STATE_DIR
                       or ~/.cache/pd-bridge); --no-report is refused: this protocol reads it
  -h, --help           this text (nothing is run or written)

Every other option is pd-bridge gate's:

${gateHelp.status === 0 ? gateHelp.stdout.trimEnd() : '  (see npx pd-bridge gate --help)'}
`, args)
}

const withSuite = args.includes('--suite')
const gateArgs = args.filter((a) => a !== '--suite')
if (gateArgs.includes('--no-report')) usageError('window-gate', '--no-report: this protocol reads the gate\'s report.json; give --report-dir DIR instead (or leave the default)')

/** The value of `--flag V` or `--flag=V` in the gate's arguments. */
function flagValue (flag) {
  for (const [i, a] of gateArgs.entries()) {
    if (a === flag) return gateArgs[i + 1]
    if (a.startsWith(`${flag}=`)) return a.slice(flag.length + 1)
  }
  return undefined
}

// Where the report goes: --report-dir as given, else a new folder in the state directory (as the
// gate itself picks it, verify/cli/gate.ts), passed to the gate so this script can read it.
let reportDir = flagValue('--report-dir')
if (gateArgs.some((a) => a === '--report-dir' || a.startsWith('--report-dir=')) && (reportDir === undefined || reportDir.startsWith('--'))) {
  usageError('window-gate', '--report-dir needs a value')
}
if (reportDir === undefined) {
  const state = flagValue('--state-dir') ?? (process.env.PD_STATE_DIR || join(homedir(), '.cache', 'pd-bridge'))
  reportDir = join(resolve(state), 'gate-reports', `${new Date().toISOString().replace(/[:.]/g, '-')}-window-gate-${process.pid}`)
  gateArgs.push('--report-dir', reportDir)
}
reportDir = resolve(reportDir)

$.verbose = false
const stages = []

async function stage (name, run) {
  const started = Date.now()
  const result = await run()
  stages.push({ name, ...result, seconds: (Date.now() - started) / 1000 })
}

async function exists (file) {
  try {
    await stat(file)
    return true
  }
  catch {
    return false
  }
}

await stage('pd-bridge gate', async () => {
  const p = await $`${process.execPath} ${bin} gate ${gateArgs}`.nothrow().quiet()
  // With --embedded, the gate's own lines about the stack it found or started (and stopped).
  for (const line of p.stderr.split('\n')) if (line.startsWith('window gate: ')) process.stderr.write(`${line}\n`)
  let report
  try {
    report = JSON.parse(await readFile(join(reportDir, 'report.json'), 'utf8'))
  }
  catch {
    // No report.json: the gate did not get as far as writing one. Exit 2 is a command-line mistake
    // (commander's or the gate's own one line): say it and stop, as the gate did.
    if (p.exitCode === 2) usageError('window-gate', p.stderr.trim().split('\n')[0] || 'pd-bridge gate refused its arguments')
  }
  if (report === undefined) {
    return { ok: false, summary: `no report: pd-bridge gate exited ${p.exitCode}`, failing: p.stderr.trim() === '' ? [] : [p.stderr.trim()] }
  }
  const lines = p.stdout.trimEnd().split('\n')
  const verdict = lines[lines.length - 1] ?? ''
  const failing = report.findings.filter((f) => f.status === 'fail').map((f) => [[f.file, f.field].filter(Boolean).join(' '), f.message].filter(Boolean).join(': '))
  const nativeRan = report.findings.some((f) => f.check === 'native' && f.status !== 'skip')
  if (!nativeRan) failing.push('the bridge-vs-native check was skipped (--no-native): a window change needs it')
  const needlePassed = report.findings.some((f) => f.check === 'needle' && f.status === 'pass')
  // A needle the gate ran on its own is named, pass or fail: it is the needle law's evidence here.
  const notes = report.findings.filter((f) => f.check === 'needle' && f.message.includes('; self-run: ')).map((f) => `needle ${f.status}: ${f.file}: ${f.message}`)
  return { ok: p.exitCode === 0 && nativeRan && needlePassed, summary: verdict.startsWith('gate:') ? verdict : `exit ${p.exitCode}`, failing, notes }
})

if (withSuite) {
  await stage('suites/consistency', async () => {
    const p = await $({ cwd: repo })`npx vitest run suites/consistency`.nothrow().quiet()
    const tail = p.stdout.split('\n').filter((l) => /Tests|Test Files|FAIL/.test(l)).map((l) => l.trim())
    return { ok: p.exitCode === 0, summary: tail.find((l) => l.startsWith('Tests')) ?? `exit ${p.exitCode}`, failing: p.exitCode === 0 ? [] : tail.filter((l) => l.startsWith('FAIL')) }
  })
}

const ok = stages.every((s) => s.ok)
console.log('window gate')
for (const s of stages) {
  console.log(`  ${s.ok ? 'PASS' : 'FAIL'}  ${s.name} (${s.seconds.toFixed(1)} s): ${s.summary}`)
  for (const f of s.failing) console.log(`        ${f.length > 300 ? f.slice(0, 297) + '...' : f}`)
  for (const n of s.notes ?? []) if (!s.failing.some((f) => n.endsWith(f))) console.log(`        ${n}`)
}
const reportMd = join(reportDir, 'report.md')
console.log(await exists(reportMd) ? `  full report: ${reportMd}` : `  no report written (${reportDir})`)
console.log(ok ? 'window gate: PASS' : 'window gate: FAIL')
process.exitCode = ok ? 0 : 1
