// The needle results as a depth x length grid per environment: a markdown table and an SVG
// heatmap. Pure functions, records in and text out, deterministic to the byte. Records of
// different environments are never put in one grid. A bridged run counts as a pass only with a
// complete verdict (the record's outcome); partial and declined runs show as "not bridged" with
// their verdict, refused runs (reused seed) as refused.
import type { RunEnvironment } from '../results/record.ts'
import { askedNeedleBridged, type NeedleRunRecord } from './record.ts'

/** The runs of one cell, counted. */
export interface NeedleCell {
  targetTokens: number
  depth: number
  runs: number
  /**
   * Bridged legs by outcome; `notBridged` by verdict text; `pastBridged`: complete runs whose asked
   * needle lay past the bridged blocks (the decoder computed its cache entries itself).
   */
  bridged: { pass: number, miss: number, notBridged: Map<string, number>, notRun: number, pastBridged: number }
  native: { pass: number, miss: number, notRun: number }
  refused: number
  seeds: number[]
}

/** One environment's grid. */
export interface NeedleGrid {
  environment: RunEnvironment
  lengths: number[]
  depths: number[]
  /** cells[d][l]: depth d, length l; null where no run was recorded. */
  cells: Array<Array<NeedleCell | null>>
  /** The verdicts of declined runs, footnoted in the table as [k] (k = index + 1). */
  declinedVerdicts: string[]
}

function bump (m: Map<string, number>, key: string): void {
  m.set(key, (m.get(key) ?? 0) + 1)
}

function emptyCell (targetTokens: number, depth: number): NeedleCell {
  return { targetTokens, depth, runs: 0, bridged: { pass: 0, miss: 0, notBridged: new Map(), notRun: 0, pastBridged: 0 }, native: { pass: 0, miss: 0, notRun: 0 }, refused: 0, seeds: [] }
}

/** Group records by environment id (sorted) and count each depth x length cell. */
export function needleGrids (records: readonly NeedleRunRecord[]): NeedleGrid[] {
  const byEnv = new Map<string, NeedleRunRecord[]>()
  for (const r of records) {
    const list = byEnv.get(r.environment.id) ?? []
    list.push(r)
    byEnv.set(r.environment.id, list)
  }
  return [...byEnv.keys()].sort().map((id) => {
    const runs = [...(byEnv.get(id) ?? [])].sort((a, b) => a.runId < b.runId ? -1 : a.runId > b.runId ? 1 : 0)
    const lengths = [...new Set(runs.map((r) => r.targetTokens))].sort((a, b) => a - b)
    const depths = [...new Set(runs.map((r) => r.depth))].sort((a, b) => a - b)
    const cells: Array<Array<NeedleCell | null>> = depths.map(() => lengths.map(() => null))
    const declinedVerdicts: string[] = []
    for (const r of runs) {
      const d = depths.indexOf(r.depth)
      const l = lengths.indexOf(r.targetTokens)
      const cell = cells[d][l] ?? (cells[d][l] = emptyCell(r.targetTokens, r.depth))
      cell.runs++
      cell.seeds.push(r.seed)
      if (r.refused !== null) {
        cell.refused++
        continue
      }
      if (r.bridged !== null && r.bridged.outcome !== 'not-bridged' && askedNeedleBridged(r) === false) cell.bridged.pastBridged++
      if (r.bridged === null) cell.bridged.notRun++
      else if (r.bridged.outcome === 'pass') cell.bridged.pass++
      else if (r.bridged.outcome === 'miss') cell.bridged.miss++
      else {
        bump(cell.bridged.notBridged, r.bridged.verdict)
        if (r.bridged.verdictKind === 'declined' && !declinedVerdicts.includes(r.bridged.verdict)) declinedVerdicts.push(r.bridged.verdict)
      }
      if (r.native === null) cell.native.notRun++
      else if (r.native.outcome === 'pass') cell.native.pass++
      else cell.native.miss++
    }
    // Footnotes in table order (rows by depth, then columns by length), not in record order.
    const ordered: string[] = []
    for (const row of cells) {
      for (const cell of row) {
        for (const v of cell?.bridged.notBridged.keys() ?? []) if (declinedVerdicts.includes(v) && !ordered.includes(v)) ordered.push(v)
      }
    }
    return { environment: runs[0].environment, lengths, depths, cells, declinedVerdicts: ordered }
  })
}

/** A depth as the grid labels it: up to two decimals, no trailing zeros. */
export function depthLabel (depth: number): string {
  return String(Math.round(depth * 100) / 100)
}

