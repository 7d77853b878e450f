// The adversary record and its report section, from synthetic records (no stack runs here:
// protocols/adversary.mjs is the real run; suites/results/adversary-protocol-smoke.test.ts runs a small
// one). The schema holds the counting rule, the headline adds every case's counts and what the stopped
// stack left, several runs get a runs table.
import { describe, expect, it } from 'vitest'
import { ADVERSARY_RECORD_SCHEMA, adversaryHeadline, parseAdversaryRecord, type AdversaryCase, type AdversaryRecord } from '../../verify/results/adversary-record.ts'
import { adversaryRunLine, adversaryTables, summarizeAdversary } from '../../verify/results/adversary-section.ts'

const ENV = { id: 'env-ad17', cpu: 'Test CPU', cores: 2, memoryBytes: 8 * 2 ** 30, node: 'v20.19.0', os: 'linux 6.0 x64', commit: 'abc1234', configFingerprint: 'cfg', model: 'embedded tiny (seed 1, blocks of 256)' }

function kase (name: string, over: Partial<AdversaryCase> = {}): AdversaryCase {
  return {
    name, tried_what: `${name} tried`, expected: 'nothing wrong', tried: 10, answers_compared: 4, wrong_answers_served: 0, internal_routes_reached: 0, paths_leaked: 0, bytes_left: 0,
    correct: true, details: {}, ...over,
  }
}

function record (runId: string, startedAt: string, cases: AdversaryCase[], left: Partial<AdversaryRecord['after_stop']> = {}): AdversaryRecord {
  return {
    schema: ADVERSARY_RECORD_SCHEMA, runId, startedAt, finishedAt: startedAt, environment: ENV,
    settings: { promptTokens: 700, maxTokens: 12, clients: 16, requestsPerClient: 3, spellings: 400, timeoutMs: 180_000, keyed: true },
    cases, after_stop: { processes_left: 0, bytes_left: 0, captures_left: 0, spool_files: 0, temp_block_files: 0, ...left },
  }
}

describe('the adversary record', () => {
  it('refuses a case marked correct with a wrong answer, a reached route, a leaked path or bytes left; keeps a good one as it is', () => {
    for (const bad of [{ wrong_answers_served: 1 }, { internal_routes_reached: 2 }, { paths_leaked: 1 }, { bytes_left: 5 }]) {
      expect(() => parseAdversaryRecord(record('r', '2026-01-01T00:00:00.000Z', [kase('x', { ...bad, correct: true })]), 'r.json')).toThrow(/r\.json: adversary record field cases\.0\.correct: is true, but/)
    }
    const good = record('r', '2026-01-01T00:00:00.000Z', [kase('x')])
    expect(parseAdversaryRecord(JSON.parse(JSON.stringify(good)), 'r.json')).toEqual(good)
    expect(() => parseAdversaryRecord({ ...good, schema: 'pd-bridge/adversary-run@0' }, 'old.json')).toThrow(/old\.json: adversary record field schema/)
  })

  it('the headline adds the cases up and names those not correct and what the stopped stack left', () => {
    const r = record('r', '2026-01-01T00:00:00.000Z', [
      kase('route-spellings', { tried: 800, answers_compared: 400 }),
      kase('tampered-block', { tried: 1, answers_compared: 2, wrong_answers_served: 1, correct: false }),
      kase('crash-restart', { tried: 2, answers_compared: 2, bytes_left: 1000, correct: false }),
    ], { processes_left: 1, bytes_left: 24 })
    expect(adversaryHeadline(r)).toBe('adversary: 1/3 cases correct, 803 requests tried, 404 answers compared, 1 wrong answer served, 0 internal routes reached, 0 paths leaked, ' +
      '1 process and 1024 bytes left, not correct: tampered-block, crash-restart')
  })
})

describe('the report section', () => {
  it('one table for one run, with the after-stop row; a runs table once there are two', () => {
    const a = record('run-a', '2026-01-01T00:00:00.000Z', [kase('expect-continue')])
    const b = record('run-b', '2026-01-02T00:00:00.000Z', [kase('expect-continue'), kase('absolute-paths', { paths_leaked: 3, correct: false })])
    expect(summarizeAdversary([])).toBeNull()
    const one = adversaryTables(summarizeAdversary([a])!)
    expect(one).toHaveLength(1)
    expect(one[0].rows.map((r) => r[0])).toEqual(['expect-continue', 'after stop'])
    const two = summarizeAdversary([b, a])!
    expect(two.runs.map((r) => r.runId)).toEqual(['run-a', 'run-b'])
    const tables = adversaryTables(two)
    expect(tables.map((t) => t.title)).toEqual(['Adversary: newest run', 'Adversary runs'])
    expect(tables[0].rows[1]).toEqual(['absolute-paths', 'absolute-paths tried', '10', '4', '0', '0', '3', '0', 'no'])
    expect(tables[1].rows.map((r) => r[2])).toEqual(['1 of 1', '1 of 2'])
    expect(adversaryRunLine(two)).toMatch(/^Newest run run-b \(commit abc1234, 2026-01-02T00:00:00.000Z; with a deployment key\); 1 earlier run listed below\./)
  })
})
