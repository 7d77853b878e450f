// The faults section of RESULTS.md and report.html, from synthetic fault protocol records (no stack
// runs here: protocols/faults.mjs is the real run). The headline counts only injected faults, the
// schema holds the counting rule, several runs get a runs table, and without fault records the
// report has no faults section at all. The protocol's --help starts and writes nothing.
import { mkdtemp, mkdir, readdir, readFile, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { execa } from 'execa'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { FAULTS_RECORD_SCHEMA, faultCorrect, parseFaultsRecord, type FaultResult, type FaultsRecord } from '../../verify/results/fault-record.ts'
import { faultHeadline, faultTable, summarizeFaults } from '../../verify/results/faults-section.ts'
import { generateResults } from '../../verify/results/generate.ts'

const ROOT = join(import.meta.dirname, '..', '..')
const ENV = { id: 'env-fa17', cpu: 'Test CPU', cores: 2, memoryBytes: 8 * 2 ** 30, node: 'v20.19.0', os: 'linux 6.0 x64', commit: 'abc1234', configFingerprint: 'cfg', model: 'embedded tiny (seed 1, blocks of 256)' }

function fault (name: string, over: Partial<FaultResult> = {}): FaultResult {
  const f: FaultResult = {
    name, injected: `${name} injected`, expected: 'the native answer', skipped: null, verdict: 'declined: block write failed: ENOSPC', status: 200,
    answer_equals_native: true, corrupt_blocks_indexed: 0, corrupt_blocks_served: 0, recovery_ms: 2500, answer_ms: 1200, correct: true, details: {}, ...over,
  }
  return { ...f, correct: over.correct ?? faultCorrect(f) }
}

function record (runId: string, startedAt: string, faults: FaultResult[]): FaultsRecord {
  return {
    schema: FAULTS_RECORD_SCHEMA, runId, startedAt, finishedAt: startedAt, environment: ENV,
    settings: { promptTokens: 700, maxTokens: 16, concurrency: 8, faultTimeoutMs: 120_000, recoveryTimeoutMs: 60_000, tmpfsStore: true },
    faults,
  }
}

const older = record('run-a', '2026-01-01T00:00:00.000Z', [fault('bit-flip', { verdict: 'declined: warm prompt', corrupt_blocks_served: 0 }), fault('enospc')])
const newer = record('run-b', '2026-01-02T00:00:00.000Z', [
  fault('bit-flip', { verdict: 'declined: warm prompt' }),
  fault('share-sigstop', { verdict: 'no answer: timeout', status: null, answer_equals_native: false, recovery_ms: null, answer_ms: null }),
  fault('read-only', { skipped: 'no tmpfs could be mounted for the block store (needs root)', verdict: '', status: null, answer_equals_native: null, recovery_ms: null, answer_ms: null }),
])

let dir: string
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'pd-faults-section-'))
})
afterAll(async () => {
  await rm(dir, { recursive: true, force: true })
})

describe('the counting rule', () => {
  it('a fault is correct only with the native answer and nothing corrupt indexed or served; the schema refuses a record that says otherwise', () => {
    expect(faultCorrect(fault('x'))).toBe(true)
    expect(faultCorrect(fault('x', { answer_equals_native: false }))).toBe(false)
    expect(faultCorrect(fault('x', { corrupt_blocks_indexed: 1 }))).toBe(false)
    expect(faultCorrect(fault('x', { corrupt_blocks_served: 1 }))).toBe(false)
    expect(() => parseFaultsRecord(record('r', '2026-01-01T00:00:00.000Z', [{ ...fault('x', { corrupt_blocks_served: 1 }), correct: true }]), 'r.json')).toThrow(/r\.json: faults record field faults\.0\.correct: is true, but/)
    expect(() => parseFaultsRecord({ ...newer, schema: 'pd-bridge/faults-run@0' }, 'old.json')).toThrow(/old\.json: faults record field schema/)
    expect(parseFaultsRecord(JSON.parse(JSON.stringify(newer)), 'b.json')).toEqual(newer)
  })
})

