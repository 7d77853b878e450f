// The protocol scripts' command lines as child processes (as suites/results and suites/consistency
// run them): --help prints the usage and exits 0 with nothing started and nothing written (the
// checkout's results/ unchanged, file by file with its mtime; no state directory made); an unknown
// flag is one line and exit 2; a size that cannot fit the embedded window is refused before the
// stack starts; a --runs elsewhere without --out leaves results/ alone; `pd-bridge gate` writes
// its report under the state directory, never into the current folder.
import { mkdtemp, readdir, rm, stat } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join, relative } from 'node:path'
import { execa } from 'execa'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { HANG_LIMIT_MS } from '../support/hang-limit.ts'

const ROOT = join(import.meta.dirname, '..', '..')
const RESULTS = join(ROOT, 'results')

let dir: string
beforeAll(async () => { dir = await mkdtemp(join(tmpdir(), 'pd-protocol-cli-')) })
afterAll(async () => { await rm(dir, { recursive: true, force: true }) })

/** Every file and folder under `root`, with its size and mtime: what a side effect would change. */
async function listing (root: string): Promise<string[]> {
  const out: string[] = []
  const walk = async (d: string): Promise<void> => {
    for (const e of (await readdir(d, { withFileTypes: true })).sort((a, b) => a.name.localeCompare(b.name))) {
      const p = join(d, e.name)
      const s = await stat(p)
      out.push(`${relative(root, p)}${e.isDirectory() ? '/' : ''} ${e.isDirectory() ? '' : s.size} ${s.mtimeMs}`)
      if (e.isDirectory()) await walk(p)
    }
  }
  await walk(root)
  return out
}

async function exists (p: string): Promise<boolean> {
  return await stat(p).then(() => true, () => false)
}

/** Run `args` with node from `cwd` (the checkout by default), with a state directory that must stay unmade. */
async function node (args: string[], opts: { cwd?: string, state?: string } = {}) {
  const state = opts.state ?? join(dir, `state-${Math.random().toString(36).slice(2)}`)
  const r = await execa(process.execPath, args, { cwd: opts.cwd ?? ROOT, reject: false, timeout: HANG_LIMIT_MS, env: { PD_STATE_DIR: state, PD_PROGRESS: undefined } })
  return { code: r.exitCode, stdout: r.stdout, stderr: r.stderr, state }
}

const protocol = (name: string) => join(ROOT, 'protocols', name)

describe('--help: usage on stdout, exit 0, nothing started or written', () => {
  // window-gate's help also lists the gate's own options (from `pd-bridge gate --help`), checked
  // on the same runs: each window-gate start costs a pd-bridge start.
  const gateOptions = ['Every other option is pd-bridge gate\'s:', '--needle-record <file|dir...>']
  for (const [script, first, alsoContains] of [
    ['cold-bench.mjs', 'Usage: npx zx protocols/cold-bench.mjs [options]', []],
    ['needle.mjs', 'Usage: npx zx protocols/needle.mjs [options]', []],
    ['load.mjs', 'Usage: npx zx protocols/load.mjs [options]', []],
    ['window-gate.mjs', 'Usage: node protocols/window-gate.mjs <pd-bridge gate options> [--suite]', gateOptions],
    ['fuzz.mjs', 'Usage: node protocols/fuzz.mjs [options]', []],
    ['sampling.mjs', 'Usage: node protocols/sampling.mjs [options]', []],
  ] as const) {
    it(`protocols/${script} --help (and -h)`, async () => {
      const cwd = await mkdtemp(join(dir, 'cwd-'))
      const before = await listing(RESULTS)
      for (const flag of ['--help', '-h']) {
        // Among other flags that would start a run: help wins.
        const r = await node([protocol(script), '--repeats', '1', flag], { cwd })
        expect(r.code, r.stderr).toBe(0)
        expect(r.stderr).toBe('')
        expect(r.stdout.split('\n')[0].startsWith(first)).toBe(true)
        expect(r.stdout).toContain('-h, --help')
        for (const text of alsoContains) expect(r.stdout).toContain(text)
        // Nothing ran: no stage lines, no verdict.
        expect(r.stdout).not.toMatch(/^ {2}(PASS|FAIL) {2}|^window gate: /m)
        expect(await exists(r.state)).toBe(false)
      }
      expect(await listing(RESULTS)).toEqual(before)
      expect(await readdir(cwd)).toEqual([])
    })
  }

  it('the tsx benchmarks: --help exits 0, an unknown flag is one line and exit 2', async () => {
    const before = await listing(RESULTS)
    for (const bench of ['bench-kernels.ts', 'bench-capture.ts', 'bench-engine.ts', 'bench-writer.ts']) {
      const help = await node(['--import', 'tsx', protocol(bench), '--help'])
      expect(help.code, `${bench}: ${help.stderr}`).toBe(0)
      expect(help.stdout.split('\n')[0]).toBe(`Usage: npx tsx protocols/${bench}${bench === 'bench-writer.ts' ? '' : ' [options]'}`)
      const bad = await node(['--import', 'tsx', protocol(bench), '--frob'])
      expect(bad.code, bench).toBe(2)
      expect(bad.stderr).toMatch(new RegExp(`^${bench.replace('.ts', '')}: .*--frob.*\\(see --help\\)\\n?$`))
    }
    expect(await listing(RESULTS)).toEqual(before)
  })
})

