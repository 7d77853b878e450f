#!/usr/bin/env node
// The longer fuzz run (issue #17, item 8): the fixed-seed suites/fuzz properties with another seed
// and more cases, as vitest runs them in CI (same parsers, same judge: every input parsed or refused
// with the project's own error class). One JSON record under results/fuzz/ with the seed, the
// scale, every property's tally and whether it passed.
//
//   node protocols/fuzz.mjs [--seed N] [--scale K] [--runs DIR]
import { execa } from 'execa'
import { randomBytes } from 'node:crypto'
import { mkdir, writeFile } from 'node:fs/promises'
import { join, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'
import { argv } from 'zx'
import { checkArgv, helpAndExit, usageError } from './flags.mjs'

const REPO = resolve(fileURLToPath(new URL('..', import.meta.url)))
const USAGE = `Usage: node protocols/fuzz.mjs [options]

The fuzz suites (suites/fuzz) with another seed and K times the cases; one record in --runs.

  --seed N     fast-check's seed (default: random; the suites' own is 1)
  --scale K    cases per property times K (default 20)
  --runs DIR   where the record goes (default results/fuzz in this checkout)
  -h, --help   this text (nothing is run or written)
`
helpAndExit(USAGE)
checkArgv('fuzz', argv, { seed: 'string', scale: 'string', runs: 'string' })
const int = (name, text, min) => {
  if (!/^\d+$/.test(String(text)) || Number(text) < min) usageError('fuzz', `--${name} must be an integer >= ${min}, got ${JSON.stringify(String(text))}`)
  return Number(text)
}
const seed = argv.seed === undefined ? randomBytes(4).readUInt32LE(0) >>> 1 : int('seed', argv.seed, 0)
const scale = int('scale', argv.scale ?? 20, 1)
const runsDir = argv.runs === undefined ? join(REPO, 'results', 'fuzz') : resolve(String(argv.runs))

const startedAt = new Date().toISOString()
const t0 = performance.now()
process.stderr.write(`[fuzz] suites/fuzz with seed ${seed}, ${scale}x the cases\n`)
const r = await execa(process.execPath, [join(REPO, 'node_modules', 'vitest', 'vitest.mjs'), 'run', 'suites/fuzz', '--testTimeout', '0'], {
  cwd: REPO, reject: false, all: true, env: { PD_FUZZ_SEED: String(seed), PD_FUZZ_SCALE: String(scale), PD_PROGRESS: 'off' },
})
// Colour codes off the output (vitest may still colour a piped stream), so each tally line matches whole.
const output = r.all.replace(/\x1b\[[0-9;]*m/g, '')
const tallies = [...output.matchAll(/^\[fuzz\] (.+): (\d+) cases, (\d+) parsed, (\d+) refused with the project's error class$/gm)]
  .map((m) => ({ property: m[1], cases: Number(m[2]), parsed: Number(m[3]), refused: Number(m[4]) }))
const failures = [...output.matchAll(/^.*(?:threw \w+ \(not \w+\)|Counterexample|Property failed).*$/gm)].map((m) => m[0].trim()).slice(0, 20)
const record = {
  schema: 'pd-bridge/fuzz-run@1', startedAt, seed, scale, passed: r.exitCode === 0,
  cases: tallies.reduce((s, t) => s + t.cases, 0), seconds: (performance.now() - t0) / 1000, tallies, failures,
}
await mkdir(runsDir, { recursive: true })
const file = join(runsDir, `${startedAt.replace(/[:.]/g, '-')}-seed${seed}-x${scale}.json`)
await writeFile(file, JSON.stringify(record, null, 2) + '\n')
for (const t of tallies) process.stderr.write(`[fuzz] ${t.property}: ${t.cases} cases, ${t.parsed} parsed, ${t.refused} refused\n`)
process.stderr.write(`[fuzz] ${record.passed ? 'passed' : 'FAILED'}: ${record.cases} cases in ${record.seconds.toFixed(0)} s; wrote ${file}\n`)
if (!record.passed) process.stderr.write(output.split('\n').slice(-60).join('\n') + '\n')
process.exit(record.passed ? 0 : 1)
