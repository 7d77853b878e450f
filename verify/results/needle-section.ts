// One environment's needle runs for the report, as plain data so RESULTS.md and report.html say the
// same thing. The counting and the cell texts are verify/needle/heatmap.ts's; this file only words
// the totals and lays the grid out as a table.
import { cellText, depthLabel, needleTable, tally, type NeedleGrid } from '../needle/heatmap.ts'
import { NOT_RUN, type Table } from './tables.ts'
import { plural } from './table.ts'

/**
 * The grid's totals in words: how many runs and cells, what the bridge retrieved over complete
 * runs only, what was not bridged, refused or not run, and what the decoder alone retrieved.
 */
export function needleTallyWords (grid: NeedleGrid): string {
  const t = tally(grid)
  const cells = grid.cells.flat().filter((c) => c !== null)
  const runs = cells.reduce((a, c) => a + c.runs, 0)
  // Refused runs are counted apart: neither leg's `notRun` includes them.
  const bridgedNotRun = cells.reduce((a, c) => a + c.bridged.notRun, 0)
  const nativeNotRun = cells.reduce((a, c) => a + c.native.notRun, 0)
  const words = [`${plural(runs, 'run')} in ${plural(cells.length, 'cell')} (${plural(grid.lengths.length, 'length')} x ${plural(grid.depths.length, 'depth')}).`]
  words.push(t.bridgedComplete === 0
    ? 'Through the bridge, no run had a complete verdict, so none is a bridged pass.'
    : `Through the bridge (complete verdicts only), ${t.bridgedPass} of ${t.bridgedComplete} retrieved the needle and ${t.bridgedMiss === 0 ? 'none' : t.bridgedMiss} missed.`)
  const other: string[] = []
  if (t.notBridged > 0) other.push(`${plural(t.notBridged, 'run was', 'runs were')} not bridged (partial or declined) and ${t.notBridged === 1 ? 'counts' : 'count'} as neither pass nor miss`)
  if (t.refused > 0) other.push(`${plural(t.refused, 'run was', 'runs were')} refused before running (a reused seed)`)
  if (bridgedNotRun > 0) other.push(`${plural(bridgedNotRun, 'run')} had no bridged leg`)
  if (other.length > 0) words.push(`${other.join('; ')}.`.replace(/^./, (c) => c.toUpperCase()))
  const judged = t.nativePass + t.nativeMiss
  words.push(judged === 0
    ? 'The decoder alone was not run.'
    : `The decoder alone retrieved ${t.nativePass} of ${judged}${nativeNotRun > 0 ? `; ${plural(nativeNotRun, 'run')} had no native leg` : ''}.`)
  return words.join(' ')
}

/** The grid as a table with needleTable's cells: depth rows, prompt-token columns, `—` where no run was recorded. */
export function needleGridTable (grid: NeedleGrid): Table {
  const footnote = (verdict: string): number => grid.declinedVerdicts.indexOf(verdict) + 1
  return {
    title: 'Needle retrieval: depth x prompt tokens',
    headers: ['depth \\ tokens', ...grid.lengths.map(String)],
    rows: grid.depths.map((d, i) => [depthLabel(d), ...grid.cells[i].map((c) => c === null ? NOT_RUN : cellText(c, footnote))]),
  }
}

/** needleTable's one-line tally (`Bridged: ... Native: ...`): the paragraph after its table. */
export function needleTallyLine (grid: NeedleGrid): string {
  // needleTable escapes line breaks inside cells, so its first blank line ends the table.
  return needleTable(grid).split('\n\n')[1].trim()
}