describe('command-line mistakes: one line, exit 2, nothing started', () => {
  it('unknown flags, a missing value, a stray argument', async () => {
    const cases: Array<[string[], string]> = [
      [[protocol('cold-bench.mjs'), '--size', '600'], 'cold-bench: unknown option --size (see --help)'],
      [[protocol('cold-bench.mjs'), '--runs'], 'cold-bench: --runs needs a value'],
      [[protocol('cold-bench.mjs'), '600'], 'cold-bench: unexpected argument "600" (every option is a --flag; see --help)'],
      [[protocol('needle.mjs'), '--lenghts', '512', '--frob'], 'needle: unknown options --lenghts, --frob (see --help)'],
      [[protocol('needle.mjs'), '--no-ledger'], 'needle: --no-ledger is not an option (see --help)'],
      [[protocol('fuzz.mjs'), '--scale', '0'], 'fuzz: --scale must be an integer >= 1, got "0"'],
      [[protocol('load.mjs'), '--client', '4'], 'load: unknown option --client (see --help)'],
      [[protocol('load.mjs'), '--duration-s'], 'load: --duration-s needs a value'],
      [[protocol('load.mjs'), '--decoders', 'vllm'], 'load: --decoders: unknown decoder kind "vllm" (expected ours or llama.cpp)'],
      [[protocol('load.mjs'), '--levels', '1,2,1'], 'load: --levels names a value twice: "1,2,1"'],
      [[protocol('load.mjs'), '--clients', '2', '--levels', '4'], 'load: --levels is a flag of the concurrency levels; --clients selects the timed mix (see --help)'],
      [[protocol('cold-bench.mjs'), '--torch-device', 'cpu'], 'cold-bench: --torch-device needs --prefill-engine torch'],
      [[protocol('cold-bench.mjs'), '--prefill-engine', 'vllm'], 'cold-bench: --prefill-engine vllm: expected embedded or torch'],
      [[protocol('cold-bench.mjs'), '--prefill-engine', 'torch', '--torch-dtype', 'fp16'], 'cold-bench: --torch-dtype fp16: expected bf16 or f32'],
      [[protocol('needle.mjs'), '--prefill-engine', 'torch', '--url', 'http://127.0.0.1:9'], "needle: --prefill-engine is the embedded stack's; a deployment (--url) has its own"],
      [[protocol('needle.mjs'), '--prefill-engine', 'torch', '--torch-device', 'tpu'], 'needle: --torch-device tpu: expected cpu, cuda or cuda:N'],
      [[protocol('window-gate.mjs'), '--launch', 'a', '--prefill-config', 'b', '--frob'], 'window-gate: pd-bridge gate: unknown option \'--frob\'; see pd-bridge gate --help'],
      [[protocol('window-gate.mjs'), '--launch', 'a', '--prefill-config', 'b', '--no-report'], 'window-gate: --no-report: this protocol reads the gate\'s report.json; give --report-dir DIR instead (or leave the default)'],
      [[protocol('sampling.mjs'), '--prompts', '0'], 'sampling: --prompts must be an integer >= 1, got 0'],
      // The kinds the embedded stack starts (the registry's kinds without an external part).
      [[protocol('sampling.mjs'), '--engines', 'vllm'], 'sampling: --engines vllm: expected ours or llama.cpp'],
    ]
    for (const [args, line] of cases) {
      const r = await node(args)
      expect(r.code, r.stderr).toBe(2)
      expect(r.stderr).toBe(line)
      expect(r.stdout).toBe('')
      expect(await exists(r.state)).toBe(false)
    }
  })
})

