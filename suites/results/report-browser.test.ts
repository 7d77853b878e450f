import { existsSync } from 'node:fs'
import { mkdir, mkdtemp, readFile, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { pathToFileURL } from 'node:url'
import { chromium, type Browser, type Page } from 'playwright-core'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { HEATMAP_COLOURS, needleGrids } from '../../verify/needle/heatmap.ts'
import { readNeedleRecords } from '../../verify/needle/record.ts'
import { generateResults } from '../../verify/results/generate.ts'

const CHROMIUM = '/usr/bin/chromium'
const ROOT = join(import.meta.dirname, '..', '..')
const SCREENSHOT = join(ROOT, 'reports', 'results-report.png')
const WIDTH = 1200

/** The page's environments in report order: cold-prompt runs first, then needle runs, then micro records only. */
const ENVS = ['env-a1b2c3', 'env-d4e5f6', 'env-f1e2d3', 'env-c7d8e9']

/** Every table's box: whether it fits, or else scrolls inside a container that is no wider than its section. */
interface TableBox {
  cls: string
  wrapped: boolean
  overflowX: string
  scrollWidth: number
  clientWidth: number
  wrapRight: number
  sectionRight: number
}

async function tableBoxes (page: Page): Promise<TableBox[]> {
  return await page.locator('table').evaluateAll((tables) => tables.map((t) => {
    const wrap = t.parentElement!
    const section = wrap.closest('section')!
    return {
      cls: t.className,
      wrapped: wrap.classList.contains('table-wrap'),
      overflowX: getComputedStyle(wrap).overflowX,
      scrollWidth: wrap.scrollWidth,
      clientWidth: wrap.clientWidth,
      wrapRight: wrap.getBoundingClientRect().right,
      sectionRight: section.getBoundingClientRect().right,
    }
  }))
}

/** The document is never wider than the viewport: whatever is wide scrolls inside its own box. */
async function pageWidth (page: Page): Promise<{ scrollWidth: number, clientWidth: number }> {
  return await page.evaluate(() => ({ scrollWidth: document.documentElement.scrollWidth, clientWidth: document.documentElement.clientWidth }))
}

/** A PNG's width and height, from its IHDR chunk. */
function pngSize (png: Buffer): { width: number, height: number } {
  return { width: png.readUInt32BE(16), height: png.readUInt32BE(20) }
}

// CI installs Chromium (.ci/run), so there a missing browser fails; elsewhere the test is skipped.
describe.skipIf(!existsSync(CHROMIUM) && process.env.CI === undefined)('report.html in headless Chromium', () => {
  let dir: string
  let browser: Browser
  let url: string

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'pd-report-'))
    // Runs from fixtures/runs, micro records from fixtures/micro and needle records from
    // fixtures/needle/runs (the defaults next to it).
    await generateResults(join(import.meta.dirname, 'fixtures', 'runs'), dir)
    url = pathToFileURL(join(dir, 'report.html')).href
    browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox'] })
  })
  afterAll(async () => {
    await browser?.close()
    await rm(dir, { recursive: true, force: true })
  })

  async function open (width = WIDTH): Promise<{ page: Page, errors: string[] }> {
    const page = await browser.newPage({ viewport: { width, height: 900 } })
    // No per-action wall-clock limit (Playwright's default is 30 s): a loaded machine may take longer; the suite's hang limit catches a hang.
    page.setDefaultTimeout(0)
    const errors: string[] = []
    page.on('console', (m) => { if (m.type() === 'error') errors.push(m.text()) })
    page.on('pageerror', (e) => errors.push(e.message))
    await page.goto(url)
    return { page, errors }
  }

  it('renders every environment, the charts have the expected points, the micro tables their rows, the heatmaps their cells, and no console errors', async () => {
    const grids = needleGrids(await readNeedleRecords(join(import.meta.dirname, 'fixtures', 'needle', 'runs')))
    const { page, errors } = await open()
    expect(await page.title()).toBe('pd-bridge results')
    const sections = page.locator('section.environment')
    expect(await sections.evaluateAll((els) => els.map((e) => e.getAttribute('data-env')))).toEqual(ENVS)
    const env = (id: string) => sections.nth(ENVS.indexOf(id))
    // env A: decoder alone at 3 sizes + bridged (complete) at 2; env B: 1 + 1; env C: micro records only, no charts.
    expect(await env('env-a1b2c3').locator('figure.time .point').count()).toBe(5)
    expect(await env('env-d4e5f6').locator('figure.time .point').count()).toBe(2)
    expect(await env('env-c7d8e9').locator('figure').count()).toBe(0)
    expect(await env('env-f1e2d3').locator('figure.chart.time, figure.chart.stages').count()).toBe(0)
    // Every recorded leg is plotted: env A has 6 decoder-alone legs, 3 complete bridged legs and 2
    // bridged legs that were not complete (partial, declined), drawn apart and not counted.
    expect(await env('env-a1b2c3').locator('figure.time .run').count()).toBe(11)
    expect(await env('env-a1b2c3').locator('figure.time .run.not-counted').count()).toBe(2)
    expect(await env('env-d4e5f6').locator('figure.time .run').count()).toBe(2)
    // Needle heatmaps: env A (with runs) and env F (needle records only), one cell rect per
    // recorded cell, coloured by the cell's state; envs B and C have none.
    expect(grids.map((g) => g.environment.id)).toEqual(['env-a1b2c3', 'env-f1e2d3'])
    for (const [id, grid, cells, colours] of [
      ['env-a1b2c3', grids[0], 4, [HEATMAP_COLOURS.pass, HEATMAP_COLOURS.miss, HEATMAP_COLOURS['not-bridged'], HEATMAP_COLOURS['not-bridged']]],
      ['env-f1e2d3', grids[1], 3, [HEATMAP_COLOURS.pass, HEATMAP_COLOURS.pass, HEATMAP_COLOURS['native-miss']]],
    ] as const) {
      const rects = env(id).locator('figure.needle svg > g > rect')
      expect(await rects.count()).toBe(grid.cells.flat().filter((c) => c !== null).length)
      expect(await rects.count()).toBe(cells)
      expect(await rects.evaluateAll((els) => els.map((e) => e.getAttribute('fill')))).toEqual(colours)
      expect(await env(id).locator('table.needle-grid tbody tr').count()).toBe(grid.depths.length)
      const heatmapBox = await env(id).locator('figure.needle svg').boundingBox()
      expect(heatmapBox?.width).toBeGreaterThan(100)
      expect(heatmapBox?.height).toBeGreaterThan(100)
    }
    expect(await env('env-d4e5f6').locator('figure.needle').count()).toBe(0)
    expect(await env('env-c7d8e9').locator('figure.needle').count()).toBe(0)
    expect(await page.locator('figure.stages .segment').count()).toBe(12 + 6)
    // Micro tables: env A shows 3 records' peaks, 3 kernel rows, 2 hook rows; env C 1 and 1; env B none.
    const bodyRows = (id: string, kind: string) => env(id).locator(`table.micro-${kind} tbody tr`).count()
    expect([await bodyRows('env-a1b2c3', 'peaks'), await bodyRows('env-a1b2c3', 'kernels'), await bodyRows('env-a1b2c3', 'hook')]).toEqual([3, 3, 2])
    expect([await bodyRows('env-c7d8e9', 'peaks'), await bodyRows('env-c7d8e9', 'kernels'), await bodyRows('env-c7d8e9', 'hook')]).toEqual([1, 1, 0])
    expect(await env('env-d4e5f6').locator('div.micro').count()).toBe(0)
    const kernelsBox = await env('env-a1b2c3').locator('table.micro-kernels').boundingBox()
    expect(kernelsBox?.height).toBeGreaterThan(40)
    expect(await env('env-a1b2c3').locator('table.micro-kernels tbody tr').first().locator('td').nth(5).textContent()).toBe('25.0%')
    const box = await page.locator('figure.time svg').first().boundingBox()
    expect(box?.width).toBeGreaterThan(100)
    // Hovering a median point, a run or a heatmap cell shows its numbers under the chart.
    // (The 16390-token median: at 1029 and 4100 tokens a grey cross lies over the decoder-alone median.)
    await page.locator('figure.time .point', { hasText: '16390 tokens' }).hover()
    expect(await page.locator('figure.time .readout').first().textContent()).toBe('decoder alone, median of 1 run: 16390 tokens, 70 s')
    // A run is a ring around (near) its median's dot, which lies over it: point inside the ring, beside the dot.
    const ring = page.locator('figure.time .run', { hasText: 'bridged (complete), run a-1024-r1:' })
    const ringBox = (await ring.boundingBox())!
    await ring.hover({ position: { x: 2, y: ringBox.height / 2 } })
    expect(await page.locator('figure.time .readout').first().textContent()).toBe('bridged (complete), run a-1024-r1: 1028 tokens, 2.4 s')
    // This cross lies under the decoder-alone median at the same size (drawn on top), so the
    // pointer cannot reach it: send it the event the pointer would.
    await env('env-a1b2c3').locator('figure.time .run.not-counted').first().dispatchEvent('mouseenter')
    expect(await page.locator('figure.time .readout').first().textContent()).toMatch(/^bridged leg, verdict partial 512\/1029, not counted as bridged, run a-1024-r2-partial: 1029 tokens, 3\.9 s$/)
    await env('env-f1e2d3').locator('figure.needle svg > g').first().hover()
    expect(await env('env-f1e2d3').locator('figure.needle .readout').textContent()).toBe('512 tokens, depth 0.5: bridged 1 pass · native 1 pass; seeds 401')
    expect(errors).toEqual([])
  })

  it('puts the summary first: headline ratios, verdict tallies, needle tally, then the rules and the details of each environment', async () => {
    const { page, errors } = await open()
    // In document order: the title, the headline, the summary, the rules, then one section per environment.
    const order = await page.locator('body > h1, body > section, body > .details > section').evaluateAll((els) => els.map((e) => e.tagName === 'H1' ? 'title' : e.classList.contains('environment') ? e.getAttribute('data-env') : e.className))
    expect(order).toEqual(['title', 'headline', 'summary', 'rules', ...ENVS])
    const summary = page.locator('section.summary')
    expect(await summary.locator('h3').allTextContents()).toEqual(['Headline: decoder alone vs bridged, cold prompts', 'Verdicts of the bridged legs', 'Needle retrieval tally', 'Environments'])
    // The first table of the page is the headline, with each environment's paired ratios.
    expect(await page.locator('table').first().getAttribute('class')).toBe('summary-headline')
    const headline = await summary.locator('table.summary-headline tbody tr').evaluateAll((rows) => rows.map((r) => [...r.querySelectorAll('td')].map((td) => td.textContent)))
    expect(headline.map((r) => [r[0], r[2], r[6], r[7]])).toEqual([
      ['env-a1b2c3', '1029', '1.92× (2 paired)', 'bridged faster'],
      ['env-a1b2c3', '4100', '2.67× (1 paired)', 'bridged faster'],
      ['env-a1b2c3', '16390', '—', 'no paired run'],
      ['env-d4e5f6', '1030', '1.50× (1 paired)', 'bridged faster'],
    ])
    // Declined runs are counted as declined, never as complete.
    const verdicts = await summary.locator('table.summary-verdicts tbody tr').evaluateAll((rows) => rows.map((r) => [...r.querySelectorAll('td')].map((td) => td.textContent)))
    expect(verdicts[0]).toEqual(['env-a1b2c3', 'embedded tiny (seed 0)', 'cold prompt', '6', '3', '1', '1', '1', '—'])
    expect(await summary.locator('table.summary-needle tbody tr').count()).toBe(2)
    // Every detail section lies below the summary, in order, one after the other.
    const boxes = await page.locator('h1, section.summary, section.rules, section.environment').evaluateAll((els) => els.map((e) => {
      const r = e.getBoundingClientRect()
      return { top: r.top + window.scrollY, bottom: r.bottom + window.scrollY, left: r.left, right: r.right }
    }))
    expect(boxes).toHaveLength(3 + ENVS.length)
    for (let i = 1; i < boxes.length; i++) expect(boxes[i].top).toBeGreaterThanOrEqual(boxes[i - 1].bottom - 0.5)
    expect(errors).toEqual([])
  })

  it('every chart labels the ticks of both axes with values and units', async () => {
    const { page } = await open()
    const ticks = (fig: string, axis: 'x' | 'y') => page.locator(`figure.chart.${fig} g.axis.${axis} g.tick`).evaluateAll((gs) => gs.map((g) => [...g.querySelectorAll('text')].map((t) => t.textContent).join(' ')))
    for (const fig of ['time', 'stages']) expect(await page.locator(`figure.chart.${fig}`).count()).toBe(2)
    // Time: prompt tokens (thousands grouped) across, seconds up; both charts of both environments.
    const timeX = await ticks('time', 'x')
    const timeY = await ticks('time', 'y')
    expect(timeX).toEqual([...['0', '2,500', '5,000', '7,500', '10,000', '12,500', '15,000', '17,500'], ...['0', '200', '400', '600', '800', '1,000', '1,200']])
    for (const label of timeY) expect(label).toMatch(/^\d+(\.\d+)? s$/)
    expect(timeY.length).toBeGreaterThanOrEqual(2 * 3)
    expect(await page.locator('figure.chart.time .axis-title').allTextContents()).toEqual(['end-to-end time (seconds)', 'prompt tokens sent', 'end-to-end time (seconds)', 'prompt tokens sent'])
    // Stages: percent across, each bar's prompt tokens and median end-to-end time up.
    expect(await ticks('stages', 'x')).toEqual([...['0%', '25%', '50%', '75%', '100%'], ...['0%', '25%', '50%', '75%', '100%']])
    expect(await ticks('stages', 'y')).toEqual(['1,029 2.20 s', '4,100 6.00 s', '1,030 0.60 s'])
    // Each tick label is drawn inside the chart, none outside the SVG's box.
    const outside = await page.locator('figure.chart svg').evaluateAll((svgs) => svgs.flatMap((svg) => {
      const b = svg.getBoundingClientRect()
      return [...svg.querySelectorAll('text')].filter((t) => {
        const r = t.getBoundingClientRect()
        return r.left < b.left - 0.5 || r.right > b.right + 0.5 || r.top < b.top - 0.5 || r.bottom > b.bottom + 0.5
      }).map((t) => t.textContent)
    }))
    expect(outside).toEqual([])
  })

  it('no table overflows its box: each fits, or scrolls inside its own container; the page never scrolls sideways', async () => {
    for (const width of [WIDTH, 700]) {
      const { page } = await open(width)
      const boxes = await tableBoxes(page)
      expect(boxes.length).toBeGreaterThan(20)
      for (const b of boxes) {
        expect(b.wrapped, `${b.cls} at ${width}`).toBe(true)
        expect(b.overflowX, `${b.cls} at ${width}`).toBe('auto')
        // The container itself stays inside its section.
        expect(b.wrapRight, `${b.cls} at ${width}`).toBeLessThanOrEqual(b.sectionRight + 0.5)
      }
      expect((await pageWidth(page)).scrollWidth).toBeLessThanOrEqual((await pageWidth(page)).clientWidth)
      const scrolling = boxes.filter((b) => b.scrollWidth > b.clientWidth)
      if (width === WIDTH) {
        // At the screenshot's width every table fits without scrolling.
        expect(scrolling.map((b) => b.cls)).toEqual([])
      }
      else {
        // Narrower, the wide ones scroll, and scrolling moves them.
        expect(scrolling.length).toBeGreaterThan(0)
        const moved = await page.locator('div.table-wrap').evaluateAll((wraps) => wraps.filter((w) => w.scrollWidth > w.clientWidth).map((w) => { w.scrollLeft = 50; return w.scrollLeft }))
        expect(moved.every((x) => x > 0)).toBe(true)
      }
      await page.close()
    }
  })

  it('the report of the committed records (results/) also puts its summary first and keeps every table in its box', async () => {
    const committed = await mkdtemp(join(tmpdir(), 'pd-report-committed-'))
    try {
      await generateResults(join(ROOT, 'results', 'runs'), committed)
      const page = await browser.newPage({ viewport: { width: WIDTH, height: 900 } })
      page.setDefaultTimeout(0)
      await page.goto(pathToFileURL(join(committed, 'report.html')).href)
      expect(await page.locator('table').first().getAttribute('class')).toBe('summary-headline')
      const summaryBottom = await page.locator('section.summary').evaluate((e) => e.getBoundingClientRect().bottom)
      const firstEnvTop = await page.locator('section.environment').first().evaluate((e) => e.getBoundingClientRect().top)
      expect(summaryBottom).toBeLessThanOrEqual(firstEnvTop)
      for (const b of await tableBoxes(page)) {
        expect(b.wrapped && b.overflowX === 'auto', b.cls).toBe(true)
        expect(b.wrapRight, b.cls).toBeLessThanOrEqual(b.sectionRight + 0.5)
      }
      const w = await pageWidth(page)
      expect(w.scrollWidth).toBeLessThanOrEqual(w.clientWidth)
      await mkdir(join(ROOT, 'reports'), { recursive: true })
      await page.screenshot({ path: join(ROOT, 'reports', 'results-report-committed.png'), fullPage: true })
      await page.close()
    }
    finally {
      await rm(committed, { recursive: true, force: true })
    }
  })

  it('a full-page screenshot keeps its layout: the main sections in order, each within the viewport width (saved as reports/results-report.png)', async () => {
    const { page } = await open()
    const sections = await page.locator('section.headline, section.summary, section.rules, section.environment, figure.chart, div.table-wrap').evaluateAll((els) => els.map((e) => {
      const r = e.getBoundingClientRect()
      return { what: e.tagName === 'SECTION' ? e.className : e.tagName, left: r.left, right: r.right, width: r.width, top: r.top + window.scrollY, height: r.height }
    }))
    for (const s of sections) {
      expect(s.left, s.what).toBeGreaterThanOrEqual(0)
      expect(s.right, s.what).toBeLessThanOrEqual(WIDTH)
      expect(s.height, s.what).toBeGreaterThan(0)
    }
    // The headline, the summary and every environment section span the page's column; the headline is at the top, the summary next.
    const main = sections.filter((s) => s.what === 'headline' || s.what === 'summary' || s.what === 'environment')
    for (const s of main) expect(s.width).toBeGreaterThan(WIDTH * 0.8)
    expect(main.slice(0, 2).map((s) => s.what)).toEqual(['headline', 'summary'])
    expect(main[0].top).toBeLessThan(200)
    await mkdir(join(ROOT, 'reports'), { recursive: true })
    await page.screenshot({ path: SCREENSHOT, fullPage: true })
    const size = pngSize(await readFile(SCREENSHOT))
    // As wide as the viewport (nothing sticks out sideways), as tall as the page.
    expect(size.width).toBe(WIDTH)
    expect(size.height).toBe(await page.evaluate(() => document.documentElement.scrollHeight))
  })
})
