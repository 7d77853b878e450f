#!/usr/bin/env node
// The window gate as one CI step, to run before a context-window change ships (docs/window-gate.md).
//
//   node protocols/window-gate.mjs --launch launch.env --prefill-config prefill/config.json \
//     --sidecar sidecar/ --decoder-config decoder/config.json [--store DIR] [--ledger FILE] ...
//     (--needle-url URL [--needle-native-url URL] [--needle-seed N] [--needle-tokens N] | --needle-record FILE|DIR...)
//     [--suite]
//
// Every argument except --suite goes to `pd-bridge gate` as is. Stages:
//   1. `pd-bridge gate`: the four places, stale limits, store geometry, seeds, bridge vs native,
//      and the needle law;
//   2. with --suite: `vitest run suites/consistency` (the gate's own tests: each mutation still fails).
// Prints a short report (one line per stage, every failing finding) and exits 0 only when every
// stage passed. A window change is not done until the hook matches the decoder above the native
// window (a skipped bridge-vs-native check, --no-native, fails the protocol) and a needle was
// retrieved through the bridge above the native window with a fresh seed (the gate fails without
// one). The full gate report stays in the report directory (default window-gate-report/).
import { readFile } from 'node:fs/promises'
import { join, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'
import { $ } from 'zx'

const repo = resolve(fileURLToPath(new URL('..', import.meta.url)))
const bin = join(repo, 'src', 'cli', 'pd-bridge.mjs')

const args = process.argv.slice(2)
const withSuite = args.includes('--suite')
const gateArgs = args.filter((a) => a !== '--suite')
const at = gateArgs.indexOf('--report-dir')
const reportDir = resolve(at >= 0 ? gateArgs[at + 1] : 'window-gate-report')
if (at < 0) gateArgs.push('--report-dir', reportDir)

$.verbose = false
const stages = []

async function stage (name, run) {
  const started = Date.now()
  const result = await run()
  stages.push({ name, ...result, seconds: (Date.now() - started) / 1000 })
}

await stage('pd-bridge gate', async () => {
  const p = await $`${process.execPath} ${bin} gate ${gateArgs}`.nothrow().quiet()
  const lines = p.stdout.trimEnd().split('\n')
  const verdict = lines[lines.length - 1] ?? ''
  let failing = []
  let nativeRan = false
  let needlePassed = false
  try {
    const report = JSON.parse(await readFile(join(reportDir, 'report.json'), 'utf8'))
    failing = report.findings.filter((f) => f.status === 'fail').map((f) => [[f.file, f.field].filter(Boolean).join(' '), f.message].filter(Boolean).join(': '))
    nativeRan = report.findings.some((f) => f.check === 'native' && f.status !== 'skip')
    if (!nativeRan) failing.push('the bridge-vs-native check was skipped (--no-native): a window change needs it')
    needlePassed = report.findings.some((f) => f.check === 'needle' && f.status === 'pass')
  }
  catch {
    // No report.json: the gate did not get as far as writing one (bad arguments); stderr says why.
    failing = p.stderr.trim() === '' ? [] : [p.stderr.trim()]
  }
  return { ok: p.exitCode === 0 && nativeRan && needlePassed, summary: verdict.startsWith('gate:') ? verdict : `exit ${p.exitCode}`, failing }
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
}
console.log(`  full report: ${join(reportDir, 'report.md')}`)
console.log(ok ? 'window gate: PASS' : 'window gate: FAIL')
process.exitCode = ok ? 0 : 1
