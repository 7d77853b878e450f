// The warm-extend section of RESULTS.md and report.html, from a fixture warm record (no stack runs
// here: protocols/warm-extend.mjs is the real run). The schema holds the proof's counting rules
// (never more identical blocks than keys; differences listed exactly when some block differs), the
// headline counts the runs proved bit-exact against the decoder alone, the table has one row per
// run, an environment with only warm records still gets its section, and without warm records the
// report has no warm section at all.
import { mkdtemp, mkdir, readFile, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { generateResults } from '../../verify/results/generate.ts'
import { summarize } from '../../verify/results/summary.ts'
import { parseWarmRecord, readWarmRecords, warmBitExact, type WarmRecord } from '../../verify/results/warm-record.ts'
import { summarizeWarm, warmHeadline, warmTable, warmTables } from '../../verify/results/warm-section.ts'

const FIXTURE = join(import.meta.dirname, 'fixtures', 'warm-run.json')

let dir: string
let fixture: WarmRecord
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'pd-warm-section-'))
  fixture = parseWarmRecord(JSON.parse(await readFile(FIXTURE, 'utf8')), FIXTURE)
})
afterAll(async () => {
  await rm(dir, { recursive: true, force: true })
})

/** A deep copy of the fixture with `change` applied. */
function changed (change: (r: WarmRecord) => void): WarmRecord {
  const r = structuredClone(fixture)
  change(r)
  return r
}

/** An earlier run whose warm leg was not proved: one block differs and the answers differ. */
function differing (): WarmRecord {
  return changed((r) => {
    r.runId = 'warm-fixture-0'
    r.startedAt = '2026-01-05T00:00:00.000Z'
    r.answersAgree = false
    r.blocks = { keys: 38, identical: 37, differences: ['block 12 (tokens 3072-3328): layer 3 k differs'] }
    r.warm.stagesMs.carry = null
  })
}

const ROW = ['warm-fixture-a', '1,600', '9,800', '1,536', '8,192', 'complete (warm: 8192 tokens bridged from boundary 1536)',
  '4.21 s', '3.15 s', '0.31 s', '5.12 s', '4.30 s', '7.34 s', '38/38', 'equal']

describe('the schema', () => {
  it('reads the fixture back as it is, and the fixture is bit-exact', () => {
    expect(parseWarmRecord(JSON.parse(JSON.stringify(fixture)), 'a.json')).toEqual(fixture)
    expect(warmBitExact(fixture)).toBe(true)
    expect(warmBitExact(differing())).toBe(false)
    expect(warmBitExact(changed((r) => { r.warm.resumedFrom = null }))).toBe(false)
  })

  it('refuses more identical blocks than keys, and differences listed while every block is identical', () => {
    expect(() => parseWarmRecord(changed((r) => { r.blocks.identical = 39 }), 'i.json')).toThrow(/^i\.json: warm record field blocks\.identical: is more than the 38 keys$/)
    expect(() => parseWarmRecord(changed((r) => { r.blocks.differences = ['block 3 differs'] }), 'd.json')).toThrow(/^d\.json: warm record field blocks\.differences: must be empty exactly when every block is identical$/)
    expect(() => parseWarmRecord(changed((r) => { r.blocks.identical = 37 }), 'e.json')).toThrow(/^e\.json: warm record field blocks\.differences: must be empty exactly when every block is identical$/)
    expect(() => parseWarmRecord({ ...fixture, schema: 'pd-bridge/warm-run@0' }, 's.json')).toThrow(/s\.json: warm record field schema/)
  })
})

describe('the headline and the table', () => {
  it('no runs, no summary; runs sorted by start then run id', () => {
    expect(summarizeWarm([])).toBeNull()
    const later = changed((r) => { r.runId = 'warm-fixture-b' })
    expect(summarizeWarm([later, fixture, differing()])!.runs.map((r) => r.runId)).toEqual(['warm-fixture-0', 'warm-fixture-a', 'warm-fixture-b'])
  })

  it('the headline counts the runs bit-exact against the decoder alone', () => {
    expect(warmHeadline(summarizeWarm([fixture])!)).toBe('warm-extended: 1 run, 1 bit-exact against the decoder alone')
    expect(warmHeadline(summarizeWarm([fixture, differing()])!)).toBe('warm-extended: 2 runs, 1 bit-exact against the decoder alone')
  })

  it('one row per run: prompts with thousands separators, where it resumed, the three legs, the proof', () => {
    const t = warmTable(summarizeWarm([fixture, differing()])!)
    expect(t.title).toBe('Warm-extended prompts: bridged from the last stored boundary')
    expect(t.headers).toEqual(['run', 'prompt A', 'prompt B', 'resumed from', 'bridged', 'verdict', 'warm end to end', 'warm engine prefill', 'carry',
      'from 0 end to end', 'from 0 engine prefill', 'decoder alone', 'blocks identical', 'answers'])
    expect(t.rows).toEqual([
      ['warm-fixture-0', '1,600', '9,800', '1,536', '8,192', 'complete (warm: 8192 tokens bridged from boundary 1536)', '4.21 s', '3.15 s', '—', '5.12 s', '4.30 s', '7.34 s', '37/38', 'differ'],
      ROW,
    ])
    const declined = changed((r) => { r.warm.resumedFrom = null; r.warm.verdict = 'complete'; r.warm.warmDeclined = 'no stored boundary' })
    expect(warmTable(summarizeWarm([declined])!).rows[0][3]).toBe('—')
  })

  it('an environment with only warm records is in the summary', () => {
    const envs = summarize([], [], [], [], [], [fixture])
    expect(envs.map((e) => e.environment.id)).toEqual(['env-3a7f'])
    expect(envs[0].warm!.runs).toEqual([fixture])
    expect(envs[0].load).toBeNull()
    expect(summarize([], [], [], [], [], [])).toEqual([])
  })
})