function bridgedText (cell: NeedleCell, footnote: (verdict: string) => number): string {
  const parts: string[] = []
  const b = cell.bridged
  if (b.pass > 0) parts.push(`${b.pass} pass`)
  if (b.miss > 0) parts.push(`${b.miss} miss`)
  if (b.pastBridged > 0) parts[parts.length - 1] += ` (${b.pastBridged} with the needle past the bridged blocks)`
  for (const [verdict, n] of [...b.notBridged].sort((x, y) => x[0] < y[0] ? -1 : x[0] > y[0] ? 1 : 0)) {
    parts.push(`${n} not bridged (${verdict.startsWith('partial') ? verdict : `declined [${footnote(verdict)}]`})`)
  }
  if (cell.refused > 0) parts.push(`${cell.refused} refused (reused seed)`)
  if (b.notRun > 0) parts.push(`${b.notRun} not run`)
  return parts.join(', ')
}

function nativeText (cell: NeedleCell): string {
  const parts: string[] = []
  const n = cell.native
  if (n.pass > 0) parts.push(`${n.pass} pass`)
  if (n.miss > 0) parts.push(`${n.miss} miss`)
  if (n.notRun > 0) parts.push(`${n.notRun} not run`)
  if (cell.refused > 0) parts.push(`${cell.refused} refused`)
  return parts.join(', ')
}

/** A cell's text: "bridged ... · native ...". */
export function cellText (cell: NeedleCell, footnote: (verdict: string) => number): string {
  return `bridged ${bridgedText(cell, footnote)} · native ${nativeText(cell)}`
}

function escapeCell (s: string): string {
  return s.replace(/\\/g, '\\\\').replace(/\|/g, '\\|').replace(/\r?\n/g, ' ')
}

/** The grid as a markdown table (depth rows, length columns), its footnotes and a one-line tally. */
export function needleTable (grid: NeedleGrid): string {
  const footnote = (v: string): number => grid.declinedVerdicts.indexOf(v) + 1
  const lines: string[] = []
  lines.push(`| depth \\ tokens | ${grid.lengths.join(' | ')} |`)
  lines.push(`| --- |${grid.lengths.map(() => ' --- |').join('')}`)
  grid.depths.forEach((d, i) => {
    const cells = grid.cells[i].map((c) => c === null ? '—' : escapeCell(cellText(c, footnote)))
    lines.push(`| ${depthLabel(d)} | ${cells.join(' | ')} |`)
  })
  const t = tally(grid)
  lines.push('')
  lines.push(`Bridged: ${t.bridgedPass} pass, ${t.bridgedMiss} miss (of ${t.bridgedComplete} complete), ${t.notBridged} not bridged, ${t.refused} refused. Native: ${t.nativePass} pass, ${t.nativeMiss} miss.`)
  if (grid.declinedVerdicts.length > 0) {
    lines.push('')
    grid.declinedVerdicts.forEach((v, i) => lines.push(`- [${i + 1}] ${escapeCell(v)}`))
  }
  return lines.join('\n') + '\n'
}

/** Totals over a grid. */
export function tally (grid: NeedleGrid): { bridgedPass: number, bridgedMiss: number, bridgedComplete: number, notBridged: number, refused: number, nativePass: number, nativeMiss: number } {
  const t = { bridgedPass: 0, bridgedMiss: 0, bridgedComplete: 0, notBridged: 0, refused: 0, nativePass: 0, nativeMiss: 0 }
  for (const row of grid.cells) {
    for (const c of row) {
      if (c === null) continue
      t.bridgedPass += c.bridged.pass
      t.bridgedMiss += c.bridged.miss
      for (const n of c.bridged.notBridged.values()) t.notBridged += n
      t.refused += c.refused
      t.nativePass += c.native.pass
      t.nativeMiss += c.native.miss
    }
  }
  t.bridgedComplete = t.bridgedPass + t.bridgedMiss
  return t
}

/** Every environment's table under its own heading. */
export function needleMarkdown (records: readonly NeedleRunRecord[]): string {
  return needleGrids(records).map((g) => `### Needle retrieval, environment ${g.environment.id}\n\n${g.environment.model}, ${g.environment.cores} cores.\n\n${needleTable(g)}`).join('\n')
}

