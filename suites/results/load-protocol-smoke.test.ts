// The load protocol, smoke run on the embedded stack (as protocol-smoke.test.ts smokes cold-bench):
// 2 clients for 3 s through the real front door, then one valid record in --runs with every
// route's counts, no error, the peak memory of every process, and a report with its load section in
// --out. Latencies are recorded, never asserted.
import { mkdtemp, readdir, readFile, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { execa } from 'execa'
import { describe, expect, it } from 'vitest'
import { readLoadRecords } from '../../verify/results/load-record.ts'
import { loadHeadline } from '../../verify/results/load-section.ts'
import { HANG_LIMIT_MS } from '../support/hang-limit.ts'

const ROOT = join(import.meta.dirname, '..', '..')

describe('the load protocol, smoke run on the embedded stack', () => {
  it('2 clients for 3 s: one valid record, 0 errors, every process measured, the report\'s load section', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'pd-load-'))
    try {
      const runs = join(dir, 'runs')
      const out = join(dir, 'out')
      const state = join(dir, 'state')
      const r = await execa('node', ['protocols/load.mjs', '--clients', '2', '--duration-s', '3', '--seed', '11', '--state-dir', state, '--runs', runs, '--out', out], { cwd: ROOT, reject: false, timeout: HANG_LIMIT_MS, env: { PD_PROGRESS: 'off' } })
      expect(r.exitCode, r.stderr).toBe(0)
      const records = await readLoadRecords(runs)
      expect(records).toHaveLength(1)
      const rec = records[0]
      expect(rec.settings).toMatchObject({ clients: 2, durationS: 3, seed: 11, whenFull: 'native' })
      expect(rec.totals.errors).toBe(0)
      expect(rec.errorSamples).toEqual([])
      expect(rec.totals.requests).toBeGreaterThan(0)
      expect(rec.routes.map((x) => x.route)).toEqual(['bridged', 'warm', 'native-short'])
      // Whatever the draw sent, every answer the front door gave carried a verdict of the route's kind.
      for (const route of rec.routes) {
        for (const v of route.verdicts) {
          if (route.route === 'native-short') expect(v.verdict).toMatch(/^declined: short prompt/)
          if (route.route === 'warm') expect(v.verdict).toMatch(/^declined: warm prompt/)
          if (route.route === 'bridged') expect(v.verdict).not.toMatch(/^declined: (short|warm) prompt/)
        }
      }
      expect(Object.keys(rec.peakMemoryBytes).sort()).toEqual(['decoder', 'front', 'prefill-engine', 'protocol', 'share'])
      expect(r.stdout.split('\n')[0]).toBe(loadHeadline(rec))
      const md = await readFile(join(out, 'RESULTS.md'), 'utf8')
      expect(md).toContain(`### Load\n\n${loadHeadline(rec)}.\n`)
      expect(md).toContain(`## Environment ${rec.environment.id}`)
      // The run's own home under the state directory is removed after a run without errors.
      expect(await readdir(join(state, 'runs'))).toEqual([])
    }
    finally {
      await rm(dir, { recursive: true, force: true })
    }
  })
})
