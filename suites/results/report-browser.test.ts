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
  it('renders both environments, the charts have the expected points, and no console errors', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'pd-report-'))
    const browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox'] })
    try {
      await generateResults(join(import.meta.dirname, 'fixtures', 'runs'), dir)
      const page = await browser.newPage({ viewport: { width: 1200, height: 900 } })
      const errors: string[] = []
      page.on('console', (m) => { if (m.type() === 'error') errors.push(m.text()) })
      page.on('pageerror', (e) => errors.push(e.message))
      await page.goto(pathToFileURL(join(dir, 'report.html')).href)
      expect(await page.title()).toBe('pd-bridge cold-prompt results')
      expect(await page.locator('section.environment').count()).toBe(2)
      // env A: decoder alone at 3 sizes + bridged (complete) at 2; env B: 1 + 1.
      expect(await page.locator('section.environment').nth(0).locator('figure.time .point').count()).toBe(5)
      expect(await page.locator('section.environment').nth(1).locator('figure.time .point').count()).toBe(2)
      expect(await page.locator('figure.stages .segment').count()).toBe(12 + 6)
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