describe('rerun-records: its refusals, before any worktree or run', () => {
  it('--help, no --base, an unknown commit, a bad --max, no matching record: exit 2 with the reason', async () => {
    const help = await node([protocol('rerun-records.mjs'), '--help'])
    expect(help.code).toBe(0)
    expect(help.stdout.split('\n')[0]).toBe('Usage: node protocols/rerun-records.mjs --base REV [options]')
    const cases: Array<[string[], string]> = [
      [[], '--base is required'],
      [['--base', 'no-such-rev'], 'no-such-rev is not a commit of'],
      [['--base', 'HEAD', '--max', '0'], '--max must be a positive integer, got "0"'],
      [['--base', 'HEAD', '--sizes', 'x'], '--sizes must be integers'],
      [['--base', 'HEAD', '--sizes', '999'], 'no committed record matches'],
      [['--base', 'HEAD', '--bogus'], "Unknown option '--bogus'"],
    ]
    for (const [args, reason] of cases) {
      const r = await node([protocol('rerun-records.mjs'), ...args])
      expect(r.code, r.stderr).toBe(2)
      expect(r.stderr.split('\n')[0]).toContain(reason)
      expect(r.stderr.split('\n')[0].startsWith('rerun-records: ')).toBe(true)
    }
  })
})

describe('sizes that cannot fit the served window are refused up front', () => {
  it('cold-bench --sizes 4096,16384,32768 (the old header example): refused before the stack starts, with the numbers', async () => {
    const before = await listing(RESULTS)
    const r = await node([protocol('cold-bench.mjs'), '--sizes', '4096,16384,32768', '--repeats', '1'])
    expect(r.code).toBe(2)
    expect(r.stderr).toBe('cold-bench: --sizes 32768: the embedded tiny stack serves a window of 32,768 tokens (max_position_embeddings), and a 32,768-token prompt (up to 64 tokens more as built) plus the answer budget of 300 (--max-tokens) does not fit; the largest size that fits is 32,404')
    expect(await exists(r.state)).toBe(false)
    expect(await listing(RESULTS)).toEqual(before)
    // The answer budget counts: 32,000 fits with 300, not with 800.
    const budget = await node([protocol('cold-bench.mjs'), '--sizes', '32000', '--max-tokens', '800'])
    expect(budget.code).toBe(2)
    expect(budget.stderr).toMatch(/^cold-bench: --sizes 32000: .* the answer budget of 800 \(--max-tokens\) does not fit; the largest size that fits is 31,904$/)
  })

  it('needle --lengths past the window: refused before the stack starts', async () => {
    const r = await node([protocol('needle.mjs'), '--lengths', '512,32768'])
    expect(r.code).toBe(2)
    expect(r.stderr).toBe('needle: --lengths 32768: the embedded needle stack serves a window of 32,768 tokens (max_position_embeddings), and a 32,768-token document plus the answer budget of 300 (--max-tokens) does not fit; the longest length that fits is 32,468')
    expect(await exists(r.state)).toBe(false)
  })
})

