// The load protocol's concurrency levels as numbers (no stack runs here: protocols/load.mjs is the
// real run, suites/results/load-levels-smoke.test.ts its smoke): a level's decode rate counts the
// time some answer was decoding once (the union of first-token-to-end spans), answers that differ
// from their solo runs and errors are counted, the goals follow from the levels, the schema refuses
// totals that are not the levels' sums, and RESULTS.md gets one block per decoder kind.
import { mkdtemp, mkdir, readFile, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { generateResults } from '../../verify/results/generate.ts'
import {
  LOAD_LEVELS_DEFINITIONS, LOAD_LEVELS_RECORD_SCHEMA, loadLevelsVerdict, parseLoadLevelsRecord, summarizeLatency, summarizeLevel, unionMs,
  type LevelSample, type LoadLevel, type LoadLevelsRecord,
} from '../../verify/results/load-levels-record.ts'
import { loadLevelsHeadline, loadLevelsRunLine, loadLevelsTable, loadLevelsTimeTable } from '../../verify/results/load-levels-section.ts'

let dir: string
beforeAll(async () => { dir = await mkdtemp(join(tmpdir(), 'pd-load-levels-')) })
afterAll(async () => { await rm(dir, { recursive: true, force: true }) })

function sample (over: Partial<LevelSample> = {}): LevelSample {
  return { route: 'native-short', status: 200, start: 0, first: 100, end: 1100, completionTokens: 11, verdict: 'declined: short prompt (204 tokens < PD_MIN_TOKENS 512)', sameAsSolo: true, message: null, ...over }
}

const EXTRA = { peakRssBytes: { decoder: 200 * 2 ** 20, front: 150 * 2 ** 20 }, loadAverage: { start: 3, end: 4 } }

/** A level of `clients` answers decoding side by side, each 10 tokens after its first in `decodeMs`. */
function level (clients: number, decodeMs: number): LoadLevel {
  return summarizeLevel(clients, Array.from({ length: clients }, () => sample({ first: 100, end: 100 + decodeMs })), EXTRA)
}

function record (levels: LoadLevel[], latency = summarizeLatency(2, [sample(), sample({ first: 200 })], [sample({ first: 300 }), sample({ first: 500 })], [], [sample({ route: 'bridged', verdict: 'complete', completionTokens: 1 })])): LoadLevelsRecord {
  return {
    schema: LOAD_LEVELS_RECORD_SCHEMA,
    runId: 'levels-fixture',
    startedAt: '2026-01-05T00:00:00.000Z',
    finishedAt: '2026-01-05T00:05:00.000Z',
    environment: { id: 'env-10ad', cpu: 'Fixture CPU', cores: 2, memoryBytes: 8 * 2 ** 30, node: 'v20.0.0', os: 'linux', model: 'embedded tiny', configFingerprint: 'abc', commit: 'abc1234' },
    decoder: { kind: 'ours', profile: 'decoder' },
    machine: { cpus: 2, cpu: 'Fixture CPU', totalMemoryBytes: 8 * 2 ** 30 },
    settings: {
      levels: levels.map((l) => l.clients), requestsPerClient: 1, mix: { bridged: 0.2, warm: 0.4, 'native-short': 0.4 }, coldTokens: 700, shortTokens: 200, longTokens: 4096,
      maxTokens: 11, temperature: 0.8, topP: 0.95, seed: 5, latencySamples: 2, requestTimeoutMs: 300_000,
    },
    levels,
    latency,
    ...loadLevelsVerdict(levels, latency),
    errorSamples: [],
  }
}

describe('the counting rules', () => {
  it('unionMs counts overlapping spans once and gaps not at all', () => {
    expect(unionMs([])).toBe(0)
    expect(unionMs([[0, 10], [5, 15], [20, 30], [21, 22]])).toBe(25)
    expect(unionMs([[5, 5], [10, 4]])).toBe(0)
  })

  it('a level: decode tokens/s over the union of decoding spans; errors, 429s and answers that differ from their solo run counted', () => {
    const l = summarizeLevel(3, [
      sample({ start: 0, first: 100, end: 1100 }),
      sample({ start: 0, first: 600, end: 1600, sameAsSolo: false, route: 'warm' }),
      sample({ status: 429, first: null, end: 5, sameAsSolo: null, completionTokens: 0 }),
      sample({ status: null, first: null, end: 7, sameAsSolo: null, completionTokens: 0, message: 'ECONNRESET', route: 'bridged' }),
    ], EXTRA)
    expect(l).toMatchObject({ clients: 3, requests: 4, ok: 2, errors: 1, rateLimited: 1, completionTokens: 22, answersCompared: 2, answersDiffering: 1 })
    // 20 tokens after the first ones, decoding from 100 to 1600 ms.
    expect(l.decodeTokensPerS).toBeCloseTo(20 / 1.5, 10)
    expect(l.tokensPerS).toBeCloseTo(22 / 1.6, 10)
    expect(l.routes.map((r) => [r.route, r.requests, r.ok])).toEqual([['bridged', 1, 0], ['warm', 1, 1], ['native-short', 2, 1]])
  })

  it('the goals: decode speed-up at 8 clients over 1, TTFT p99 under a bridge over idle, no answer differing', () => {
    const r = record([level(1, 1000), level(8, 2000)])
    expect(r.speedup).toEqual({ 1: 1, 8: 4 })
    expect(r.goals.throughput).toEqual({ target: 4, measured: 4, met: true })
    expect(r.goals.ttftUnderBridge).toEqual({ target: 2, measured: 2.5, met: false })
    expect(r.goals.answersDiffering).toEqual({ target: 0, measured: 0, met: true })
    // The probe's 5 answers add to the levels' 9 compared answers.
    expect(r.totals).toEqual({ requests: 9, ok: 9, errors: 0, rateLimited: 0, answersCompared: 14, answersDiffering: 0 })
    expect(record([level(2, 1000)]).goals.throughput).toEqual({ target: 4, measured: null, met: null })
    expect(parseLoadLevelsRecord(r, 'x.json')).toEqual(r)
  })

  it('the schema refuses totals that are not the sums, and levels out of the settings\' order', () => {
    const r = record([level(1, 1000), level(2, 1000)])
    expect(() => parseLoadLevelsRecord({ ...r, totals: { ...r.totals, answersDiffering: 0, answersCompared: 1 } }, 'bad.json')).toThrow('bad.json: load-levels record field totals.answersCompared: is 1, but the levels (and the latency probe) sum to 8')
    expect(() => parseLoadLevelsRecord({ ...r, settings: { ...r.settings, levels: [2, 1] } }, 'bad.json')).toThrow('levels.0.clients: must be 2 (the settings\' levels in order)')
  })
})

describe('the preset and the definitions', () => {
  it('a record names its preset and says what its rates are; a record from before them still reads', () => {
    const old = record([level(1, 1000)])
    const now = { ...old, definitions: LOAD_LEVELS_DEFINITIONS, settings: { ...old.settings, preset: 'flash-attn' } }
    expect(parseLoadLevelsRecord(JSON.parse(JSON.stringify(now)), 'now.json').settings.preset).toBe('flash-attn')
    expect(parseLoadLevelsRecord(JSON.parse(JSON.stringify(old)), 'old.json').definitions).toBeUndefined()
    expect(loadLevelsRunLine(now)).toContain('preset flash-attn; 1 requests per client')
    expect(loadLevelsRunLine(old)).not.toContain('preset')
    expect(now.definitions.decodeTokensPerS).toContain('union')
    expect(() => parseLoadLevelsRecord({ ...now, definitions: { ...LOAD_LEVELS_DEFINITIONS, extra: 'x' } }, 'bad.json')).toThrow()
    const batched = { ...now, levels: [{ ...now.levels[0], decoderBatch: { steps: 10, rows: 20, meanRows: 2, chunks: 1 } }] }
    expect(parseLoadLevelsRecord(JSON.parse(JSON.stringify(batched)), 'batched.json').levels[0].decoderBatch?.meanRows).toBe(2)
    // Since the batcher's timing counters: where the decoder's time went; a field it does not know is refused.
    const time = { seatedMs: 900, stepMs: 500, chunkMs: 300, pickMs: 20, otherActiveMs: 30, idleMs: 50, stepMsPerStep: 50, seatedMsPerStep: 90, pickMsPerRow: 1, chunkMsPerChunk: 300, partialSteps: 0 }
    const timed = { ...now, levels: [{ ...now.levels[0], decoderBatch: { ...batched.levels[0].decoderBatch, time } }] }
    expect(parseLoadLevelsRecord(JSON.parse(JSON.stringify(timed)), 'timed.json').levels[0].decoderBatch?.time?.chunkMsPerChunk).toBe(300)
    expect(() => parseLoadLevelsRecord({ ...now, levels: [{ ...now.levels[0], decoderBatch: { ...batched.levels[0].decoderBatch, time: { ...time, gcMs: 1 } } }] }, 'bad.json')).toThrow()
  })
})

describe('where the decoder\'s seated time went', () => {
  /** A level with the batcher's counters: rows, seated, in steps, in chunks, samplers, other (ms). */
  function timed (l: LoadLevel, steps: number, rows: number, chunks: number, [seatedMs, stepMs, chunkMs, pickMs, otherActiveMs]: number[]): LoadLevel {
    const perStep = { stepMsPerStep: stepMs / steps, seatedMsPerStep: seatedMs / steps, pickMsPerRow: pickMs / rows, chunkMsPerChunk: chunks > 0 ? chunkMs / chunks : null }
    const time = { seatedMs, stepMs, chunkMs, pickMs, otherActiveMs, idleMs: 0, ...perStep, partialSteps: 0 }
    return { ...l, decoderBatch: { steps, rows, meanRows: rows / steps, chunks, time } }
  }

  it('per level: the seated time in steps and outside them, the chunks, and the speed-up the level would have with free steps', () => {
    // Level 1 decodes 10 tokens/s; at 8 clients 80 rows in 4 s seated, 2 s of it in steps: free steps give 80 / 2 s = 40 tokens/s, 4x.
    const r = record([timed(level(1, 1000), 10, 10, 1, [1000, 900, 50, 20, 30]), timed(level(8, 4000), 10, 80, 8, [4000, 2000, 1500, 200, 300])])
    const t = loadLevelsTimeTable(r)!
    expect(t.headers).toEqual(['clients', 'steps', 'mean rows', 'ms per step', 'seated', 'in steps', 'seated, not in a step', 'prefill chunks (all their time)', 'with free steps, vs 1 client'])
    expect(t.rows).toEqual([
      ['1', '10', '1.00', '90.0', '1.00 s', '0.90 s (90%)', '0.10 s (10%)', '1 in 0.05 s', '10.00x'],
      ['8', '10', '8.00', '200.0', '4.00 s', '2.00 s (50%)', '2.00 s (50%)', '8 in 1.50 s', '4.00x'],
    ])
    // With more of the seated time outside the steps the bound falls below the goal, whatever a step costs.
    const chunky = record([timed(level(1, 1000), 10, 10, 1, [1000, 900, 50, 20, 30]), timed(level(8, 4000), 10, 80, 8, [4000, 1000, 2800, 100, 100])])
    expect(loadLevelsTimeTable(chunky)!.rows[1].at(-1)).toBe('2.67x')
    // The headline names the bound at the goal's level.
    expect(loadLevelsHeadline(chunky)).toContain('decode tokens/s at 8 clients over 1 2.00x (goal >= 4x: not met), at most 2.67x had its batched steps cost nothing (on a loaded machine')
    // Records from before the counters (or a kind that does not batch) get no table.
    expect(loadLevelsTimeTable(record([level(1, 1000), level(8, 4000)]))).toBeNull()
  })
})

describe('RESULTS.md', () => {
  it('one block per decoder kind with its headline and per-level table, read from load/levels', async () => {
    const ours = record([level(1, 1000), level(8, 4000)])
    const llama = { ...record([level(1, 1000), level(8, 1000)]), runId: 'levels-llama', decoder: { kind: 'llama.cpp', profile: 'f32' } }
    expect(loadLevelsHeadline(ours)).toBe('load levels, decoder ours: 1/8 clients, 9 requests, 0 errors, 0 of 14 answers differ from their solo runs; decode tokens/s at 8 clients over 1 2.00x (goal >= 4x: not met) ' +
      "(on a loaded machine: 1-minute load average 3.0 to 3.0 on 2 CPUs at the levels' starts, so the ratio is contention's as much as the decoder's); short-prompt TTFT p99 under a bridge 2.50x (goal <= 2x idle: not met)")
    // A machine whose load stayed within its cores carries no such caveat.
    const quiet = { ...ours, levels: ours.levels.map((l) => ({ ...l, loadAverage: { start: 1.5, end: 1.2 } })) }
    expect(loadLevelsHeadline(quiet)).toBe('load levels, decoder ours: 1/8 clients, 9 requests, 0 errors, 0 of 14 answers differ from their solo runs; decode tokens/s at 8 clients over 1 2.00x (goal >= 4x: not met); short-prompt TTFT p99 under a bridge 2.50x (goal <= 2x idle: not met)')
    expect(loadLevelsTable(ours).rows[1]).toEqual(['8', '8', '0', '20.0', '2.00x', '21.5', '0.10 s', '0.10 s', '0.10 s', '4.10 s', '4.10 s', '4.10 s', '0 / 8', '200 MiB', '150 MiB', '3.0'])
    const load = join(dir, 'load')
    await mkdir(join(load, 'levels'), { recursive: true })
    await writeFile(join(load, 'levels', 'a.json'), JSON.stringify(ours))
    await writeFile(join(load, 'levels', 'b.json'), JSON.stringify(llama))
    const out = join(dir, 'out')
    const g = await generateResults(join(dir, 'runs'), out, join(dir, 'micro'), join(dir, 'needle'), join(dir, 'faults'), load)
    expect(g.loadLevelsRecords).toBe(2)
    expect(g.loadRecords).toBe(0)
    const md = await readFile(join(out, 'RESULTS.md'), 'utf8')
    expect(md).toContain(`### Load: concurrency levels\n\n${loadLevelsHeadline(llama)}.\n`)
    expect(md).toContain(`${loadLevelsHeadline(ours)}.\n`)
    expect(md).toContain('#### Load levels: decoder ours, per level')
    expect(md).toContain('#### Load-levels runs')
    expect(await readFile(join(out, 'report.html'), 'utf8')).toContain('<h3>Load: concurrency levels</h3>')
  })
})
