// A generated report names the folders it read: the checkout's own relative to the checkout (so the
// committed RESULTS.md reads the same everywhere), any other folder by its absolute path.
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { renderHtml, renderMarkdown } from '../../verify/results/render.ts'
import { CHECKOUT_SOURCES, reportSources, sourceName } from '../../verify/results/sources.ts'

const CHECKOUT = join(import.meta.dirname, '..', '..')

describe('sourceName', () => {
  it('names a folder inside the checkout relative to it, with a trailing slash', () => {
    expect(sourceName(join(CHECKOUT, 'results', 'runs'))).toBe('results/runs/')
    expect(sourceName(join(CHECKOUT, 'results', 'needle', 'runs') + '/')).toBe('results/needle/runs/')
  })

  it('names a folder outside the checkout by its absolute path', () => {
    expect(sourceName('/tmp/elsewhere/runs')).toBe('/tmp/elsewhere/runs/')
    expect(sourceName('/x/y', '/x/y')).toBe('/x/y/')
    expect(sourceName('/a/checkout-two/runs', '/a/checkout')).toBe('/a/checkout-two/runs/')
  })

  it('the checkout\'s own folders are the defaults a plain `pd-bridge results` names', () => {
    const dirs = { runs: 'results/runs', micro: 'results/micro', needle: 'results/needle/runs', faults: 'results/faults', load: 'results/load', warm: 'results/warm', twoHost: 'results/two-host', adversary: 'results/adversary', batch: 'results/batch' }
    const abs = Object.fromEntries(Object.entries(dirs).map(([k, v]) => [k, join(CHECKOUT, v)])) as typeof dirs
    expect(reportSources(abs)).toEqual(CHECKOUT_SOURCES)
  })
})

describe('the generated line', () => {
  it('names the folders given, in RESULTS.md and report.html', () => {
    const from = reportSources({ runs: '/tmp/r2/runs', micro: '/tmp/m', needle: '/tmp/n', faults: '/tmp/f', load: '/tmp/l', warm: '/tmp/w', twoHost: '/tmp/t', adversary: '/tmp/a', batch: '/tmp/b' })
    const md = renderMarkdown([], from)
    expect(md).toContain('from the records in `/tmp/r2/runs/` (cold-prompt runs), `/tmp/m/` (micro benchmarks) and `/tmp/n/` (needle runs); do not edit by hand.')
    expect(md).not.toContain('results/runs/')
    expect(renderHtml([], from)).toContain('from the records in /tmp/r2/runs/ (cold-prompt runs), /tmp/m/ (micro benchmarks) and /tmp/n/ (needle runs)')
  })
})
