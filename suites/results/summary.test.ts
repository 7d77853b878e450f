import { mkdtemp, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import { PdBridgeError } from '../../src/errors.ts'
import { parseRunRecord, readRunRecords } from '../../verify/results/record.ts'
import { decodeRate, isBridged, median, summarize, verdictKind } from '../../verify/results/summary.ts'
import { readFileSync } from 'node:fs'

const FIXTURE = JSON.parse(readFileSync(join(import.meta.dirname, 'fixtures/runs/a-1024-r0.json'), 'utf8'))

describe('median', () => {
  it('is null for no values and the middle (or mean of the two middles) otherwise', () => {
    expect(median([])).toBeNull()
    expect(median([3, 1, 2])).toBe(2)
    expect(median([4, 1, 3, 2])).toBe(2.5)
  })

  it('has as many values at or below it as at or above it', () => {
    fc.assert(fc.property(fc.array(fc.integer({ min: -1e6, max: 1e6 }), { minLength: 1, maxLength: 41 }), (xs) => {
      const m = median(xs)!
      expect(xs.filter((x) => x <= m).length * 2).toBeGreaterThanOrEqual(xs.length)
      expect(xs.filter((x) => x >= m).length * 2).toBeGreaterThanOrEqual(xs.length)
    }))
  })
})

describe('decode rate', () => {
  it('counts tokens after the first over the time after the first', () => {
    expect(decodeRate({ totalMs: 1500, ttftMs: 500, completionTokens: 11 })).toBe(10)
  })

  it('is null when it cannot be told', () => {
    expect(decodeRate({ totalMs: 1500, ttftMs: null, completionTokens: 11 })).toBeNull()
    expect(decodeRate({ totalMs: 1500, ttftMs: 500, completionTokens: 1 })).toBeNull()
    expect(decodeRate({ totalMs: 500, ttftMs: 500, completionTokens: 11 })).toBeNull()
  })

  it('is null when the text after the first piece arrived in one burst (under 1 ms a token)', () => {
    expect(decodeRate({ totalMs: 115261.06, ttftMs: 115260.43, completionTokens: 32 })).toBeNull() // the 130K record
    expect(decodeRate({ totalMs: 1009.99, ttftMs: 1000, completionTokens: 11 })).toBeNull()
    expect(decodeRate({ totalMs: 1010, ttftMs: 1000, completionTokens: 11 })).toBe(1000)
  })

  it("takes the decoder's own decode time where the record has it, the client's where not", () => {
    // The 130K record's client saw one burst; the decoder's clock would still tell the rate.
    expect(decodeRate({ totalMs: 115261.06, ttftMs: 115260.43, completionTokens: 32, decoderMs: { decode: 3100 } })).toBe(10)
    expect(decodeRate({ totalMs: 1500, ttftMs: null, completionTokens: 11, decoderMs: { decode: 2000 } })).toBe(5)
    expect(decodeRate({ totalMs: 1500, ttftMs: 500, completionTokens: 1, decoderMs: { decode: 2000 } })).toBeNull()
    expect(decodeRate({ totalMs: 1500, ttftMs: 500, completionTokens: 11, decoderMs: { decode: 5 } })).toBeNull()
  })
})

describe('a size whose only bridged run was declined', () => {
  it('has no bridged time and no ratio', () => {
    const declined = structuredClone(FIXTURE)
    declined.bridged.verdict = 'declined'
    const s = summarize([parseRunRecord(declined, 'x.json')])[0].sizes[0]
    expect(s.bridgedMs).toBeNull()
    expect(s.ratio).toBeNull()
    expect(s.pairs).toBe(0)
    expect(s.nativeMs).toBe(4000)
  })
})

describe('every run of a size is kept for the time chart', () => {
  it('with both legs\' times, the verdict and whether it counts as bridged; the medians still use complete runs only', async () => {
    const records = await readRunRecords(join(import.meta.dirname, 'fixtures', 'runs'))
    const a4096 = summarize(records)[0].sizes.find((s) => s.targetTokens === 4096)!
    expect(a4096.points.map((p) => [p.runId, p.promptTokens, p.nativeMs, p.bridgedMs, p.counted])).toEqual([
      ['a-4096-r0', 4100, 16000, 6000, true],
      ['a-4096-r1-declined', 4099, 16400, 16800, false],
    ])
    expect(a4096.points[1].verdict).toMatch(/^declined: /)
    expect(a4096.bridgedMs).toBe(6000)
    const nativeOnly = summarize(records)[0].sizes.find((s) => s.targetTokens === 16384)!
    expect(nativeOnly.points).toEqual([{ runId: 'a-16384-r0-native-only', promptTokens: 16390, nativeMs: 70000, bridgedMs: null, verdict: null, counted: false }])
  })
})

describe('run record validation', () => {
  it('names the file and the field that is wrong', () => {
    const bad = structuredClone(FIXTURE)
    bad.bridged.bytes.fetched = -1
    expect(() => parseRunRecord(bad, 'runs/bad.json')).toThrow(PdBridgeError)
    expect(() => parseRunRecord(bad, 'runs/bad.json')).toThrow(/runs\/bad\.json: run record field bridged\.bytes\.fetched/)
  })

  it('rejects another schema tag and unknown fields', () => {
    expect(() => parseRunRecord({ ...FIXTURE, schema: 'pd-bridge/cold-run@0' }, 'f.json')).toThrow(/field schema/)
    expect(() => parseRunRecord({ ...FIXTURE, extra: 1 }, 'f.json')).toThrow(/f\.json/)
  })

  it('reads a directory: none when it is missing, a named error for a file that is not JSON', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'pd-runs-'))
    try {
      expect(await readRunRecords(join(dir, 'missing'))).toEqual([])
      await writeFile(join(dir, 'broken.json'), '{')
      await expect(readRunRecords(dir)).rejects.toThrow(/broken\.json: not JSON/)
    }
    finally {
      await rm(dir, { recursive: true, force: true })
    }
  })
})

describe('verdict kinds', () => {
  it('groups verdicts by their first word and counts only an exact complete as bridged', () => {
    expect(verdictKind('partial 512/1029')).toBe('partial')
    expect(verdictKind('declined: short prompt (300 tokens < PD_MIN_TOKENS 512)')).toBe('declined')
    expect(verdictKind('complete')).toBe('complete')
    const leg = structuredClone(FIXTURE.bridged)
    expect(isBridged({ ...leg, verdict: 'complete' })).toBe(true)
    expect(isBridged({ ...leg, verdict: 'completed' })).toBe(false)
    expect(isBridged({ ...leg, verdict: 'partial 512/1029' })).toBe(false)
    expect(isBridged(null)).toBe(false)
  })
})