describe('a --runs elsewhere leaves the checkout\'s results/ alone', () => {
  // A deployment that does not answer: the run stops at the warm-up, then the report step runs.
  it('cold-bench: without --out nothing is regenerated; with --out the report goes there', async () => {
    const before = await listing(RESULTS)
    const trial = await node([protocol('cold-bench.mjs'), '--url', 'http://127.0.0.1:9', '--runs', join(dir, 'trial-runs'), '--sizes', '600', '--repeats', '1'])
    expect(trial.code).toBe(1)
    expect(trial.stderr).toContain('stopped: warm-up bridged leg: http://127.0.0.1:9 did not answer')
    expect(trial.stderr).toContain('RESULTS.md not regenerated: --runs was given without --out')
    expect(trial.stderr).not.toMatch(/results: \d+ run records/)
    expect(await listing(RESULTS)).toEqual(before)

    const out = join(dir, 'cold-out')
    const asked = await node([protocol('cold-bench.mjs'), '--url', 'http://127.0.0.1:9', '--runs', join(dir, 'trial-runs'), '--out', out, '--sizes', '600', '--repeats', '1'])
    expect(asked.code).toBe(1)
    expect(asked.stderr).toContain(`results: 0 run records, 0 micro-benchmark records, 0 environments -> ${join(out, 'RESULTS.md')}`)
    expect((await readdir(out)).sort()).toEqual(['RESULTS.md', 'report.html'])
    expect(await listing(RESULTS)).toEqual(before)
  })
})

describe('pd-bridge gate writes its report under the state directory', () => {
  it('not into the current folder; the report names where it went; --report-dir still chooses', async () => {
    const cwd = await mkdtemp(join(dir, 'gate-cwd-'))
    const state = join(dir, 'gate-state')
    const bin = join(ROOT, 'bin', 'pd-bridge.mjs')
    // Places that cannot be read are findings, not a crash: the gate fails and still writes its report.
    const r = await node([bin, 'gate', '--launch', 'missing.env', '--prefill-config', 'missing.json', '--no-native'], { cwd, state })
    expect(r.code).toBe(1)
    expect(await readdir(cwd)).toEqual([])
    const [folder, ...more] = await readdir(join(state, 'gate-reports'))
    expect(more).toEqual([])
    expect(folder).toMatch(/^\d{4}-\d\d-\d\dT\d\d-\d\d-\d\d-\d{3}Z-\d+$/)
    const reportDir = join(state, 'gate-reports', folder)
    expect((await readdir(reportDir)).sort()).toEqual(['report.json', 'report.md'])
    const lines = r.stdout.trimEnd().split('\n')
    expect(lines.at(-2)).toBe(`report: ${join(reportDir, 'report.md')} (with report.json and the plots beside it)`)
    expect(lines.at(-1)).toMatch(/^gate: FAIL /)

    const chosen = await node([bin, 'gate', '--launch', 'missing.env', '--prefill-config', 'missing.json', '--no-native', '--report-dir', 'here'], { cwd, state })
    expect(chosen.code).toBe(1)
    expect(await readdir(cwd)).toEqual(['here'])
    expect(await readdir(join(state, 'gate-reports'))).toEqual([folder])
  })

  it('window-gate: the same default, and the report it names exists', async () => {
    const cwd = await mkdtemp(join(dir, 'wg-cwd-'))
    const state = join(dir, 'wg-state')
    const r = await node([protocol('window-gate.mjs'), '--launch', 'missing.env', '--prefill-config', 'missing.json', '--no-native'], { cwd, state })
    expect(r.code).toBe(1)
    expect(await readdir(cwd)).toEqual([])
    const [folder] = await readdir(join(state, 'gate-reports'))
    expect(r.stdout).toContain(`  full report: ${join(state, 'gate-reports', folder, 'report.md')}\n`)
    expect(await exists(join(state, 'gate-reports', folder, 'report.md'))).toBe(true)
    expect(r.stdout.trimEnd().split('\n').at(-1)).toBe('window gate: FAIL')
  })
})
