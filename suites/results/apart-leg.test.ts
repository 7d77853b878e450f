// Pairing a decoder-alone leg run on its own (cold-bench --alone-only) with a later bridged leg
// (--pair-apart): one record of one environment, commit, prompt and budget, or a refusal.
import { readFile } from 'node:fs/promises'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { APART_LEG_SCHEMA, pairApartLeg, parseApartLeg, promptDigest, type ApartLeg, type BridgedHalf } from '../../verify/results/apart-leg.ts'
import { parseRunRecord, type RunRecord } from '../../verify/results/record.ts'
import { summarize } from '../../verify/results/summary.ts'
import { coldTables } from '../../verify/results/tables.ts'

const FIXTURE = join(import.meta.dirname, 'fixtures', 'runs', 'a-1024-r0.json')

async function fixtureRecord (): Promise<RunRecord> {
  return parseRunRecord(JSON.parse(await readFile(FIXTURE, 'utf8')), FIXTURE)
}

const PROMPT = promptDigest([1, 2, 3, 4])

async function legAndHalf (): Promise<{ leg: ApartLeg, half: BridgedHalf }> {
  const r = await fixtureRecord()
  const leg = parseApartLeg({
    schema: APART_LEG_SCHEMA, startedAt: '2026-12-04T10:00:00.000Z', environment: r.environment, targetTokens: r.targetTokens, seed: r.seed,
    repeat: r.repeat, answerBudget: r.answerBudget, promptSha256: PROMPT,
    native: { ...r.native!, answerSha256: 'a'.repeat(64) }, peakMemoryBytes: { 'decoder-native': 900, decoder: 100, protocol: 50 },
  }, 'leg.json')
  const half: BridgedHalf = {
    environment: { ...r.environment }, promptSha256: PROMPT, answerBudget: r.answerBudget,
    bridged: { ...r.bridged!, answerSha256: 'a'.repeat(64) }, peakMemoryBytes: { decoder: 300, front: 20, protocol: 40 },
  }
  return { leg, half }
}

describe('pairApartLeg', () => {
  it('makes one valid record: the alone leg marked apart, started when it started, peaks the larger per process', async () => {
    const { leg, half } = await legAndHalf()
    const rec = parseRunRecord(pairApartLeg(leg, half), 'paired.json')
    expect(rec.startedAt).toBe(leg.startedAt)
    expect(rec.runId).toBe(`2026-12-04T10-00-00-000Z-${leg.targetTokens}-r${leg.repeat}-${leg.seed}`)
    expect(rec.native).toEqual({ ...leg.native, apart: { startedAt: leg.startedAt } })
    expect(rec.bridged).toEqual(half.bridged)
    expect(rec.peakMemoryBytes).toEqual({ decoder: 300, 'decoder-native': 900, front: 20, protocol: 50 })
    expect(rec.answersAgree).toBe(true)
  })

  it('compares the answers by digest, finish reason and length', async () => {
    const { leg, half } = await legAndHalf()
    expect(pairApartLeg(leg, { ...half, bridged: { ...half.bridged, answerSha256: 'b'.repeat(64) } }).answersAgree).toBe(false)
    expect(pairApartLeg(leg, { ...half, bridged: { ...half.bridged, finishReason: 'stop' } }).answersAgree).toBe(false)
    expect(pairApartLeg(leg, { ...half, bridged: { ...half.bridged, completionTokens: 1 } }).answersAgree).toBe(false)
    const { answerSha256: _, ...noDigest } = half.bridged
    expect(pairApartLeg(leg, { ...half, bridged: noDigest }).answersAgree).toBeNull()
  })

  it('refuses another environment, commit, prompt or answer budget', async () => {
    const { leg, half } = await legAndHalf()
    expect(() => pairApartLeg(leg, { ...half, environment: { ...half.environment, id: 'env-other' } })).toThrow(/ran in environment env-a1b2c3, this bridged leg in env-other/)
    expect(() => pairApartLeg(leg, { ...half, environment: { ...half.environment, commit: '2222222' } })).toThrow(/at commit 1111111, this bridged leg at 2222222/)
    expect(() => pairApartLeg(leg, { ...half, promptSha256: promptDigest([1, 2, 3]) })).toThrow(/prompt .* is not the alone leg's/)
    expect(() => pairApartLeg(leg, { ...half, answerBudget: leg.answerBudget + 1 })).toThrow(/answer budget/)
  })

  it('a leg file that is not one is refused, naming the field', async () => {
    const { leg } = await legAndHalf()
    expect(() => parseApartLeg({ ...leg, promptSha256: 'xyz' }, 'bad.json')).toThrow(/bad.json: decoder-alone leg field promptSha256/)
    expect(() => parseApartLeg({ ...leg, schema: 'pd-bridge/cold-run@1' }, 'bad.json')).toThrow(/field schema/)
  })

  it('digests prompts by their token ids', () => {
    expect(promptDigest([1, 23])).not.toBe(promptDigest([12, 3]))
    expect(promptDigest(new Int32Array([5, 6]))).toBe(promptDigest([5, 6]))
  })

  it('the report counts a pair in two invocations and says so in the ratio', async () => {
    const { leg, half } = await legAndHalf()
    const apart = pairApartLeg(leg, half)
    const together = { ...(await fixtureRecord()), runId: 'together' }
    const [env] = summarize([apart, together])
    const size = env.sizes[0]
    expect([size.pairs, size.pairsApart]).toEqual([2, 1])
    const ratio = coldTables(env)[0].rows[0][4]
    expect(ratio).toMatch(/\(2 paired, 1 in two invocations\)$/)
    const [alone] = summarize([together])
    expect(coldTables(alone)[0].rows[0][4]).toMatch(/\(1 paired\)$/)
  })
})