describe('the headline and the table', () => {
  it('counts injected faults only, names the ones not correct and the skipped ones', () => {
    expect(faultHeadline(older)).toBe('faults: 2/2 answered correctly, 0 corrupt blocks served')
    expect(faultHeadline(newer)).toBe('faults: 1/2 answered correctly, 0 corrupt blocks served; 1 skipped (read-only); not correct: share-sigstop')
    const served = record('c', '2026-01-03T00:00:00.000Z', [fault('bit-flip', { corrupt_blocks_served: 1, corrupt_blocks_indexed: 2 })])
    expect(faultHeadline(served)).toBe('faults: 0/1 answered correctly, 1 corrupt block served; 2 corrupt blocks left in the store; not correct: bit-flip')
  })

  it('shows the newest run, one row per fault, skipped ones as skipped', () => {
    const t = faultTable(summarizeFaults([newer, older])!)
    expect(t.rows).toEqual([
      ['bit-flip', 'declined: warm prompt', '200', 'yes', '0', '0', '2.50 s', 'yes'],
      ['share-sigstop', 'no answer: timeout', 'none', 'no', '0', '0', '—', 'no'],
      ['read-only', 'skipped: no tmpfs could be mounted for the block store (needs root)', '—', '—', '—', '—', '—', '—'],
    ])
  })
})

describe('RESULTS.md and report.html', () => {
  it('an environment with fault records gets a faults section with the headline, its table and, with several runs, the runs table', async () => {
    const faults = join(dir, 'faults')
    await mkdir(faults)
    await writeFile(join(faults, 'a.json'), JSON.stringify(older))
    await writeFile(join(faults, 'b.json'), JSON.stringify(newer))
    const out = join(dir, 'out')
    const r = await generateResults(join(dir, 'runs'), out, join(dir, 'micro'), join(dir, 'needle'), faults)
    expect(r.faultsRecords).toBe(2)
    const md = await readFile(join(out, 'RESULTS.md'), 'utf8')
    expect(md.match(/^## Environment .*/gm)).toEqual(['## Environment env-fa17'])
    expect(md).toContain('### Faults\n\nfaults: 1/2 answered correctly, 0 corrupt blocks served; 1 skipped (read-only); not correct: share-sigstop.\n')
    expect(md).toContain('Newest run run-b (commit abc1234, 2026-01-02T00:00:00.000Z); 1 earlier run listed below.')
    expect(md).toContain('| bit-flip | declined: warm prompt | 200 | yes | 0 | 0 | 2.50 s | yes |')
    expect(md).toContain('#### Fault runs')
    expect(md).toContain('| run-a | abc1234 | 2 of 2 | 0 | 0 | 0 |')
    expect(md).toContain('- Faults (protocols/faults.mjs):')
    const html = await readFile(join(out, 'report.html'), 'utf8')
    expect(html).toContain('<p class="faults-headline">faults: 1/2 answered correctly, 0 corrupt blocks served; 1 skipped (read-only); not correct: share-sigstop.</p>')
    expect(html).toContain('<h4>Fault runs</h4>')
  })

  it('without fault records there is no faults section and no faults rule', async () => {
    const out = join(dir, 'out-none')
    await generateResults(join(dir, 'runs'), out, join(dir, 'micro'), join(dir, 'needle'), join(dir, 'no-faults'))
    const md = await readFile(join(out, 'RESULTS.md'), 'utf8')
    expect(md).not.toContain('Faults')
  })
})

describe('protocols/faults.mjs', () => {
  it('--help prints the usage and exits 0 having started and written nothing; a bad flag is one line and exit 2', async () => {
    const cwd = await mkdtemp(join(dir, 'cwd-'))
    const help = await execa('node', [join(ROOT, 'protocols', 'faults.mjs'), '--help'], { cwd, reject: false, env: { PD_STATE_DIR: join(cwd, 'state') } })
    expect(help.exitCode).toBe(0)
    expect(help.stdout).toMatch(/^Usage: npx zx protocols\/faults\.mjs/)
    expect(help.stdout).toContain('--only NAME,NAME')
    expect(await readdir(cwd)).toEqual([])
    const bad = await execa('node', [join(ROOT, 'protocols', 'faults.mjs'), '--only', 'nope'], { cwd, reject: false })
    expect(bad.exitCode).toBe(2)
    expect(bad.stderr.trim().split('\n')).toHaveLength(1)
    expect(bad.stderr).toMatch(/^faults: --only nope: no such fault/)
  })
})
