import { readFile } from 'node:fs/promises'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { cellState, needleGrids, needleHeatmapSvg, needleMarkdown, tally } from '../../verify/needle/heatmap.ts'
import { ENV_A, fixtureRecords, record } from './fixtures.ts'

const FIXTURES = join(import.meta.dirname, 'fixtures')

/** Tags open and close in order (the SVG is well-formed as far as its elements go). */
function balanced (svg: string): boolean {
  const stack: string[] = []
  for (const m of svg.matchAll(/<(\/?)([a-z]+)[^>]*?(\/?)>/g)) {
    if (m[3] === '/') continue
    if (m[1] === '') stack.push(m[2])
    else if (stack.pop() !== m[2]) return false
  }
  return stack.length === 0
}

describe('the depth x length table and the heatmap, against the golden files', () => {
  it('markdown: every environment its own table, byte for byte', async () => {
    expect(needleMarkdown(fixtureRecords())).toBe(await readFile(join(FIXTURES, 'needle.golden.md'), 'utf8'))
  })

  it('SVG per environment, byte for byte; one rect with a title per recorded cell', async () => {
    const grids = needleGrids(fixtureRecords())
    expect(grids.map((g) => g.environment.id)).toEqual(['env-aaaaaaaaaaaa', 'env-bbbbbbbbbbbb'])
    for (const g of grids) {
      const svg = needleHeatmapSvg(g)
      expect(svg).toBe(await readFile(join(FIXTURES, `needle-${g.environment.id}.golden.svg`), 'utf8'))
      expect(balanced(svg)).toBe(true)
      const cells = g.cells.flat().filter((c) => c !== null).length
      expect(svg.match(/<g><title>[^<]+<\/title><rect /g)).toHaveLength(cells)
    }
  })

  it('does not depend on the order of the records', () => {
    const records = fixtureRecords()
    const shuffled = [...records.slice(5), ...records.slice(0, 5).reverse()]
    expect(needleMarkdown(shuffled)).toBe(needleMarkdown(records))
    expect(needleGrids(shuffled).map(needleHeatmapSvg)).toEqual(needleGrids(records).map(needleHeatmapSvg))
  })
})

describe('what the grid counts', () => {
  it('a partial or declined run is never a bridged pass, even when its answer hit', () => {
    const [a, b] = needleGrids(fixtureRecords())
    expect(tally(a)).toEqual({ bridgedPass: 4, bridgedMiss: 2, bridgedComplete: 6, notBridged: 2, refused: 1, nativePass: 7, nativeMiss: 1 })
    expect(tally(b)).toEqual({ bridgedPass: 0, bridgedMiss: 0, bridgedComplete: 0, notBridged: 1, refused: 0, nativePass: 2, nativeMiss: 0 })
  })

  it('environments are never merged: the remote run is not in the embedded table', () => {
    const [a] = needleGrids(fixtureRecords())
    expect(a.lengths).toEqual([512, 2048, 4096])
    expect(a.environment).toEqual(ENV_A)
  })

  it('cell colours follow the bridged result first', () => {
    const cell = (r: Parameters<typeof record>[0]) => needleGrids([record(r)])[0].cells[0][0]!
    const native = { promptTokens: 1, completionTokens: 1, finishReason: 'stop', answer: 'amber', hit: true, outcome: 'pass' as const, totalMs: 1, ttftMs: 1 }
    expect(cellState(cell({ targetTokens: 512, depth: 0, seed: 1, bridged: null, native }))).toBe('native-pass')
    expect(cellState(cell({ targetTokens: 512, depth: 0, seed: 1, bridged: null, native: { ...native, hit: false, outcome: 'miss' } }))).toBe('native-miss')
    expect(cellState(cell({ targetTokens: 512, depth: 0, seed: 1, bridged: null, native: null, refused: 'reused seed' }))).toBe('refused')
  })
})
