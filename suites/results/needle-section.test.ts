import { describe, expect, it } from 'vitest'
import { needleGrids, needleTable } from '../../verify/needle/heatmap.ts'
import type { NeedleRunRecord } from '../../verify/needle/record.ts'
import { needleGridTable, needleTallyLine, needleTallyWords } from '../../verify/results/needle-section.ts'
import { fixtureRecords, record } from '../needle/fixtures.ts'

/** The markdown cells of needleTable's body rows (escaped pipes put back). */
function markdownCells (md: string): string[][] {
  const rows = md.split('\n\n')[0].split('\n').slice(2)
  return rows.map((r) => r.slice(2, -2).split(/ (?<!\\)\| /).map((c) => c.replace(/\\\|/g, '|').replace(/\\\\/g, '\\')))
}

describe('the report\'s needle table has needleTable\'s cells', () => {
  it('for every environment of the needle suite\'s fixtures (partial, declined footnotes, refused, repeats, needle past the bridged blocks)', () => {
    const grids = needleGrids(fixtureRecords())
    expect(grids).toHaveLength(2)
    for (const grid of grids) {
      const table = needleGridTable(grid)
      expect(table.headers).toEqual(['depth \\ tokens', ...grid.lengths.map(String)])
      expect(table.rows).toEqual(markdownCells(needleTable(grid)))
    }
    // The richest cell, to show the comparison is not of empty rows.
    expect(needleGridTable(grids[0]).rows[0][1]).toBe('bridged 1 pass · native 1 pass')
  })

  it('the tally line is needleTable\'s', () => {
    for (const grid of needleGrids(fixtureRecords())) {
      expect(needleTable(grid).split('\n')).toContain(needleTallyLine(grid))
      expect(needleTallyLine(grid)).toMatch(/^Bridged: \d+ pass, .* Native: \d+ pass, \d+ miss\.$/)
    }
  })
})

describe('the tally in words', () => {
  it('counts complete runs only as bridged results, and says what was not bridged, refused or not run', () => {
    const [a, b] = needleGrids(fixtureRecords())
    expect(needleTallyWords(a)).toBe('9 runs in 7 cells (3 lengths x 3 depths). Through the bridge (complete verdicts only), 4 of 6 retrieved the needle and 2 missed. 2 runs were not bridged (partial or declined) and count as neither pass nor miss; 1 run was refused before running (a reused seed). The decoder alone retrieved 7 of 8.')
    expect(needleTallyWords(b)).toBe('2 runs in 2 cells (1 length x 2 depths). Through the bridge, no run had a complete verdict, so none is a bridged pass. 1 run was not bridged (partial or declined) and counts as neither pass nor miss; 1 run had no bridged leg. The decoder alone retrieved 2 of 2.')
  })

  it('says when the decoder alone was not run and when a run had no native leg', () => {
    const leg = { verdict: 'complete', verdictKind: 'complete', route: 'bridge', bridgedTokens: 256, promptTokens: 507, completionTokens: 2, finishReason: 'stop', answer: ' amber', hit: true, outcome: 'pass', totalMs: 1, ttftMs: 1 } as const
    const only = (native: NeedleRunRecord['native']) => needleGrids([record({ targetTokens: 512, depth: 0, seed: 1, bridged: { ...leg }, native })])[0]
    expect(needleTallyWords(only(null))).toBe('1 run in 1 cell (1 length x 1 depth). Through the bridge (complete verdicts only), 1 of 1 retrieved the needle and none missed. The decoder alone was not run.')
    const two = needleGrids([
      record({ targetTokens: 512, depth: 0, seed: 1, bridged: { ...leg }, native: null }),
      record({ targetTokens: 512, depth: 0, seed: 2, repeat: 1, bridged: { ...leg }, native: { promptTokens: 507, completionTokens: 2, finishReason: 'stop', answer: ' teal', hit: false, outcome: 'miss', totalMs: 1, ttftMs: 1 } }),
    ])[0]
    expect(needleTallyWords(two)).toBe('2 runs in 1 cell (1 length x 1 depth). Through the bridge (complete verdicts only), 2 of 2 retrieved the needle and none missed. The decoder alone retrieved 0 of 1; 1 run had no native leg.')
  })
})
