import { existsSync } from 'node:fs'
import { mkdir, mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { pathToFileURL } from 'node:url'
import { chromium } from 'playwright-core'
import { describe, expect, it } from 'vitest'
import { HEATMAP_COLOURS, needleGrids } from '../../src/needle/heatmap.ts'
import { readNeedleRecords } from '../../src/needle/record.ts'
import { generateResults } from '../../src/results/generate.ts'

const CHROMIUM = '/usr/bin/chromium'
const ROOT = join(import.meta.dirname, '..', '..')

// CI installs Chromium (.ci/run), so there a missing browser fails; elsewhere the test is skipped.
describe.skipIf(!existsSync(CHROMIUM) && process.env.CI === undefined)('report.html in headless Chromium', () => {
  it('renders every environment, the charts have the expected points, the micro tables their rows, the heatmaps their cells, and no console errors', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'pd-report-'))
    const browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox'] })
    try {
      // Runs from fixtures/runs, micro records from fixtures/micro and needle records from
      // fixtures/needle/runs (the defaults next to it).
      await generateResults(join(import.meta.dirname, 'fixtures', 'runs'), dir)
      const grids = needleGrids(await readNeedleRecords(join(import.meta.dirname, 'fixtures', 'needle', 'runs')))
      const page = await browser.newPage({ viewport: { width: 1200, height: 900 } })
      const errors: string[] = []
      page.on('console', (m) => { if (m.type() === 'error') errors.push(m.text()) })
      page.on('pageerror', (e) => errors.push(e.message))
      await page.goto(pathToFileURL(join(dir, 'report.html')).href)
      expect(await page.title()).toBe('pd-bridge results')
      const sections = page.locator('section.environment')
      expect(await sections.evaluateAll((els) => els.map((e) => e.getAttribute('data-env')))).toEqual(['env-a1b2c3', 'env-c7d8e9', 'env-d4e5f6', 'env-f1e2d3'])
      // env A: decoder alone at 3 sizes + bridged (complete) at 2; env C: micro records only, no charts; env B: 1 + 1.
      expect(await sections.nth(0).locator('figure.time .point').count()).toBe(5)
      expect(await sections.nth(1).locator('figure').count()).toBe(0)
      expect(await sections.nth(2).locator('figure.time .point').count()).toBe(2)
      // Needle heatmaps: env A (with runs) and env F (needle records only), one cell rect per
      // recorded cell, coloured by the cell's state; envs C and B have none.
      expect(grids.map((g) => g.environment.id)).toEqual(['env-a1b2c3', 'env-f1e2d3'])
      for (const [i, grid, cells, colours] of [
        [0, grids[0], 4, [HEATMAP_COLOURS.pass, HEATMAP_COLOURS.miss, HEATMAP_COLOURS['not-bridged'], HEATMAP_COLOURS['not-bridged']]],
        [3, grids[1], 3, [HEATMAP_COLOURS.pass, HEATMAP_COLOURS.pass, HEATMAP_COLOURS['native-miss']]],
      ] as const) {
        const rects = sections.nth(i).locator('figure.needle svg > g > rect')
        expect(await rects.count()).toBe(grid.cells.flat().filter((c) => c !== null).length)
        expect(await rects.count()).toBe(cells)
        expect(await rects.evaluateAll((els) => els.map((e) => e.getAttribute('fill')))).toEqual(colours)
        expect(await sections.nth(i).locator('table.needle-grid tbody tr').count()).toBe(grid.depths.length)
        const heatmapBox = await sections.nth(i).locator('figure.needle svg').boundingBox()
        expect(heatmapBox?.width).toBeGreaterThan(100)
        expect(heatmapBox?.height).toBeGreaterThan(100)
      }
      expect(await sections.nth(1).locator('figure.needle').count()).toBe(0)
      expect(await sections.nth(2).locator('figure.needle').count()).toBe(0)
      expect(await page.locator('figure.stages .segment').count()).toBe(12 + 6)
      // Micro tables: env A shows 3 records' peaks, 3 kernel rows, 2 hook rows; env C 1 and 1; env B none.
      const bodyRows = (i: number, kind: string) => sections.nth(i).locator(`table.micro-${kind} tbody tr`).count()
      expect([await bodyRows(0, 'peaks'), await bodyRows(0, 'kernels'), await bodyRows(0, 'hook')]).toEqual([3, 3, 2])
      expect([await bodyRows(1, 'peaks'), await bodyRows(1, 'kernels'), await bodyRows(1, 'hook')]).toEqual([1, 1, 0])
      expect(await sections.nth(2).locator('div.micro').count()).toBe(0)
      const kernelsBox = await sections.nth(0).locator('table.micro-kernels').boundingBox()
      expect(kernelsBox?.height).toBeGreaterThan(40)
      expect(await sections.nth(0).locator('table.micro-kernels tbody tr').first().locator('td').nth(5).textContent()).toBe('25.0%')
      const box = await page.locator('figure.time svg').first().boundingBox()
      expect(box?.width).toBeGreaterThan(100)
      // Hovering a point shows its numbers under the chart.
      await page.locator('figure.time .point').first().hover()
      expect(await page.locator('figure.time .readout').first().textContent()).toMatch(/tokens, [\d.]+ s$/)
      // Hovering a heatmap cell shows what it holds.
      await sections.nth(3).locator('figure.needle svg > g').first().hover()
      expect(await sections.nth(3).locator('figure.needle .readout').textContent()).toBe('512 tokens, depth 0.5: bridged 1 pass · native 1 pass; seeds 401')
      await mkdir(join(ROOT, 'reports'), { recursive: true })
      await page.screenshot({ path: join(ROOT, 'reports', 'results-report.png'), fullPage: true })
      expect(errors).toEqual([])
    }
    finally {
      await browser.close()
      await rm(dir, { recursive: true, force: true })
    }
  }, 60_000)
})
