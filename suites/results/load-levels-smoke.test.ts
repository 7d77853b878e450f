// The load protocol's concurrency levels, smoke run on the embedded stack (our decoder, tiny
// preset): 1 and 2 clients, one request each, and a latency probe of 2 short prompts under a small
// bridge, through the real front door with the official openai client. One valid record in
// --runs/levels, no error, every answer compared with its solo run and none different, every
// process measured at every level, and the report's section in --out. Throughput and latency are
// recorded, never asserted (protocols/load.mjs with its defaults is the measurement).
import { mkdtemp, readdir, readFile, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { execa } from 'execa'
import { describe, expect, it } from 'vitest'
import { LOAD_LEVELS_DEFINITIONS, readLoadLevelsRecords } from '../../verify/results/load-levels-record.ts'
import { loadLevelsHeadline } from '../../verify/results/load-levels-section.ts'
import { HANG_LIMIT_MS } from '../support/hang-limit.ts'

const ROOT = join(import.meta.dirname, '..', '..')

describe('the load protocol\'s concurrency levels, smoke run on the embedded stack', () => {
  it('1 and 2 clients and the latency probe: one valid record, 0 errors, 0 answers that differ from their solo runs', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'pd-load-levels-'))
    try {
      const runs = join(dir, 'runs')
      const out = join(dir, 'out')
      const state = join(dir, 'state')
      const r = await execa('node', ['protocols/load.mjs', '--levels', '1,2', '--decoders', 'ours', '--requests-per-client', '1', '--latency-samples', '2', '--long-tokens', '1500',
        '--max-tokens', '6', '--seed', '11', '--state-dir', state, '--runs', runs, '--out', out], { cwd: ROOT, reject: false, timeout: HANG_LIMIT_MS, env: { PD_PROGRESS: 'off' } })
      expect(r.exitCode, r.stderr).toBe(0)
      expect(await readdir(runs)).toEqual(['levels'])
      const records = await readLoadLevelsRecords(join(runs, 'levels'))
      expect(records).toHaveLength(1)
      const rec = records[0]
      expect(rec.decoder.kind).toBe('ours')
      expect(rec.settings).toMatchObject({ preset: 'tiny', levels: [1, 2], requestsPerClient: 1, seed: 11, latencySamples: 2, longTokens: 1500, maxTokens: 6 })
      expect(rec.definitions).toEqual(LOAD_LEVELS_DEFINITIONS)
      // Our decoder batches: each level's answers were decoded in batched steps it counted.
      for (const l of rec.levels) expect(l.decoderBatch?.rows).toBeGreaterThanOrEqual(l.completionTokens - l.ok)
      // And timed them: steps run only while some seat decodes, so the seated time holds them all.
      for (const l of rec.levels) expect(l.decoderBatch?.time?.seatedMs).toBeGreaterThanOrEqual(l.decoderBatch!.time!.stepMs)
      expect(rec.levels.map((l) => [l.clients, l.requests, l.errors])).toEqual([[1, 1, 0], [2, 2, 0]])
      expect(rec.totals.errors).toBe(0)
      expect(rec.errorSamples).toEqual([])
      // Every 2xx answer of the levels and the probe was compared with its solo run, and none differs.
      const probeOk = rec.latency!.samples * 2 + rec.latency!.outsideBridge + rec.latency!.longVerdicts.reduce((a, v) => a + v.requests, 0)
      expect(rec.totals.answersCompared).toBe(rec.totals.ok + probeOk)
      expect(rec.totals.answersDiffering).toBe(0)
      expect(rec.goals.answersDiffering).toEqual({ target: 0, measured: 0, met: true })
      // The long prompts of the probe were bridged, so the short ones really ran beside a bridge.
      expect(rec.latency!.longVerdicts.map((v) => v.verdict)).toContain('complete')
      expect(rec.latency!.idleTtftMs).not.toBeNull()
      expect(rec.latency!.underBridgeTtftMs).not.toBeNull()
      for (const l of rec.levels) expect(Object.keys(l.peakRssBytes)).toEqual(['decoder', 'front', 'prefill-engine', 'protocol', 'share'])
      expect(rec.speedup?.['1']).toBe(1)
      expect(r.stdout.split('\n')[0]).toBe(loadLevelsHeadline(rec))
      const md = await readFile(join(out, 'RESULTS.md'), 'utf8')
      expect(md).toContain(`### Load: concurrency levels\n\n${loadLevelsHeadline(rec)}.\n`)
      // The run's own home and its solo decoder's store are removed after a run without errors.
      expect(await readdir(join(state, 'runs'))).toEqual([])
    }
    finally {
      await rm(dir, { recursive: true, force: true })
    }
  })
})