/** The heatmap's colours by cell state. */
export const HEATMAP_COLOURS = {
  pass: '#2e7d32',
  miss: '#c62828',
  mixed: '#ef6c00',
  'not-bridged': '#9e9e9e',
  refused: '#6a1b9a',
  'native-pass': '#1565c0',
  'native-miss': '#ad1457',
} as const

/** What colour a cell gets: bridged pass/miss/mixed over complete runs, else not-bridged or refused, else the native result. */
export function cellState (cell: NeedleCell): keyof typeof HEATMAP_COLOURS {
  const b = cell.bridged
  const complete = b.pass + b.miss
  if (complete > 0) return b.miss === 0 ? 'pass' : b.pass === 0 ? 'miss' : 'mixed'
  if (b.notBridged.size > 0) return 'not-bridged'
  if (cell.refused > 0 && cell.native.pass + cell.native.miss === 0) return 'refused'
  return cell.native.miss === 0 && cell.native.pass > 0 ? 'native-pass' : 'native-miss'
}

function xml (s: string): string {
  return s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;')
}

/** The grid as a self-contained SVG: one rect per recorded cell, with a <title> saying what it holds. */
export function needleHeatmapSvg (grid: NeedleGrid): string {
  const cw = 120
  const ch = 48
  const left = 70
  const top = 56
  const legendH = 24 * 3
  const width = Math.max(left + cw * grid.lengths.length + 16, 8 + 4 * 150)
  const height = top + ch * grid.depths.length + 16 + legendH
  const footnote = (v: string): number => grid.declinedVerdicts.indexOf(v) + 1
  const out: string[] = []
  out.push(`<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" font-family="sans-serif" font-size="12">`)
  out.push(`<title>Needle retrieval, ${xml(grid.environment.id)}: depth x prompt tokens</title>`)
  out.push(`<text x="${left}" y="18" font-size="14">${xml(`Needle retrieval (${grid.environment.id})`)}</text>`)
  out.push(`<text x="${left}" y="36" fill="#555">prompt tokens →</text>`)
  grid.lengths.forEach((len, j) => out.push(`<text x="${left + j * cw + cw / 2}" y="${top - 6}" text-anchor="middle">${len}</text>`))
  out.push(`<text x="8" y="${top - 6}" fill="#555">depth ↓</text>`)
  grid.depths.forEach((d, i) => {
    out.push(`<text x="${left - 8}" y="${top + i * ch + ch / 2 + 4}" text-anchor="end">${depthLabel(d)}</text>`)
    grid.lengths.forEach((len, j) => {
      const cell = grid.cells[i][j]
      if (cell === null) return
      const x = left + j * cw
      const y = top + i * ch
      const state = cellState(cell)
      const complete = cell.bridged.pass + cell.bridged.miss
      const judged = cell.native.pass + cell.native.miss
      const bLine = complete > 0 ? `B ${cell.bridged.pass}/${complete}${complete < cell.runs ? ` (+${cell.runs - complete})` : ''}` : state === 'refused' ? 'refused' : cell.bridged.notBridged.size > 0 ? 'not bridged' : 'B not run'
      const nLine = judged > 0 ? `N ${cell.native.pass}/${judged}` : 'N not run'
      const title = `${len} tokens, depth ${depthLabel(d)}: ${cellText(cell, footnote)}; seeds ${cell.seeds.join(', ')}`
      out.push(`<g><title>${xml(title)}</title><rect x="${x + 1}" y="${y + 1}" width="${cw - 2}" height="${ch - 2}" fill="${HEATMAP_COLOURS[state]}"/>` +
        `<text x="${x + cw / 2}" y="${y + 20}" text-anchor="middle" fill="#fff">${bLine}</text>` +
        `<text x="${x + cw / 2}" y="${y + 36}" text-anchor="middle" fill="#fff">${nLine}</text></g>`)
    })
  })
  const states = Object.keys(HEATMAP_COLOURS) as Array<keyof typeof HEATMAP_COLOURS>
  const ly = top + ch * grid.depths.length + 16
  states.forEach((s, k) => {
    const x = 8 + (k % 4) * 150
    const y = ly + Math.floor(k / 4) * 24
    out.push(`<rect x="${x}" y="${y}" width="14" height="14" fill="${HEATMAP_COLOURS[s]}"/><text x="${x + 20}" y="${y + 12}">${s}</text>`)
  })
  out.push(`<text x="8" y="${ly + 60}" fill="#555">B: bridged passes / complete runs (+ runs not bridged); N: native passes / runs. Hover a cell for its runs.</text>`)
  out.push('</svg>')
  return out.join('\n') + '\n'
}
