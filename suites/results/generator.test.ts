import { mkdtemp, readFile, readdir, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { generateResults } from '../../src/results/generate.ts'
import { readRunRecords } from '../../src/results/record.ts'
import { summarize } from '../../src/results/summary.ts'
import { parseMarkup } from './xml.ts'

const FIXTURES = join(import.meta.dirname, 'fixtures')
const RUNS = join(FIXTURES, 'runs')
let out: string

beforeAll(async () => {
  out = await mkdtemp(join(tmpdir(), 'pd-results-'))
  await generateResults(RUNS, out)
})
afterAll(async () => {
  await rm(out, { recursive: true, force: true })
})

describe('RESULTS.md from the fixture runs', () => {
  it('equals the committed golden file byte for byte', async () => {
    const made = await readFile(join(out, 'RESULTS.md'), 'utf8')
    const golden = await readFile(join(FIXTURES, 'RESULTS.golden.md'), 'utf8')
    expect(made).toBe(golden)
  })
})

describe('a declined run is never bridged', () => {
  it('the 4096 row times only the complete run and lists the declined one as declined', async () => {
    const md = await readFile(join(out, 'RESULTS.md'), 'utf8')
    const row = md.split('\n').find((l) => l.startsWith('| 4100 | 2 |'))
    // The complete run took 6.0 s, the declined one 16.8 s: a median over both would be 11.40 s.
    expect(row).toBe('| 4100 | 2 | 16.20 s | 6.00 s | 2.67× (1 paired) | 1 complete, 1 declined | 1 | 2 |')
  })

  it('the summary leaves the declined run out of every bridged number', async () => {
    const records = await readRunRecords(RUNS)
    const a4096 = summarize(records)[0].sizes.find((s) => s.targetTokens === 4096)!
    expect(a4096.bridgedMs).toBe(6000)
    expect(a4096.pairs).toBe(1)
    expect(a4096.verdicts).toEqual({ complete: 1, declined: 1 })
  })
})

describe('a partial run is recorded as partial', () => {
  it('counts under verdicts and not in the bridged median', async () => {
    const records = await readRunRecords(RUNS)
    const a1024 = summarize(records)[0].sizes.find((s) => s.targetTokens === 1024)!
    // Complete runs took 2000 and 2400 ms; the partial one 3900 ms would move the median to 2400.
    expect(a1024.bridgedMs).toBe(2200)
    expect(a1024.verdicts).toEqual({ complete: 2, partial: 1 })
  })
})

describe('environments are kept apart', () => {
  it('each environment gets its own section and its own charts', async () => {
    const md = await readFile(join(out, 'RESULTS.md'), 'utf8')
    expect(md.match(/^## Environment /gm)).toHaveLength(2)
    const files = (await readdir(out)).sort()
    expect(files).toEqual(['RESULTS.md', 'report.html', 'stages-env-a1b2c3.svg', 'stages-env-d4e5f6.svg', 'time-env-a1b2c3.svg', 'time-env-d4e5f6.svg'])
  })

  it('the same size in two environments is not merged', async () => {
    const envs = summarize(await readRunRecords(RUNS))
    expect(envs.map((e) => e.sizes.find((s) => s.targetTokens === 1024)!.runs)).toEqual([3, 1])
  })
})

describe('the SVG charts', () => {
  it('are well-formed and the time chart has one point per leg median', async () => {
    const a = parseMarkup(await readFile(join(out, 'time-env-a1b2c3.svg'), 'utf8'))
    expect(a[0].name).toBe('svg')
    // env A: decoder alone at 3 sizes, bridged (complete) at 2.
    expect(a.filter((e) => e.attrs.class === 'point').length).toBe(5)
    const b = parseMarkup(await readFile(join(out, 'time-env-d4e5f6.svg'), 'utf8'))
    expect(b.filter((e) => e.attrs.class === 'point').length).toBe(2)
  })

  it('the stage chart has six segments per size with complete runs', async () => {
    const els = parseMarkup(await readFile(join(out, 'stages-env-a1b2c3.svg'), 'utf8'))
    expect(els.filter((e) => e.attrs.class === 'segment').length).toBe(12)
  })
})

describe('report.html', () => {
  it('is well-formed, self-contained and holds both environments with their charts inline', async () => {
    const html = await readFile(join(out, 'report.html'), 'utf8')
    const els = parseMarkup(html)
    expect(els[0].name).toBe('html')
    expect(els.filter((e) => e.name === 'section').length).toBe(2)
    expect(els.filter((e) => e.name === 'svg').length).toBe(4)
    expect(els.filter((e) => e.attrs.class === 'point').length).toBe(7)
    // Self-contained: nothing is loaded from elsewhere.
    expect(els.filter((e) => 'src' in e.attrs || 'href' in e.attrs)).toEqual([])
  })

  it('shows the same headline cells as RESULTS.md', async () => {
    const html = await readFile(join(out, 'report.html'), 'utf8')
    expect(html).toContain('<td>4100</td><td>2</td><td>16.20 s</td><td>6.00 s</td><td>2.67× (1 paired)</td><td>1 complete, 1 declined</td><td>1</td><td>2</td>')
  })
})

describe('the markup checker itself', () => {
  it('rejects a tag closed out of order and a stray ampersand', () => {
    expect(() => parseMarkup('<svg><g></svg></g>')).toThrow(/closes/)
    expect(() => parseMarkup('<svg>a & b</svg>')).toThrow(/stray &/)
    expect(parseMarkup('<svg><g a="1"/></svg>').length).toBe(2)
  })
})
