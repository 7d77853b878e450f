import { existsSync } from 'node:fs'
import { mkdir, mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { pathToFileURL } from 'node:url'
import { chromium } from 'playwright-core'
import { describe, expect, it } from 'vitest'
import { generateResults } from '../../src/results/generate.ts'

const CHROMIUM = '/usr/bin/chromium'
const ROOT = join(import.meta.dirname, '..', '..')

// CI installs Chromium (.ci/run), so there a missing browser fails; elsewhere the test is skipped.
describe.skipIf(!existsSync(CHROMIUM) && process.env.CI === undefined)('report.html in headless Chromium', () => {
  it('renders every environment, the charts have the expected points, the micro tables their rows, and no console errors', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'pd-report-'))
    const browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox'] })
    try {
      // Runs from fixtures/runs, micro records from fixtures/micro (the default next to it).
      await generateResults(join(import.meta.dirname, 'fixtures', 'runs'), dir)
      const page = await browser.newPage({ viewport: { width: 1200, height: 900 } })
      const errors: string[] = []
      page.on('console', (m) => { if (m.type() === 'error') errors.push(m.text()) })
      page.on('pageerror', (e) => errors.push(e.message))
      await page.goto(pathToFileURL(join(dir, 'report.html')).href)
      expect(await page.title()).toBe('pd-bridge cold-prompt results')
      const sections = page.locator('section.environment')
      expect(await sections.evaluateAll((els) => els.map((e) => e.getAttribute('data-env')))).toEqual(['env-a1b2c3', 'env-c7d8e9', 'env-d4e5f6'])
      // env A: decoder alone at 3 sizes + bridged (complete) at 2; env C: micro records only, no charts; env B: 1 + 1.
      expect(await sections.nth(0).locator('figure.time .point').count()).toBe(5)
      expect(await sections.nth(1).locator('figure').count()).toBe(0)
      expect(await sections.nth(2).locator('figure.time .point').count()).toBe(2)
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
