// The two-host section of RESULTS.md and report.html, from a fixture record (a copy of a real
// protocols/two-hosts.mjs record: 10 Gbit/s link, three cold prompts, seven faults of which three
// were skipped for want of netem). The schema refuses what the record must not say, the headline
// counts complete prompts with the decoder alone's answer and the faults' wrong answers and
// half-written files, the tables carry the link and the transfer against the link rate, and a
// report without two-host records has no such section.
import { mkdtemp, readFile, rm, writeFile, mkdir } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { generateResults } from '../../verify/results/generate.ts'
import { parseTwoHostRecord, readTwoHostRecords, type TwoHostRecord } from '../../verify/results/two-host-record.ts'
import { linkFaultTable, linkShare, linkTable, summarizeTwoHost, transferTable, twoHostHeadline, twoHostStageTable } from '../../verify/results/two-host-section.ts'

const FIXTURE = join(import.meta.dirname, 'fixtures', 'two-host-run.json')

let dir: string
let fixture: TwoHostRecord
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'pd-two-host-section-'))
  fixture = parseTwoHostRecord(JSON.parse(await readFile(FIXTURE, 'utf8')), FIXTURE)
})
afterAll(async () => {
  await rm(dir, { recursive: true, force: true })
})

function changed (change: (r: TwoHostRecord) => void): TwoHostRecord {
  const r = structuredClone(fixture)
  change(r)
  return r
}

describe('the schema', () => {
  it('reads the fixture back as it is', () => {
    expect(parseTwoHostRecord(JSON.parse(JSON.stringify(fixture)), 'a.json')).toEqual(fixture)
    expect(fixture.link.across).toBe('network namespaces')
  })

  it('refuses an unknown field, another link kind, another schema and a fault counted correct with another answer', () => {
    expect(() => parseTwoHostRecord({ ...fixture, extra: 1 }, 'u.json')).toThrow(/^u\.json: two-host record/)
    expect(() => parseTwoHostRecord(changed((r) => { (r.link as { across: string }).across = 'loopback' }), 'l.json')).toThrow(/link\.across/)
    expect(() => parseTwoHostRecord({ ...fixture, schema: 'pd-bridge/two-host-run@2' }, 's.json')).toThrow(/schema/)
    expect(() => parseTwoHostRecord(changed((r) => { r.faults[0].answer_equals_native = false }), 'f.json')).toThrow(/faults\.0\.correct/)
  })
})

