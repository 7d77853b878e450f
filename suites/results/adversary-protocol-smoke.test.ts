// The adversary protocol, a small run on the embedded stack (the full run, kills and crashes
// included, is protocols/adversary.mjs itself): 30 generated route spellings and the issue's own,
// Expect: 100-continue, bodies the decoder refuses, a tampered block under a deployment key, and
// absolute paths on a keyed and a keyless stack. One valid record, every case correct, nothing left.
import { mkdtemp, readdir, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { execa } from 'execa'
import { describe, expect, it } from 'vitest'
import { adversaryHeadline, readAdversaryRecords } from '../../verify/results/adversary-record.ts'

const ROOT = join(import.meta.dirname, '..', '..')
const CASES = ['route-spellings', 'expect-continue', 'refused-bodies', 'tampered-block', 'absolute-paths']

describe('the adversary protocol, small run on the embedded stack', () => {
  it('every case correct: no internal route reached, 413 before the body, refusals before work, the tampered block a miss, no path leaked, nothing left', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'pd-adversary-'))
    try {
      const runs = join(dir, 'runs')
      const state = join(dir, 'state')
      const r = await execa('node', ['protocols/adversary.mjs', '--only', CASES.join(','), '--spellings', '30', '--state-dir', state, '--runs', runs, '--no-generate'],
        { cwd: ROOT, reject: false, env: { PD_PROGRESS: 'off' } })
      const records = await readAdversaryRecords(runs)
      expect(records, r.stderr.slice(-4000)).toHaveLength(1)
      const rec = records[0]
      expect(rec.cases.map((c) => c.name)).toEqual(CASES)
      for (const c of rec.cases) expect({ name: c.name, correct: c.correct, details: c.correct ? null : c.details }).toEqual({ name: c.name, correct: true, details: null })
      expect(rec.cases.find((c) => c.name === 'route-spellings')!.tried).toBeGreaterThanOrEqual(2 * 30)
      expect(rec.after_stop).toEqual({ processes_left: 0, bytes_left: 0, captures_left: 0, spool_files: 0, temp_block_files: 0 })
      expect(r.stdout.split('\n')[0]).toBe(adversaryHeadline(rec))
      expect(r.exitCode, r.stderr.slice(-4000)).toBe(0)
      // The run's own home under the state directory is removed after a clean run.
      expect(await readdir(join(state, 'runs'))).toEqual([])
    } finally {
      await rm(dir, { recursive: true, force: true })
    }
  })
})
