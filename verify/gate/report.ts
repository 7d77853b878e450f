// The gate's report as text: the places read, each layer type's tables (with the angle error by
// position for every outlier), the needle runs judged, every finding, and the one-line verdict
// last. The same text is printed by `pd-bridge gate` and written to report.md.
import type { AngleErrorPoint } from './angle-error.ts'
import { fmt, type Finding } from './finding.ts'
import { showValue, type GateReport } from './gate-report.ts'
import { PLACE_NAMES, PLACE_TITLES } from './places.ts'
import type { NeedleJudgement } from './needle-check.ts'
import type { LayerTypeVerdict } from './rope-check.ts'

const STATUS: Record<Finding['status'], string> = { pass: 'ok  ', fail: 'FAIL', warn: 'warn', skip: 'skip' }

/** The angle-error rows as an aligned text table. */
export function angleTable (rows: readonly AngleErrorPoint[]): string[] {
  const out = ['      position    error (rad)  pair    drift (rad)']
  for (const r of rows) {
    out.push(`${fmt(r.position).padStart(14)}  ${r.error.toExponential(3).padStart(13)}  ${String(r.pair).padStart(4)}  ${r.drift.toExponential(3).padStart(13)}`)
  }
  return out
}

function ropeSection (v: LayerTypeVerdict, report: GateReport): string[] {
  const lines: string[] = []
  const extent = report.places[v.consensus[0]]?.rope[v.layerType].extent
  if (v.outliers.length === 0) {
    lines.push(`  ${v.layerType}: ${v.consensus.join(', ')} imply bit-identical tables${extent === undefined ? '' : ` over ${fmt(extent)} positions`}`)
  } else {
    lines.push(`  ${v.layerType}: ${v.consensus.join(', ')} agree; ${v.outliers.map((o) => o.place).join(', ')} differ${v.outliers.length === 1 ? 's' : ''}${v.consensus.length === 1 ? ' (no majority: the decoder is the reference)' : ''}`)
  }
  for (const o of v.outliers) {
    lines.push(`    ${o.place} (${o.file}) vs ${o.against}:`)
    for (const f of o.fields) {
      lines.push(`      ${f.source.file} ${f.source.field}: ${showValue(f.value)} here, ${showValue(f.consensusValue)} in ${o.against}${f.source.note === undefined ? '' : ` [${f.source.note}]`}`)
    }
    if (o.fields.length === 0) lines.push('      no raw key differs, yet the tables do')
    lines.push(`      first difference: position ${fmt(o.first.position)}, pair ${o.first.pair}: ${o.first.what}`)
    if (o.angle !== undefined) {
      lines.push('      angle error by position (max over pairs, wrapped to [-pi, pi]; drift unwrapped):')
      for (const row of angleTable(o.angle.table)) lines.push(`      ${row}`)
      const x = o.angle.firstExceeding
      lines.push(x === null
        ? `      the error stays at or under ${o.angle.threshold} rad over all ${fmt(o.angle.extent)} shared positions`
        : `      first exceeds ${o.angle.threshold} rad at position ${fmt(x.position)} (pair ${x.pair}, ${x.error.toExponential(3)} rad)`)
      const plot = report.plots.get(`${v.layerType}/${o.place}`)
      if (plot !== undefined) lines.push(`      plot: ${plot}`)
    }
  }
  for (const n of v.notes) lines.push(`    note: ${n}`)
  return lines
}

function findingLine (f: Finding): string {
  const where = [f.file, f.field].filter((x) => x !== undefined).join(' ')
  return `  ${STATUS[f.status]} ${f.check.padEnd(9)} ${where === '' ? '' : `${where}: `}${f.message}`
}

const RUN_STATUS: Record<NeedleJudgement['status'], string> = { pass: 'PASS', fail: 'FAIL', 'not-evidence': 'none' }

// The needle law's runs: which geometry they must carry, and each run's status and source.
function needleSection (report: GateReport): string[] {
  const g = report.needleGeometry
  const lines = ['needle law (a needle retrieved through the bridge, above the native window, with a fresh seed):']
  if (g !== undefined) lines.push(`  runs count under geometry ${g.key.slice(0, 16)} (decoder store ${g.store.slice(0, 16)} + sidecar ${g.sidecar.slice(0, 16)})`)
  if (report.needle.length === 0) lines.push('  no run judged')
  for (const r of report.needle) {
    const rec = r.record
    const b = rec?.bridged
    // The verdict's reason can be long; the finding below has it whole.
    const verdict = b === null || b === undefined ? '' : b.verdict.length > 72 ? `${b.verdict.slice(0, 69)}...` : b.verdict
    const what = rec === null ? '' : ` seed ${rec.seed}, ${b === null || b === undefined ? 'no bridged leg' : `verdict "${verdict}", answered ${JSON.stringify(b.answer)}`}`
    lines.push(`  ${RUN_STATUS[r.status]} ${r.source}:${what}`)
  }
  return lines
}

/** The full report text, ending with the verdict line. */
export function renderReport (report: GateReport): string {
  const lines: string[] = ['pd-bridge window gate', 'places:']
  for (const name of PLACE_NAMES) {
    const p = report.places[name]
    lines.push(`  ${name.padEnd(8)} ${p === undefined ? '(not read)' : p.file}  [${PLACE_TITLES[name]}]`)
  }
  if (report.rope.length > 0) {
    lines.push('rope tables (effective, compared bit for bit):')
    for (const v of report.rope) lines.push(...ropeSection(v, report))
  }
  if (report.native !== undefined && report.native.differing.length > 0) {
    lines.push(`bridge vs native: ${report.native.summary}`)
    for (const d of report.native.differing) lines.push(`  ${d.name}: ${d.detail}`)
  }
  lines.push(...needleSection(report))
  lines.push('findings:')
  const order: Finding['status'][] = ['fail', 'warn', 'skip', 'pass']
  for (const status of order) for (const f of report.findings) if (f.status === status) lines.push(findingLine(f))
  if (report.reportFile !== undefined) lines.push(`report: ${report.reportFile} (with report.json and the plots beside it)`)
  lines.push(report.verdict.line)
  return lines.join('\n') + '\n'
}
