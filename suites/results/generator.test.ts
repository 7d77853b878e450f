import { mkdtemp, readFile, readdir, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { needleGrids, needleHeatmapSvg } from '../../verify/needle/heatmap.ts'
import { readNeedleRecords } from '../../verify/needle/record.ts'
import { groupDigits, niceTicks } from '../../verify/results/charts.ts'
import { generateResults } from '../../verify/results/generate.ts'
import { headlineOf } from '../../verify/results/headline.ts'
import { readMicroRecords } from '../../verify/results/micro-record.ts'
import { readRunRecords } from '../../verify/results/record.ts'
import { summarize } from '../../verify/results/summary.ts'
import { ratioReading, reportOrder, summaryTables } from '../../verify/results/summary-tables.ts'
import { parseMarkup } from './xml.ts'

const FIXTURES = join(import.meta.dirname, 'fixtures')
const RUNS = join(FIXTURES, 'runs')
const NEEDLE = join(FIXTURES, 'needle', 'runs')
let out: string

beforeAll(async () => {
  out = await mkdtemp(join(tmpdir(), 'pd-results-'))
  // The micro records come from fixtures/micro and the needle records from fixtures/needle/runs,
  // the defaults next to fixtures/runs.
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
  it('each environment gets its own section; only those with runs get charts, only those with needle runs a heatmap', async () => {
    const md = await readFile(join(out, 'RESULTS.md'), 'utf8')
    // Report order: environments with cold-prompt runs, then with needle runs, then the rest.
    expect(md.match(/^## Environment .*/gm)).toEqual(['## Environment env-a1b2c3', '## Environment env-d4e5f6', '## Environment env-f1e2d3', '## Environment env-c7d8e9'])
    const files = (await readdir(out)).sort()
    expect(files).toEqual([
      'RESULTS.md', 'needle-env-a1b2c3.svg', 'needle-env-f1e2d3.svg', 'report.html',
      'stages-env-a1b2c3.svg', 'stages-env-d4e5f6.svg', 'time-env-a1b2c3.svg', 'time-env-d4e5f6.svg',
    ])
  })

  it('the same size in two environments is not merged', async () => {
    const envs = summarize(await readRunRecords(RUNS))
    expect(envs.map((e) => e.sizes.find((s) => s.targetTokens === 1024)!.runs)).toEqual([3, 1])
  })
})

describe('the SVG charts', () => {
  it('are well-formed and the time chart has one point per leg median and one marker per recorded leg', async () => {
    const a = parseMarkup(await readFile(join(out, 'time-env-a1b2c3.svg'), 'utf8'))
    expect(a[0].name).toBe('svg')
    // env A: decoder alone at 3 sizes, bridged (complete) at 2.
    expect(a.filter((e) => e.attrs.class === 'point').length).toBe(5)
    // Every run is plotted: 6 decoder-alone legs, 3 complete bridged legs, and the partial and
    // the declined bridged legs as crosses that are not counted.
    expect(a.filter((e) => e.attrs.class === 'run').length).toBe(6 + 3)
    expect(a.filter((e) => e.attrs.class === 'run not-counted').length).toBe(2)
    const b = parseMarkup(await readFile(join(out, 'time-env-d4e5f6.svg'), 'utf8'))
    expect(b.filter((e) => e.attrs.class === 'point').length).toBe(2)
    expect(b.filter((e) => e.attrs.class?.startsWith('run')).length).toBe(2)
  })

  it('the time chart labels its ticks on both axes, with units, and every point and run has its numbers in a <title>', async () => {
    const svg = await readFile(join(out, 'time-env-a1b2c3.svg'), 'utf8')
    const axis = (which: string) => svg.split('\n').find((l) => l.includes(`<g class="axis ${which}">`))!
    const labels = (line: string) => [...line.matchAll(/<g class="tick">.*?<text[^>]*>([^<]*)<\/text>/g)].map((m) => m[1])
    // x: 0 to 16,390 tokens in steps of 2,500; y: 0 to 70 s in steps of 10 s.
    expect(labels(axis('x'))).toEqual(['0', '2,500', '5,000', '7,500', '10,000', '12,500', '15,000', '17,500'])
    expect(labels(axis('y'))).toEqual(['0 s', '10 s', '20 s', '30 s', '40 s', '50 s', '60 s', '70 s'])
    expect(axis('x')).toContain('>prompt tokens sent</text>')
    expect(axis('y')).toContain('>end-to-end time (seconds)</text>')
    expect(svg).toContain('<title>decoder alone, median of 3 runs: 1029 tokens, 4.2 s</title>')
    expect(svg).toContain('<title>bridged leg, verdict declined: the decoder reported cached_tokens 0, fewer than the 4096 bridged tokens: it prefilled them itself, not counted as bridged, run a-4096-r1-declined: 4099 tokens, 16.8 s</title>')
  })

  it('the stage chart has six segments per size with complete runs and percent ticks', async () => {
    const svg = await readFile(join(out, 'stages-env-a1b2c3.svg'), 'utf8')
    const els = parseMarkup(svg)
    expect(els.filter((e) => e.attrs.class === 'segment').length).toBe(12)
    const x = svg.split('\n').find((l) => l.includes('<g class="axis x">'))!
    expect([...x.matchAll(/<text[^>]*>(\d+%)<\/text>/g)].map((m) => m[1])).toEqual(['0%', '25%', '50%', '75%', '100%'])
    // Each bar's label: its prompt tokens and its median end-to-end time.
    expect(svg).toContain('>1,029</text>')
    expect(svg).toContain('>2.20 s</text>')
  })

  it('nice ticks cover the maximum in the finest step of 1, 2, 2.5 or 5 times a power of ten with at most 8 steps', () => {
    expect(niceTicks(32042)).toEqual([0, 5000, 10000, 15000, 20000, 25000, 30000, 35000])
    expect(niceTicks(26.86)).toEqual([0, 5, 10, 15, 20, 25, 30])
    expect(niceTicks(0.9)).toEqual([0, 0.2, 0.4, 0.6, 0.8, 1])
    expect(niceTicks(70)).toEqual([0, 10, 20, 30, 40, 50, 60, 70])
    expect(niceTicks(16390)).toEqual([0, 2500, 5000, 7500, 10000, 12500, 15000, 17500])
    expect(niceTicks(0.0031)).toEqual([0, 0.0005, 0.001, 0.0015, 0.002, 0.0025, 0.003, 0.0035])
    expect(niceTicks(0)).toEqual([0, 1])
    expect(groupDigits(1234567)).toBe('1,234,567')
    expect(groupDigits(999)).toBe('999')
  })
})

describe('the headline, one line per route', () => {
  it('names each environment by what it is and counts only paired complete runs (the declined 4K run is in neither 2.7x nor the times beside it)', async () => {
    const md = await readFile(join(out, 'RESULTS.md'), 'utf8')
    const lines = md.split('## Summary')[0].split('\n').filter((l) => l.startsWith('- '))
    expect(lines).toContain('- our prefill engine on 2 cores -> our decoder on 2 cores (tiny): 2.7x at 4K (alone 16.0 s, bridged 6.0 s; 1 paired run; also 1.9x at 1K)')
    expect(lines.some((l) => /env-[0-9a-f]/.test(l))).toBe(false)
  })

  it('gives the two legs\' times over the paired runs only: a bridged-only run at that size moves neither', async () => {
    const records = await readRunRecords(RUNS)
    const paired = records.find((r) => r.targetTokens === 4096 && r.native !== null && r.bridged?.verdict === 'complete')!
    const bridgedOnly = structuredClone(paired)
    bridgedOnly.runId = `${paired.runId}-bridged-only`
    bridgedOnly.native = null
    bridgedOnly.bridged!.totalMs = 60000
    const before = headlineOf(summarize(records)).cpu
    const after = headlineOf(summarize([...records, bridgedOnly])).cpu
    expect(after).toEqual(before)
    expect(after.join('\n')).toContain('2.7x at 4K (alone 16.0 s, bridged 6.0 s; 1 paired run')
    // The size's own bridged median does take it in: the table's column counts every complete run.
    expect(summarize([...records, bridgedOnly])[0].sizes.find((s) => s.targetTokens === 4096)!.bridgedMs).toBe(33000)
  })
})

describe('the summary comes first', () => {
  it('RESULTS.md: the headline, the summary, then the counting rules, then one section per environment', async () => {
    const md = await readFile(join(out, 'RESULTS.md'), 'utf8')
    expect(md.match(/^##? .*/gm)!.slice(0, 5)).toEqual(['# pd-bridge results', '## Headline', '## Summary', '## How the numbers are counted', '## Environment env-a1b2c3'])
    expect(md.match(/^### .*/gm)!.slice(0, 4)).toEqual([
      '### Headline: decoder alone vs bridged, cold prompts', '### Verdicts of the bridged legs', '### Needle retrieval tally', '### Environments',
    ])
  })

  it('the headline gives each environment\'s paired ratios, the same cells as its cold-prompt table', async () => {
    const md = await readFile(join(out, 'RESULTS.md'), 'utf8')
    expect(md).toContain('| env-a1b2c3 | embedded tiny (seed 0) | 1029 | 3 | 4.20 s | 2.20 s | 1.92× (2 paired) | bridged faster |')
    // The declined run is not in the bridged time (6.00 s, not 11.40 s) nor in the pairs.
    expect(md).toContain('| env-a1b2c3 | embedded tiny (seed 0) | 4100 | 2 | 16.20 s | 6.00 s | 2.67× (1 paired) | bridged faster |')
    expect(md).toContain('| env-a1b2c3 | embedded tiny (seed 0) | 16390 | 1 | 70.00 s | — | — | no paired run |')
    expect(md).toContain('| env-d4e5f6 | embedded tiny (seed 0) | 1030 | 1 | 0.90 s | 0.60 s | 1.50× (1 paired) | bridged faster |')
    expect(md).toContain('| 4100 | 2 | 16.20 s | 6.00 s | 2.67× (1 paired) |')
  })

  it('the verdict tallies count partial and declined runs apart from complete ones, per environment and kind of record', async () => {
    const md = await readFile(join(out, 'RESULTS.md'), 'utf8')
    expect(md).toContain('| environment | model | records | runs | complete (bridged) | partial (not bridged) | declined (not bridged) | bridged leg not run | refused (reused seed) |')
    expect(md).toContain('| env-a1b2c3 | embedded tiny (seed 0) | cold prompt | 6 | 3 | 1 | 1 | 1 | — |')
    expect(md).toContain('| env-a1b2c3 | embedded tiny (seed 0) | needle | 4 | 2 | 1 | 1 | 0 | 0 |')
    expect(md).toContain('| env-d4e5f6 | embedded tiny (seed 0) | cold prompt | 1 | 1 | 0 | 0 | 0 | — |')
    expect(md).toContain('| env-f1e2d3 | embedded needle (seed 1, blocks of 256) | needle | 4 | 2 | 0 | 0 | 1 | 1 |')
  })

  it('the needle tally has each environment\'s passes over complete runs only', async () => {
    const md = await readFile(join(out, 'RESULTS.md'), 'utf8')
    expect(md).toContain('| env-a1b2c3 | embedded tiny (seed 0) | 4 | 4 (2 x 2) | 1 of 2 | 1 | 2 | 0 | 4 of 4 |')
    expect(md).toContain('| env-f1e2d3 | embedded needle (seed 1, blocks of 256) | 4 | 3 (2 x 2) | 2 of 2 | 0 | 0 | 1 | 2 of 3 |')
  })

  it('a verdict other than complete, partial or declined gets its own column, never counted as bridged', async () => {
    const records = await readRunRecords(RUNS)
    const odd = structuredClone(records.find((r) => r.runId === records[0].runId)!)
    odd.bridged!.verdict = 'fallback: native'
    const [a] = summaryTables(reportOrder(summarize([odd])))
    expect(a.rows[0].slice(5)).toEqual(['—', '—', 'no paired run'])
    const v = summaryTables(reportOrder(summarize([odd])))[1]
    expect(v.headers).toContain('other verdicts (not bridged)')
    expect(v.rows[0].slice(3, 8)).toEqual(['1', '0', '0', '0', '1'])
  })

  it('with no records at all, every summary table says so', () => {
    expect(summaryTables([]).map((t) => [t.rows.length, t.empty])).toEqual([
      [0, 'No cold-prompt runs in any environment.'], [0, 'No cold-prompt or needle runs in any environment.'], [0, 'No needle runs in any environment.'], [0, 'No records yet.'],
    ])
  })

  it('reads a ratio in words on its rounded value', () => {
    expect([ratioReading(1.92), ratioReading(0.75), ratioReading(1.004), ratioReading(null)]).toEqual(['bridged faster', 'bridged slower', 'about even', 'no paired run'])
  })

  it('report.html: the headline, the summary section, then the rules, then the environments, with the headline table first', async () => {
    const els = parseMarkup(await readFile(join(out, 'report.html'), 'utf8'))
    const order = els.filter((e) => e.name === 'section').map((e) => e.attrs.class === 'environment' ? e.attrs['data-env'] : e.attrs.class)
    expect(order).toEqual(['headline', 'summary', 'rules', 'env-a1b2c3', 'env-d4e5f6', 'env-f1e2d3', 'env-c7d8e9'])
    expect(els.find((e) => e.name === 'table')!.attrs.class).toBe('summary-headline')
  })
})

/** The lines of environment `id`'s section of the generated RESULTS.md. */
async function section (id: string): Promise<string[]> {
  const md = await readFile(join(out, 'RESULTS.md'), 'utf8')
  const part = md.split(/^(?=## Environment )/m).find((p) => p.startsWith(`## Environment ${id}\n`))
  return part!.split('\n')
}

describe('micro benchmarks in RESULTS.md', () => {
  it('the environment with runs and micro records has both; the one without micro records has no micro section', async () => {
    expect((await section('env-a1b2c3')).filter((l) => l.startsWith('##'))).toEqual([
      '## Environment env-a1b2c3', '### Cold prompts: decoder alone vs bridged', '### Stage breakdown (medians over complete runs)', '### Payload bytes per bridged token',
      '### Decode rate (tokens/s after the first, medians)', '### Peak memory (highest RSS over all runs)',
      '### Needle retrieval', '### Micro benchmarks', '#### Measured peaks (of the records shown)', '#### Kernels', '#### Capture hook', '### Environment',
    ])
    expect((await section('env-d4e5f6')).some((l) => l.includes('Micro benchmarks'))).toBe(false)
  })

  it('an environment with only micro records says it has no runs and shows its micro tables', async () => {
    const c = await section('env-c7d8e9')
    expect(c).toContain('No cold-prompt runs in this environment.')
    expect(c.filter((l) => l.startsWith('##'))).toEqual(['## Environment env-c7d8e9', '### Micro benchmarks', '#### Measured peaks (of the records shown)', '#### Kernels', '### Environment'])
  })

  it('each kernel row sits next to the peak of its own record and environment', async () => {
    const a = await section('env-a1b2c3')
    // The newer record measured 160 GFLOP/s on 2 threads; the older one (counted) 150; machine C 500.
    // No OpenBLAS row in these records: no ratio (suites/results/micro-tables.test.ts has one).
    expect(a).toContain('| matmulF32 | m=1 k=1024 n=1024 | 2 | 40.00 GFLOP/s | 160.00 GFLOP/s | 25.0% | — | mul+add, 2 threads | tinybench p50 of 1200 | a-kernels-newer | 1 |')
    expect(a).toContain('| rmsNorm | rows=128 d=4096 | 1 | 40.00 GB/s | 100.00 GB/s | 40.0% | — | copy moving the same 4.0 MiB, 1 thread | tinybench p50 of 200 | a-kernels-older | 0 |')
    expect(a.join('\n')).not.toContain('500.00 GFLOP/s')
    expect(await section('env-c7d8e9')).toContain('| matmulF32 | m=1 k=1024 n=1024 | 8 | 100.00 GFLOP/s | 500.00 GFLOP/s | 20.0% | — | mul+add, 8 threads | tinybench p50 of 3000 | c-kernels | 0 |')
  })

  it('the hook rows give time per token, share of the forward, payload vs minimum and say how they were timed', async () => {
    const a = await section('env-a1b2c3')
    // 64 ms over 1024 tokens is 62.5 µs a token and 10.7% of a 600 ms forward; 948 / 393 B is 2.412×.
    expect(a).toContain('| capture hook | tiny T=1024 | 2 | 62.5 µs | 10.7% | 12.0% | 948.0 B | 393.0 B | 933.0 B | 2.412× | 0.10 GB/s of 100.00 GB/s (0.1%) | 45.00 GFLOP/s | 180.00 GFLOP/s | 25.0% | mul+add, 2 threads | tinybench p50 of 12 | a-hook-tiny | 0 |')
    expect(a.find((l) => l.startsWith('| capture hook | tiny T=4096 |'))).toContain('| median of 3 timed |')
  })
})

describe('report.html', () => {
  it('is well-formed, self-contained and holds every environment, charts only where there are runs', async () => {
    const html = await readFile(join(out, 'report.html'), 'utf8')
    const els = parseMarkup(html)
    expect(els[0].name).toBe('html')
    expect(els.filter((e) => e.name === 'section' && e.attrs.class === 'environment').length).toBe(4)
    // Every table sits in a box that scrolls sideways when it is wider than the page.
    const tables = els.filter((e) => e.name === 'table').length
    expect(els.filter((e) => e.name === 'div' && e.attrs.class === 'table-wrap').length).toBe(tables)
    // 2 charts each in the two environments with runs, a heatmap each in the two with needle runs.
    expect(els.filter((e) => e.name === 'svg').length).toBe(6)
    expect(els.filter((e) => e.attrs.class === 'point').length).toBe(7)
    // Self-contained: nothing is loaded from elsewhere.
    expect(els.filter((e) => 'src' in e.attrs || 'href' in e.attrs)).toEqual([])
  })

  it('shows the same headline cells as RESULTS.md', async () => {
    const html = await readFile(join(out, 'report.html'), 'utf8')
    // Words are left-aligned (class text), quantities right-aligned.
    expect(html).toContain('<td>4100</td><td>2</td><td>16.20 s</td><td>6.00 s</td><td>2.67× (1 paired)</td><td class="text">1 complete, 1 declined</td><td>1</td><td>2</td>')
  })

  it('has the micro tables, one per kind, with the same cells as RESULTS.md', async () => {
    const html = await readFile(join(out, 'report.html'), 'utf8')
    const els = parseMarkup(html)
    expect(els.filter((e) => e.name === 'table' && e.attrs.class?.startsWith('micro-')).map((e) => e.attrs.class)).toEqual(['micro-peaks', 'micro-kernels', 'micro-hook', 'micro-peaks', 'micro-kernels'])
    expect(html).toContain('<td class="text">matmulF32</td><td class="text">m=1 k=1024 n=1024</td><td>2</td><td>40.00 GFLOP/s</td><td>160.00 GFLOP/s</td><td>25.0%</td>')
  })
})

describe('needle retrieval in RESULTS.md', () => {
  /** The lines of `id`'s needle section, from its heading up to the next heading. */
  async function needleLines (id: string): Promise<string[]> {
    const lines = await section(id)
    const from = lines.indexOf('### Needle retrieval')
    expect(from).toBeGreaterThan(0)
    const to = lines.findIndex((l, i) => i > from && l.startsWith('#'))
    return lines.slice(from, to === -1 ? undefined : to)
  }

  it('the environment with cold runs has its depth x length grid, a declined and a partial run never as bridged passes', async () => {
    const a = await needleLines('env-a1b2c3')
    expect(a).toContain('| depth \\ tokens | 512 | 2048 |')
    expect(a).toContain('| 0 | bridged 1 pass · native 1 pass | bridged 1 miss · native 1 pass |')
    // Both runs at depth 1 hit the needle, but their verdicts were not complete.
    expect(a).toContain('| 1 | bridged 1 not bridged (partial 256/507) · native 1 pass | bridged 1 not bridged (declined [1]) · native 1 pass |')
    expect(a).toContain('Bridged: 1 pass, 1 miss (of 2 complete), 2 not bridged, 0 refused. Native: 4 pass, 0 miss.')
    expect(a).toContain('- [1] declined: prefill engine unreachable (connect ECONNREFUSED 127.0.0.1:8011)')
    expect(a).toContain('4 runs in 4 cells (2 lengths x 2 depths). Through the bridge (complete verdicts only), 1 of 2 retrieved the needle and 1 missed. 2 runs were not bridged (partial or declined) and count as neither pass nor miss. The decoder alone retrieved 4 of 4.')
    expect(a).toContain('![needle retrieval heatmap, depth x prompt tokens](needle-env-a1b2c3.svg)')
  })

  it('an environment with only needle runs gets a section with its grid; the refused run is counted as refused, not run', async () => {
    const f = await section('env-f1e2d3')
    expect(f).toContain('No cold-prompt runs in this environment.')
    expect(f.filter((l) => l.startsWith('##'))).toEqual(['## Environment env-f1e2d3', '### Needle retrieval', '### Environment'])
    expect(f).toContain('| 0.5 | bridged 1 pass · native 1 pass | bridged 1 pass, 1 refused (reused seed) · native 1 pass, 1 refused |')
    expect(f).toContain('| 1 | — | bridged 1 not run · native 1 miss |')
    expect(f).toContain('Bridged: 2 pass, 0 miss (of 2 complete), 0 not bridged, 1 refused. Native: 2 pass, 1 miss.')
    expect(f.join('\n')).toContain('1 run was refused before running (a reused seed); 1 run had no bridged leg. The decoder alone retrieved 2 of 3.')
  })

  it('records are never compared across environments: each grid has only its own lengths and runs', async () => {
    expect((await needleLines('env-a1b2c3')).join('\n')).not.toContain('4096')
    expect((await needleLines('env-f1e2d3')).join('\n')).not.toContain('2048')
    const envs = summarize(await readRunRecords(RUNS), await readMicroRecords(join(FIXTURES, 'micro')), await readNeedleRecords(NEEDLE))
    expect(envs.map((e) => e.needle?.lengths ?? null)).toEqual([[512, 2048], null, null, [512, 4096]])
    // The needle runs' commit joins the environment's commits; the needle-only one has no sizes.
    expect(envs[0].commits).toEqual(['1111111', '3333333', '5555555'])
    expect(envs[3].sizes).toEqual([])
  })

  it('each heatmap file is the needle renderer\'s SVG of its own environment\'s records, one cell rect per recorded cell', async () => {
    const grids = needleGrids(await readNeedleRecords(NEEDLE))
    expect(grids.map((g) => g.environment.id)).toEqual(['env-a1b2c3', 'env-f1e2d3'])
    for (const [grid, cells] of [[grids[0], 4], [grids[1], 3]] as const) {
      const svg = await readFile(join(out, `needle-${grid.environment.id}.svg`), 'utf8')
      expect(svg).toBe(needleHeatmapSvg(grid))
      const els = parseMarkup(svg)
      // Cell rects sit in a <g> with a <title>; the legend's rects do not.
      const groups = els.filter((e) => e.name === 'g').length
      expect(groups).toBe(cells)
      expect(grid.cells.flat().filter((c) => c !== null).length).toBe(cells)
    }
  })
})

describe('needle retrieval in report.html', () => {
  it('has the same cells, words, tally and footnotes as RESULTS.md, and the heatmap inlined', async () => {
    const html = await readFile(join(out, 'report.html'), 'utf8')
    const md = await readFile(join(out, 'RESULTS.md'), 'utf8')
    const els = parseMarkup(html)
    const grids = els.filter((e) => e.name === 'table' && e.attrs.class === 'needle-grid')
    expect(grids.length).toBe(2)
    expect(html).toContain('<tr><td>1</td><td class="text">bridged 1 not bridged (partial 256/507) · native 1 pass</td><td class="text">bridged 1 not bridged (declined [1]) · native 1 pass</td></tr>')
    expect(html).toContain('<tr><td>1</td><td class="text">—</td><td class="text">bridged 1 not run · native 1 miss</td></tr>')
    const tallies = els.filter((e) => e.name === 'p' && e.attrs.class === 'needle-tally').map((e) => e.text)
    expect(tallies).toEqual(md.split('\n').filter((l) => l.startsWith('Bridged: ')))
    const words = els.filter((e) => e.name === 'p' && e.attrs.class === 'needle-words').map((e) => e.text)
    expect(words.length).toBe(2)
    for (const w of words) expect(md.split('\n')).toContain(w)
    expect(els.filter((e) => e.name === 'li' && e.text.startsWith('[1] declined: prefill engine unreachable')).length).toBe(1)
    const svg = await readFile(join(out, 'needle-env-f1e2d3.svg'), 'utf8')
    expect(html).toContain(svg)
  })
})

describe('the markup checker itself', () => {
  it('rejects a tag closed out of order and a stray ampersand', () => {
    expect(() => parseMarkup('<svg><g></svg></g>')).toThrow(/closes/)
    expect(() => parseMarkup('<svg>a & b</svg>')).toThrow(/stray &/)
    expect(parseMarkup('<svg><g a="1"/></svg>').length).toBe(2)
  })
})
