// The cost chart: µs per bridged token by stage vs prompt tokens, one per environment with
// complete bridged runs at 3 sizes or more. Records are built here on the layout of a committed
// bridged-only record (results/runs/2026-12-03T16-50-22-788Z-524288-r0-3742227899.json, whose
// numbers the 524,288 size reuses) and checked by parseRunRecord; the chart's numbers are read from
// costPerTokenData, the SVG and the report files from generateResults into a temp directory.
import { mkdir, mkdtemp, readFile, readdir, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { costChartNote, costPerTokenChart, costPerTokenData, formatUs, hasCostChart } from '../../verify/results/cost-chart.ts'
import { generateResults } from '../../verify/results/generate.ts'
import { parseRunRecord, type BridgedLeg, type RunRecord } from '../../verify/results/record.ts'
import { chartFiles, renderHtml, renderMarkdown } from '../../verify/results/render.ts'
import { summarize } from '../../verify/results/summary.ts'
import { parseMarkup } from './xml.ts'

type Stages = BridgedLeg['stagesMs']

const ENV_ID = 'env-cost-49936b'

let serial = 0

/** A bridged-only run record at `targetTokens`, built like the committed 524,288-token one. */
function run (targetTokens: number, promptTokens: number, stages: Omit<Stages, 'bridgeTotal'>, over: { verdict?: string, bridgedTokens?: number, envId?: string } = {}): RunRecord {
  serial++
  const known = Object.values(stages).reduce<number>((a, v) => a + (v ?? 0), 0)
  const json = {
    schema: 'pd-bridge/cold-run@1',
    runId: `cost-${targetTokens}-r${serial}`,
    startedAt: new Date(Date.UTC(2026, 11, 3, 16, 0, serial)).toISOString(),
    environment: {
      id: over.envId ?? ENV_ID,
      cpu: 'AMD EPYC',
      cores: 2,
      memoryBytes: 25276071936,
      node: 'v20.20.2',
      os: 'linux 6.18.44-fc-v1147 x64',
      configFingerprint: 'b24db3ea20bb',
      model: 'embedded long (seed 1, blocks of 256)',
      commit: '3f246dd',
    },
    targetTokens,
    seed: 1000 + serial,
    repeat: 0,
    answerBudget: 32,
    native: null,
    bridged: {
      totalMs: known + 3000,
      ttftMs: known + 100,
      promptTokens,
      completionTokens: 32,
      finishReason: 'length',
      verdict: over.verdict ?? 'complete',
      route: 'bridge',
      bridgedTokens: over.bridgedTokens ?? targetTokens,
      stagesMs: { ...stages, bridgeTotal: known },
      bytes: { capture: targetTokens * 652, fetched: targetTokens * 652, blocks: targetTokens * 651 },
      capturePeakHeldBytes: 364544,
      captureSpill: true,
    },
    peakMemoryBytes: { protocol: 370814976, share: 158048256, 'prefill-engine': 1371082752, decoder: 1454374912, front: 397537280 },
    answersAgree: null,
  }
  return parseRunRecord(json, `${json.runId}.json`)
}

/** Stage ms that make `us` µs per token at `tokens` bridged tokens (null stays null). */
function perToken (tokens: number, us: { enginePrefill: number | null, transfer: number | null, assembly: number | null, blockWrite: number | null, decoderTtft: number | null }): Omit<Stages, 'bridgeTotal'> {
  const ms = (v: number | null) => v === null ? null : (v * tokens) / 1000
  return { enginePrefill: ms(us.enginePrefill), transfer: ms(us.transfer), assembly: ms(us.assembly), blockWrite: ms(us.blockWrite), decoderTtft: ms(us.decoderTtft) }
}

/** The committed record's stage times (524,288 bridged tokens of 524,319 sent). */
const REAL_STAGES = { enginePrefill: 1417823.8, transfer: 4628.8, assembly: 11928.5, blockWrite: 38167.5, decoderTtft: 18227 }

/** Three sizes: two complete runs at 131,072 (plus ones that must not count), one each at 262,144 and 524,288. */
function threeSizes (): RunRecord[] {
  return [
    run(131072, 131103, perToken(131072, { enginePrefill: 1000, transfer: 10, assembly: 20, blockWrite: 100, decoderTtft: 5 })),
    run(131072, 131105, perToken(131072, { enginePrefill: 2000, transfer: null, assembly: 30, blockWrite: 100, decoderTtft: 15 })),
    // Not counted: a partial verdict, and a complete one that bridged no tokens.
    run(131072, 131104, perToken(131072, { enginePrefill: 90000, transfer: 90000, assembly: 90000, blockWrite: 90000, decoderTtft: 90000 }), { verdict: 'partial 65536/131104' }),
    run(131072, 131104, perToken(131072, { enginePrefill: 90000, transfer: 90000, assembly: 90000, blockWrite: 90000, decoderTtft: 90000 }), { bridgedTokens: 0 }),
    run(262144, 262175, perToken(262144, { enginePrefill: 3000, transfer: 10, assembly: 20, blockWrite: 100, decoderTtft: 10 })),
    run(524288, 524319, REAL_STAGES),
    run(524288, 524320, REAL_STAGES, { verdict: 'declined: the decoder reported cached_tokens 0' }),
  ]
}

describe('costPerTokenData', () => {
  it('gives each size the median over its complete runs of stage ms * 1000 / bridged tokens, by stage', () => {
    const [env] = summarize(threeSizes())
    const d = costPerTokenData(env)
    expect(d.targetTokens).toEqual([131072, 262144, 524288])
    // The median of the two complete runs' prompt tokens; the partial and zero-token runs are left out.
    expect(d.promptTokens).toEqual([131104, 262175, 524319])
    expect(d.runs).toEqual([2, 1, 1])
    const close = (got: Array<number | null>, want: Array<number | null>) => {
      expect(got.length).toBe(want.length)
      got.forEach((g, i) => want[i] === null ? expect(g).toBeNull() : expect(g).toBeCloseTo(want[i]!, 6))
    }
    close(d.usPerToken.enginePrefill, [1500, 3000, 1417823.8 * 1000 / 524288])
    // One of the two runs at 131,072 did not time the transfer: the median is the other's.
    close(d.usPerToken.transfer, [10, 10, 4628.8 * 1000 / 524288])
    close(d.usPerToken.assembly, [25, 20, 11928.5 * 1000 / 524288])
    close(d.usPerToken.blockWrite, [100, 100, 38167.5 * 1000 / 524288])
    close(d.usPerToken.decoderTtft, [10, 10, 18227 * 1000 / 524288])
    expect(d.timed.transfer).toEqual([1, 1, 1])
    expect(d.timed.enginePrefill).toEqual([2, 1, 1])
    expect(hasCostChart(env)).toBe(true)
  })

  it('a stage no counted run timed is null at that size', () => {
    const records = threeSizes().map((r) => {
      if (r.targetTokens === 262144) r.bridged!.stagesMs.assembly = null
      return r
    })
    const d = costPerTokenData(summarize(records)[0])
    expect(d.usPerToken.assembly[1]).toBeNull()
    expect(d.timed.assembly).toEqual([2, 0, 1])
  })

  it('formats a value as its point title gives it', () => {
    expect(formatUs(1417823.8 * 1000 / 524288)).toBe('2704')
    expect(formatUs(4628.8 * 1000 / 524288)).toBe('8.829')
    expect(formatUs(72.798919677734375)).toBe('72.8')
    expect(formatUs(0.012345)).toBe('0.01235')
  })
})

describe('which environments get a cost chart', () => {
  it('one with complete bridged runs at only 2 sizes gets none: no file name, no image in RESULTS.md, no figure in report.html', () => {
    const envs = summarize(threeSizes().filter((r) => r.targetTokens !== 524288))
    expect(costPerTokenData(envs[0]).targetTokens).toEqual([131072, 262144])
    expect(hasCostChart(envs[0])).toBe(false)
    expect(chartFiles(envs[0]).cost).toBeNull()
    const md = renderMarkdown(envs)
    expect(md).toContain('![stage shares](stages-env-cost-49936b.svg)')
    expect(md).not.toContain('cost-env-cost-49936b.svg')
    expect(md).not.toContain('Cost chart:')
    expect(renderHtml(envs)).not.toContain('chart cost')
  })

  it('a size whose only complete run bridged no tokens does not count toward the 3', () => {
    const records = threeSizes().filter((r) => r.targetTokens !== 524288)
    records.push(run(524288, 524319, REAL_STAGES, { bridgedTokens: 0 }))
    expect(hasCostChart(summarize(records)[0])).toBe(false)
  })
})

describe('the cost chart in the generated report', () => {
  let dir: string
  let out: string
  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'pd-cost-chart-'))
    const runs = join(dir, 'runs')
    await mkdir(runs)
    // A second environment with 2 sizes only: charts, but no cost chart.
    const other = threeSizes().filter((r) => r.targetTokens !== 524288).map((r) => ({ ...r, environment: { ...r.environment, id: 'env-two-sizes' } }))
    for (const r of [...threeSizes(), ...other]) await writeFile(join(runs, `${r.runId}-${r.environment.id}.json`), JSON.stringify(r, null, 2))
    out = join(dir, 'out')
    await generateResults(runs, out)
  })
  afterAll(async () => {
    await rm(dir, { recursive: true, force: true })
  })

  it('writes cost-<slug>.svg only for the environment with 3 sizes', async () => {
    const files = (await readdir(out)).sort()
    expect(files).toEqual([
      'RESULTS.md', 'cost-env-cost-49936b.svg', 'report.html',
      'stages-env-cost-49936b.svg', 'stages-env-two-sizes.svg', 'time-env-cost-49936b.svg', 'time-env-two-sizes.svg',
    ])
  })

  it('RESULTS.md embeds it right after the stage shares, with its note', async () => {
    const md = (await readFile(join(out, 'RESULTS.md'), 'utf8')).split('\n')
    const at = md.indexOf('![stage shares](stages-env-cost-49936b.svg)')
    expect(at).toBeGreaterThan(0)
    expect(md.slice(at + 1, at + 5)).toEqual([
      '', '![cost per bridged token by stage vs prompt tokens](cost-env-cost-49936b.svg)', '',
      'Cost chart: µs per bridged token by stage, median per size over complete bridged runs (4 runs at 3 prompt sizes; both axes log scale); flat lines are linear costs, rising ones grow faster than the prompt.',
    ])
    expect(md.filter((l) => l.startsWith('![cost per bridged token'))).toHaveLength(1)
  })

  it('report.html inlines the same SVG after the stage chart, in a figure of class chart cost, with the note', async () => {
    const html = await readFile(join(out, 'report.html'), 'utf8')
    const svg = await readFile(join(out, 'cost-env-cost-49936b.svg'), 'utf8')
    expect(html).toContain(`<figure class="chart cost">\n${svg}<figcaption class="readout"></figcaption></figure>`)
    const stage = html.indexOf('<figure class="chart stages">')
    const cost = html.indexOf('<figure class="chart cost">')
    expect(stage).toBeGreaterThan(0)
    expect(cost).toBeGreaterThan(stage)
    expect(html.indexOf('<figure class="chart cost">', cost + 1)).toBe(-1)
    const [env] = summarize(threeSizes())
    expect(html).toContain(`<p class="chart-note">${costChartNote(env)}</p>`)
    const els = parseMarkup(html)
    expect(els.filter((e) => e.name === 'figure' && e.attrs.class === 'chart cost')).toHaveLength(1)
  })

  it('the SVG has one line and one point per size for each stage, its values in the titles, log ticks on both axes', async () => {
    const svg = await readFile(join(out, 'cost-env-cost-49936b.svg'), 'utf8')
    expect(svg).toBe(costPerTokenChart(summarize(threeSizes())[0]))
    const els = parseMarkup(svg)
    expect(els[0].name).toBe('svg')
    const lines = els.filter((e) => e.name === 'polyline')
    expect(lines.map((e) => e.attrs['data-series'])).toEqual(['engine prefill', 'transfer', 'assembly', 'block write', 'decoder TTFT'])
    for (const l of lines) expect(l.attrs.points.split(' ')).toHaveLength(3)
    const points = els.filter((e) => e.attrs.class === 'point')
    expect(points).toHaveLength(15)
    // The stage chart's colours.
    expect(lines.map((e) => e.attrs.stroke)).toEqual(['#1f618d', '#48c9b0', '#f4d03f', '#e67e22', '#8e44ad'])
    expect(svg).toContain('<title>engine prefill at 524,319 tokens: 2704 µs per token (median of 1 run)</title>')
    expect(svg).toContain('<title>engine prefill at 131,104 tokens: 1500 µs per token (median of 2 runs)</title>')
    expect(svg).toContain('<title>transfer at 131,104 tokens: 10 µs per token (median of 1 run)</title>')
    const axis = (which: string) => svg.split('\n').find((l) => l.includes(`<g class="axis ${which}">`))!
    const labels = (line: string) => [...line.matchAll(/<g class="tick">.*?<text[^>]*>([^<]*)<\/text>/g)].map((m) => m[1])
    expect(labels(axis('x'))).toEqual(['131,072', '262,144', '524,288'])
    // From 8.8 to 3000 µs per token: the decades 1 to 10,000.
    expect(labels(axis('y'))).toEqual(['1', '10', '100', '1,000', '10,000'])
    expect(axis('x')).toContain('>prompt tokens sent (log scale)</text>')
    expect(axis('y')).toContain('>µs per bridged token (log scale)</text>')
    // A higher cost per token is higher on the chart; a doubling of the prompt is the same step in x.
    const prefill = lines[0].attrs.points.split(' ').map((p) => p.split(',').map(Number))
    expect(prefill[1][1]).toBeLessThan(prefill[0][1])
    expect(prefill[2][0] - prefill[1][0]).toBeCloseTo(prefill[1][0] - prefill[0][0], 0)
    // The legend names every stage.
    for (const label of ['engine prefill', 'transfer', 'assembly', 'block write', 'decoder TTFT']) expect(svg).toContain(`font-size="12">${label}</text>`)
  })
})
