// protocols/needle.mjs as a child process on a fresh embedded stack: two short lengths (below and
// past the original window of 1024), depth 1 (the needle as late as it may sit). With the `needle`
// preset (the default when it exists; PD_NEEDLE_PRESET=tiny to override) every needle must be
// retrieved, through the bridge and natively; with `tiny` (random weights) only the mechanics are
// checked. Then the same seed against a changed geometry is refused without a request.
import { mkdtemp, readFile, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { execa } from 'execa'
import { describe, expect, it } from 'vitest'
import { isPresetName } from '../../src/model/checkpoint/index.ts'
import { askedNeedleBridged, readNeedleRecords } from '../../verify/needle/record.ts'
import { answerHits } from '../../verify/needle/score.ts'
import { HANG_LIMIT_MS } from '../support/hang-limit.ts'

const ROOT = join(import.meta.dirname, '..', '..')
const PRESET = process.env.PD_NEEDLE_PRESET ?? (isPresetName('needle') ? 'needle' : 'tiny')

describe(`the needle protocol, smoke run on the embedded stack (preset ${PRESET})`, () => {
  it('writes a record per run with verdicts, exact positions and ledger entries; a reused seed is then refused', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'pd-needle-smoke-'))
    try {
      const runs = join(dir, 'runs')
      const ledger = join(dir, 'ledger.json')
      const common = ['--lengths', '512,1536', '--depths', '1', '--seed', '7', '--ledger', ledger]
      const r = await execa('node', ['protocols/needle.mjs', '--preset', PRESET, ...common, '--state-dir', join(dir, 'state'), '--runs', runs], { cwd: ROOT, reject: false, timeout: HANG_LIMIT_MS })
      expect(r.exitCode, r.stderr).toBe(0)
      const records = await readNeedleRecords(runs)
      expect(records.map((x) => x.targetTokens).sort((a, b) => a - b)).toEqual([512, 1536])
      for (const rec of records) {
        expect(rec.document.positions).toBe('exact')
        expect(rec.document.promptTokens).toBeLessThanOrEqual(rec.targetTokens)
        expect(rec.answerBudget).toEqual({ maxTokens: 300, belowMinimum: false })
        expect(rec.ledger).toMatchObject({ outcome: 'fresh', recorded: true, unit: 'tokens' })
        expect(rec.geometry.source).toBe('front-door')
        const b = rec.bridged!
        const n = rec.native!
        // The protocol's own measurement is what the servers counted.
        expect(b.promptTokens).toBe(rec.document.promptTokens)
        expect(n.promptTokens).toBe(rec.document.promptTokens)
        expect(b.verdict).toBe('complete')
        expect(askedNeedleBridged(rec)).toBe(true)
        expect(rec.needles[0].distance).toBeGreaterThanOrEqual(257)
        expect(b.hit).toBe(answerHits(b.answer, rec.expected))
        expect(n.hit).toBe(answerHits(n.answer, rec.expected))
        if (PRESET === 'needle') {
          expect(b.outcome, `bridged answer ${JSON.stringify(b.answer)} for ${rec.expected}`).toBe('pass')
          expect(n.outcome, `native answer ${JSON.stringify(n.answer)} for ${rec.expected}`).toBe('pass')
        }
      }
      expect(r.stdout).toContain('| depth \\ tokens | 512 | 1536 |')

      // The same seed after a "geometry change": refused before any request (the URL answers nothing).
      const again = await execa('node', ['protocols/needle.mjs', ...common, '--url', 'http://127.0.0.1:9', '--geometry', 'compress yarn factor 16 (stale)', '--block-size', '256', '--tokenizer', join(dir, 'state', 'models', `${PRESET}-seed1`), '--runs', join(dir, 'runs-again')], { cwd: ROOT, reject: false, timeout: HANG_LIMIT_MS })
      expect(again.exitCode, again.stderr).toBe(0)
      const refused = await readNeedleRecords(join(dir, 'runs-again'))
      expect(refused).toHaveLength(2)
      for (const rec of refused) {
        expect(rec.ledger.outcome).toBe('reused-seed')
        expect(rec.refused).toMatch(/^reused seed: /)
        expect(rec.bridged).toBeNull()
        expect(rec.native).toBeNull()
      }
      expect(JSON.parse(await readFile(ledger, 'utf8')).entries).toHaveLength(2)
    }
    finally {
      await rm(dir, { recursive: true, force: true })
    }
  })
})
