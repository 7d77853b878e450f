// protocols/needle.mjs regenerates RESULTS.md at its end, as cold-bench does. Run here without any
// server: the seed ledger already holds the grid's document under another geometry, so the run is
// refused before a request is sent (docs/NEEDLE-PROTOCOL.md), its record is written, and the report
// is regenerated from the cold runs, micro records and this needle record.
import { readdir, readFile, mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { execa } from 'execa'
import { describe, expect, it } from 'vitest'
import { SeedLedger } from '../../verify/needle/seed-ledger.ts'
import { buildNeedleDocument, DEFAULT_CHARS_PER_TOKEN, DEFAULT_MIN_DISTANCE } from '../../verify/needle/document.ts'
import { needleGrid } from '../../verify/needle/grid.ts'
import { readNeedleRecords } from '../../verify/needle/record.ts'
import { ledgerDocument } from '../../verify/needle/run.ts'
import { HANG_LIMIT_MS } from '../support/hang-limit.ts'

const ROOT = join(import.meta.dirname, '..', '..')
const FIXTURES = join(import.meta.dirname, 'fixtures')
const BLOCK = 256
const SEED = 11

/** Put the document the protocol will build for 512 tokens at depth 0.5 (no tokenizer) into `ledger` under another geometry. */
async function plantEarlierRun (ledgerFile: string): Promise<void> {
  const [run] = needleGrid({ lengths: [512], depths: [0.5], seed: SEED })
  // As needle.mjs builds it: no tokenizer, the estimate's ratio, the distance raised past one block.
  const doc = buildNeedleDocument({ seed: run.seed, targetTokens: run.targetTokens, needles: run.needles, ask: run.ask, minDistance: Math.max(DEFAULT_MIN_DISTANCE, BLOCK + 1), charsPerToken: DEFAULT_CHARS_PER_TOKEN })
  const view = ledgerDocument(doc, BLOCK)
  const ledger = await SeedLedger.open(ledgerFile)
  await ledger.record('an earlier run under the old geometry', view.units, 'c'.repeat(64), view.blockSize)
}

function protocol (args: string[]) {
  const common = ['protocols/needle.mjs', '--url', 'http://127.0.0.1:9', '--geometry', 'after the fix', '--block-size', String(BLOCK), '--lengths', '512', '--depths', '0.5', '--seed', String(SEED)]
  return execa('node', [...common, ...args], { cwd: ROOT, reject: false, timeout: HANG_LIMIT_MS })
}

describe('protocols/needle.mjs regenerates RESULTS.md at its end', () => {
  it('with --out: the report holds the cold runs, the micro records and the new needle record in its own environment; a trial --runs alone leaves it alone', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'pd-needle-results-'))
    try {
      const ledger = join(dir, 'ledger.json')
      await plantEarlierRun(ledger)
      const runs = join(dir, 'needle-runs')
      const out = join(dir, 'out')
      const r = await protocol(['--ledger', ledger, '--runs', runs, '--out', out, '--cold-runs', join(FIXTURES, 'runs')])
      expect(r.exitCode, r.stderr).toBe(0)
      const [rec] = await readNeedleRecords(runs)
      expect(rec.refused).toMatch(/^reused seed: /)
      const md = await readFile(join(out, 'RESULTS.md'), 'utf8')
      // The fixture environments (cold runs; micro/ next to them) and the remote one of this run, in
      // report order: those with cold-prompt runs, then this needle run's, then the micro-only one.
      expect(md.match(/^## Environment .*/gm)).toEqual(['env-a1b2c3', 'env-d4e5f6', rec.environment.id, 'env-c7d8e9'].map((id) => `## Environment ${id}`))
      const own = md.split(/^(?=## Environment )/m).find((p) => p.startsWith(`## Environment ${rec.environment.id}\n`))!
      expect(own).toContain('| 0.5 | bridged 1 refused (reused seed) · native 1 refused |')
      expect(own).toContain('Bridged: 0 pass, 0 miss (of 0 complete), 0 not bridged, 1 refused. Native: 0 pass, 0 miss.')
      expect((await readdir(out))).toContain(`needle-${rec.environment.id}.svg`)
      expect(r.stderr).toMatch(/results: 7 run records, 4 micro-benchmark records, 1 needle records, 4 environments/)

      // Another --runs without --out is a trial: no report is written anywhere.
      const trial = await protocol(['--ledger', ledger, '--runs', join(dir, 'trial-runs')])
      expect(trial.exitCode, trial.stderr).toBe(0)
      expect(await readNeedleRecords(join(dir, 'trial-runs'))).toHaveLength(1)
      expect(trial.stderr).toContain('RESULTS.md not regenerated: --runs was given without --out')
      expect(trial.stderr).not.toMatch(/results: \d+ run records/)
    }
    finally {
      await rm(dir, { recursive: true, force: true })
    }
  })
})