describe('the section', () => {
  it('headline: complete prompts with the native answer, faults answered correctly, wrong answers, half-written files, skipped', () => {
    const summary = summarizeTwoHost([fixture])!
    expect(twoHostHeadline(summary)).toBe('two hosts: 3/3 cold prompts complete with the decoder alone\'s answer; link faults (newest record of each): 4/4 answered correctly, 0 wrong answers, 0 half-written or corrupt files; ' +
      `3 skipped (loss-1, loss-10, delay-50: ${fixture.faults[2].skipped})`)
    const bad = changed((r) => {
      r.runs[0].answersAgree = false
      r.faults[1] = { ...r.faults[1], answer_equals_native: false, correct: false, details: { ...r.faults[1].details, half_written: 2 } }
    })
    expect(twoHostHeadline(summarizeTwoHost([bad])!)).toMatch(/^two hosts: 2\/3 cold prompts .*: 3\/4 answered correctly, 1 wrong answer, 2 half-written or corrupt files;/)
  })

  it('tables: the link as applied with the probe, each prompt against bytes / link rate, the stages, the faults', () => {
    const summary = summarizeTwoHost([fixture])!
    const link = linkTable(summary)
    expect(link.rows).toHaveLength(1)
    expect(link.rows[0].slice(1, 4)).toEqual(['network namespaces', '10gbe', '10.00 Gbit/s'])
    expect(link.rows[0][4]).toBe('none (asked 0.1 ms)')
    const transfer = transferTable(summary)
    expect(transfer.rows.map((r) => r[2])).toEqual(['complete', 'complete', 'complete'])
    const run = fixture.runs[2]
    expect(run.idealTransferMs).toBeCloseTo(run.fetchedBytes * 8 / 10e9 * 1000, 6)
    expect(transfer.rows[2][10]).toBe(`${linkShare(run)!.toFixed(1)}%`)
    expect(twoHostStageTable(summary).rows[0][2]).toContain('engine prefill')
    const faults = linkFaultTable(summary)!
    expect(faults.rows.map((r) => r[0])).toEqual(fixture.faults.map((f) => f.name))
    expect(faults.rows[2][1]).toMatch(/^skipped: /)
    expect(faults.headers.at(-1)).toBe('half-written files')
  })

  it('the faults: the newest record of each, a later run of some faults hiding neither the others nor an earlier measurement with a skip', () => {
    const later = changed((r) => {
      r.runId = `${r.runId}-later`
      r.startedAt = new Date(Date.parse(r.startedAt) + 3_600_000).toISOString()
      r.runs = []
      // The later run injected loss-1 and skipped cut-short.
      r.faults = [
        { ...r.faults[2], skipped: null, verdict: 'complete', status: 200, answer_equals_native: true, recovery_ms: 1000, answer_ms: 2000, correct: true, details: { ...r.faults[0].details, mechanism: 'nftables numgen random drop' } },
        { ...r.faults[0], skipped: 'not this time', verdict: 'not injected', status: null, answer_equals_native: null, recovery_ms: null, answer_ms: null, correct: false },
      ]
    })
    const summary = summarizeTwoHost([later, fixture])!
    const rows = linkFaultTable(summary)!.rows
    expect(rows.map((r) => r[0])).toEqual(fixture.faults.map((f) => f.name))
    const byName = Object.fromEntries(rows.map((r) => [r[0], r]))
    expect(byName['loss-1'][1]).toBe('complete')
    expect(byName['loss-1'][8]).toBe('nftables numgen random drop')
    expect(byName['loss-1'][9]).toContain(later.runId)
    expect(byName['cut-short'][9]).toContain(fixture.runId)
    expect(byName['cut-short'][9]).not.toContain('-later')
    expect(twoHostHeadline(summary)).toContain('link faults (newest record of each): 5/5 answered correctly')
  })

  it('RESULTS.md and report.html: the section, the rule and the source with two-host records, none without', async () => {
    const twoHost = join(dir, 'two-host')
    const runs = join(dir, 'runs')
    await mkdir(twoHost, { recursive: true })
    await mkdir(runs, { recursive: true })
    await writeFile(join(twoHost, 'a.json'), JSON.stringify(fixture))
    expect(await readTwoHostRecords(twoHost)).toHaveLength(1)
    const with2 = join(dir, 'with')
    await generateResults(runs, with2, join(dir, 'none'), join(dir, 'none'), join(dir, 'none'), join(dir, 'none'), join(dir, 'none'), twoHost)
    const md = await readFile(join(with2, 'RESULTS.md'), 'utf8')
    expect(md).toContain('### Two hosts over one link')
    expect(md).toContain(`\`${twoHost}/\` (two-host protocol runs)`)
    expect(md).toContain('Two hosts (protocols/two-hosts.mjs, docs/two-hosts.md)')
    expect(md).toContain(fixture.environment.id)
    const html = await readFile(join(with2, 'report.html'), 'utf8')
    expect(html).toContain('<h3>Two hosts over one link</h3>')
    const without = join(dir, 'without')
    await generateResults(runs, without, join(dir, 'none'), join(dir, 'none'), join(dir, 'none'), join(dir, 'none'), join(dir, 'none'), join(dir, 'none'))
    expect(await readFile(join(without, 'RESULTS.md'), 'utf8')).not.toContain('Two hosts')
  })
})