describe('RESULTS.md and report.html', () => {
  it('an environment with warm records gets the section after load: headline, table, rule, source', async () => {
    const warm = join(dir, 'warm')
    await mkdir(warm)
    await writeFile(join(warm, 'b.json'), JSON.stringify(fixture))
    await writeFile(join(warm, 'a.json'), JSON.stringify(differing()))
    expect((await readWarmRecords(warm)).map((r) => r.runId)).toEqual(['warm-fixture-0', 'warm-fixture-a'])
    const out = join(dir, 'out')
    const r = await generateResults(join(dir, 'runs'), out, join(dir, 'micro'), join(dir, 'needle'), join(dir, 'faults'), join(dir, 'load'), warm)
    expect(r.warmRecords).toBe(2)
    expect(r.environments).toBe(1)
    const md = await readFile(join(out, 'RESULTS.md'), 'utf8')
    expect(md).toContain(`and \`${warm}/\` (warm-extend protocol runs); do not edit by hand.`)
    expect(md.match(/^## Environment .*/gm)).toEqual(['## Environment env-3a7f'])
    const headline = warmHeadline(summarizeWarm([fixture, differing()])!)
    expect(md).toContain(`### Warm-extended prompts\n\n${headline}.\n\n#### Warm-extended prompts: bridged from the last stored boundary\n`)
    expect(md).toContain(`| ${ROW.join(' | ')} |`)
    expect(md).toContain('| warm-fixture-0 | 1,600 | 9,800 | 1,536 | 8,192 |')
    expect(md).toContain('- Warm-extended prompts (protocols/warm-extend.mjs, docs/warm-extend.md):')
    const html = await readFile(join(out, 'report.html'), 'utf8')
    expect(html).toContain('<h3>Warm-extended prompts</h3>')
    expect(html).toContain(`<p class="warm-headline">${headline}.</p>`)
    expect(html).toContain('<h4>Warm-extended prompts: bridged from the last stored boundary</h4>')
    expect(html).toContain('<table class="warm-table">')
    expect(html).toContain('<td class="text">warm-fixture-a</td>')
    expect(html).toContain('warm-extend protocol runs')
  })

  it('the warm section follows the load section of the same environment', async () => {
    const load = JSON.parse(await readFile(join(import.meta.dirname, 'fixtures', 'load-run.json'), 'utf8'))
    const loadDir = join(dir, 'with-load', 'load')
    const warmDir = join(dir, 'with-load', 'warm')
    await mkdir(loadDir, { recursive: true })
    await mkdir(warmDir, { recursive: true })
    await writeFile(join(loadDir, 'a.json'), JSON.stringify(load))
    await writeFile(join(warmDir, 'a.json'), JSON.stringify(changed((r) => { r.environment = load.environment })))
    const out = join(dir, 'out-load')
    // The default warm directory: warm/ next to the runs directory.
    const r = await generateResults(join(dir, 'with-load', 'runs'), out, undefined, undefined, undefined, loadDir)
    expect(r.warmRecords).toBe(1)
    const md = await readFile(join(out, 'RESULTS.md'), 'utf8')
    expect(md.match(/^## Environment .*/gm)).toEqual(['## Environment env-10ad'])
    const at = md.indexOf('### Warm-extended prompts')
    expect(md.indexOf('### Load')).toBeGreaterThan(-1)
    expect(at).toBeGreaterThan(md.indexOf('### Load'))
    expect(warmTables(summarizeWarm([fixture])!)).toHaveLength(1)
  })

  it('without warm records there is no warm section, no warm rule and no warm source', async () => {
    const out = join(dir, 'out-none')
    const r = await generateResults(join(dir, 'runs'), out, join(dir, 'micro'), join(dir, 'needle'), join(dir, 'faults'), join(dir, 'load'), join(dir, 'no-warm'))
    expect(r.warmRecords).toBe(0)
    const md = await readFile(join(out, 'RESULTS.md'), 'utf8')
    expect(md).not.toContain('Warm-extended prompts')
    expect(md).not.toContain('protocols/warm-extend.mjs')
    expect(md).not.toContain('(warm-extend protocol runs)')
    const html = await readFile(join(out, 'report.html'), 'utf8')
    expect(html).not.toContain('Warm-extended prompts')
  })
})
