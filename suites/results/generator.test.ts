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
  // The micro records come from fixtures/micro, the default next to fixtures/runs.
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
  it('each environment gets its own section; only those with runs get charts', async () => {
    const md = await readFile(join(out, 'RESULTS.md'), 'utf8')
    expect(md.match(/^## Environment .*/gm)).toEqual(['## Environment env-a1b2c3', '## Environment env-c7d8e9', '## Environment env-d4e5f6'])
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

describe('micro benchmarks in RESULTS.md', () => {
  /** The lines of environment `id`'s section. */
  async function section (id: string): Promise<string[]> {
    const md = await readFile(join(out, 'RESULTS.md'), 'utf8')
    const part = md.split(/^(?=## Environment )/m).find((p) => p.startsWith(`## Environment ${id}\n`))
    return part!.split('\n')
  }

  it('the environment with runs and micro records has both; the one without micro records has no micro section', async () => {
    expect((await section('env-a1b2c3')).filter((l) => l.startsWith('##'))).toEqual([
      '## Environment env-a1b2c3', '### Cold prompts: decoder alone vs bridged', '### Stage breakdown (medians over complete runs)', '### Payload bytes per bridged token',
      '### Decode rate (tokens/s after the first, medians)', '### Peak memory (highest RSS over all runs)', '### Environment',
      '### Micro benchmarks', '#### Measured peaks (of the records shown)', '#### Kernels', '#### Capture hook',
    ])
    expect((await section('env-d4e5f6')).some((l) => l.includes('Micro benchmarks'))).toBe(false)
  })

  it('an environment with only micro records says it has no runs and shows its micro tables', async () => {
    const c = await section('env-c7d8e9')
    expect(c).toContain('No cold-prompt runs in this environment.')
    expect(c.filter((l) => l.startsWith('##'))).toEqual(['## Environment env-c7d8e9', '### Environment', '### Micro benchmarks', '#### Measured peaks (of the records shown)', '#### Kernels'])
  })

  it('each kernel row sits next to the peak of its own record and environment', async () => {
    const a = await section('env-a1b2c3')
    // The newer record measured 160 GFLOP/s on 2 threads; the older one (counted) 150; machine C 500.
    expect(a).toContain('| matmulF32 | m=1 k=1024 n=1024 | 2 | 40.00 GFLOP/s | 160.00 GFLOP/s | 25.0% | mul+add, 2 threads | tinybench p50 of 1200 | a-kernels-newer | 1 |')
    expect(a).toContain('| rmsNorm | rows=128 d=4096 | 1 | 40.00 GB/s | 100.00 GB/s | 40.0% | copy moving the same 4.0 MiB, 1 thread | tinybench p50 of 200 | a-kernels-older | 0 |')
    expect(a.join('\n')).not.toContain('500.00 GFLOP/s')
    expect(await section('env-c7d8e9')).toContain('| matmulF32 | m=1 k=1024 n=1024 | 8 | 100.00 GFLOP/s | 500.00 GFLOP/s | 20.0% | mul+add, 8 threads | tinybench p50 of 3000 | c-kernels | 0 |')
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
    expect(els.filter((e) => e.name === 'section').length).toBe(3)
    expect(els.filter((e) => e.name === 'svg').length).toBe(4)
    expect(els.filter((e) => e.attrs.class === 'point').length).toBe(7)
    // Self-contained: nothing is loaded from elsewhere.
    expect(els.filter((e) => 'src' in e.attrs || 'href' in e.attrs)).toEqual([])
  })

  it('shows the same headline cells as RESULTS.md', async () => {
    const html = await readFile(join(out, 'report.html'), 'utf8')
    expect(html).toContain('<td>4100</td><td>2</td><td>16.20 s</td><td>6.00 s</td><td>2.67× (1 paired)</td><td>1 complete, 1 declined</td><td>1</td><td>2</td>')
  })

  it('has the micro tables, one per kind, with the same cells as RESULTS.md', async () => {
    const html = await readFile(join(out, 'report.html'), 'utf8')
    const els = parseMarkup(html)
    expect(els.filter((e) => e.name === 'table' && e.attrs.class?.startsWith('micro-')).map((e) => e.attrs.class)).toEqual(['micro-peaks', 'micro-kernels', 'micro-hook', 'micro-peaks', 'micro-kernels'])
    expect(html).toContain('<td>matmulF32</td><td>m=1 k=1024 n=1024</td><td>2</td><td>40.00 GFLOP/s</td><td>160.00 GFLOP/s</td><td>25.0%</td>')
  })
})

describe('the markup checker itself', () => {
  it('rejects a tag closed out of order and a stray ampersand', () => {
    expect(() => parseMarkup('<svg><g></svg></g>')).toThrow(/closes/)
    expect(() => parseMarkup('<svg>a & b</svg>')).toThrow(/stray &/)
    expect(parseMarkup('<svg><g a="1"/></svg>').length).toBe(2)
  })
})
