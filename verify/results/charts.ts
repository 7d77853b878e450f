// The report's charts as standalone SVG: time vs prompt tokens (both legs) and each size's
// stage shares (the third, cost per token by stage, is in cost-chart.ts and draws with the helpers
// exported here). Plain SVG with <title> tooltips, so the same markup works as a file and inline.
// Both axes carry labelled ticks (values, with the unit on the tick or the axis title).
import type { EnvironmentSummary } from './summary.ts'
import { groupDigits } from './table.ts'

/** Escape text for XML/HTML content and attribute values. */
export function escapeXml (text: string): string {
  return text.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;').replace(/'/g, '&#39;')
}

/** Every chart's width, default height and plot margins. */
export const W = 720
export const H = 400
export const PAD = { left: 72, right: 210, top: 40, bottom: 60 }
const SERIES = [
  { median: 'nativeMs', run: 'nativeMs', label: 'decoder alone', color: '#c0392b' },
  { median: 'bridgedMs', run: 'bridgedMs', label: 'bridged (complete)', color: '#2471a3' },
] as const
/** A bridged leg whose verdict was not `complete`: plotted, never counted as bridged. */
const NOT_COUNTED = { label: 'bridged, not complete', color: '#7f8c8d' }
const GRID = '#e5e5e5'

/** A coordinate or value with at most 2 decimals, trailing zeros dropped. */
export function n (v: number): string {
  return Number(v.toFixed(2)).toString()
}

// Kept in table.ts, which sections the summary uses may import without a cycle.
export { groupDigits } from './table.ts'

/** Tick values from 0 to at least `max`: the finest step of 1, 2, 2.5 or 5 times a power of ten that needs at most `maxSteps` steps. */
export function niceTicks (max: number, maxSteps = 8): number[] {
  if (!(max > 0)) return [0, 1]
  let mag = 10 ** Math.floor(Math.log10(max / maxSteps))
  for (;;) {
    for (const m of [1, 2, 2.5, 5]) {
      const step = m * mag
      const count = Math.ceil(max / step - 1e-9)
      // Rounded so a step like 0.1 does not print as 0.30000000000000004.
      if (count <= maxSteps) return Array.from({ length: count + 1 }, (_, i) => Number((i * step).toPrecision(12)))
    }
    mag *= 10
  }
}

/** An x axis: the line, one labelled tick per value, its title. */
export function xAxis (ticks: number[], px: (v: number) => number, label: (v: number) => string, title: string, y0: number, yTop: number): string {
  const parts = [`<line x1="${PAD.left}" y1="${y0}" x2="${W - PAD.right}" y2="${y0}" stroke="#000"/>`]
  for (const t of ticks) {
    const x = n(px(t))
    parts.push(`<g class="tick"><line x1="${x}" y1="${yTop}" x2="${x}" y2="${y0}" stroke="${GRID}"/><line x1="${x}" y1="${y0}" x2="${x}" y2="${y0 + 5}" stroke="#000"/><text x="${x}" y="${y0 + 18}" text-anchor="middle" font-size="11">${escapeXml(label(t))}</text></g>`)
  }
  parts.push(`<text class="axis-title" x="${(PAD.left + W - PAD.right) / 2}" y="${y0 + 40}" text-anchor="middle" font-size="12">${escapeXml(title)}</text>`)
  return `<g class="axis x">${parts.join('')}</g>`
}

/** A y axis with numeric ticks: the line, one labelled tick per value and gridline, its title. */
export function yAxis (ticks: number[], py: (v: number) => number, label: (v: number) => string, title: string, y0: number, yTop: number): string {
  const parts = [`<line x1="${PAD.left}" y1="${yTop}" x2="${PAD.left}" y2="${y0}" stroke="#000"/>`]
  for (const t of ticks) {
    const y = n(py(t))
    parts.push(`<g class="tick"><line x1="${PAD.left}" y1="${y}" x2="${W - PAD.right}" y2="${y}" stroke="${GRID}"/><line x1="${PAD.left - 5}" y1="${y}" x2="${PAD.left}" y2="${y}" stroke="#000"/><text x="${PAD.left - 8}" y="${n(py(t) + 4)}" text-anchor="end" font-size="11">${escapeXml(label(t))}</text></g>`)
  }
  const mid = (yTop + y0) / 2
  parts.push(`<text class="axis-title" x="16" y="${mid}" text-anchor="middle" font-size="12" transform="rotate(-90 16 ${mid})">${escapeXml(title)}</text>`)
  return `<g class="axis y">${parts.join('')}</g>`
}

/** One legend row at the right of the plot: `mark` draws its symbol centred on (x, y). */
export function legendSwatch (i: number, mark: (x: number, y: number) => string, label: string): string {
  const x = W - PAD.right + 18
  const y = PAD.top + i * 20 + 6
  return `<g class="legend">${mark(x, y)}<text x="${x + 14}" y="${y + 4}" font-size="12">${escapeXml(label)}</text></g>`
}

/** A cross marking a bridged leg that was not complete. */
function cross (x: number, y: number, color: string): string {
  const d = 3.5
  return `<path d="M${n(x - d)},${n(y - d)}L${n(x + d)},${n(y + d)}M${n(x - d)},${n(y + d)}L${n(x + d)},${n(y - d)}" stroke="${color}" stroke-width="2" fill="none"/>`
}

/**
 * End-to-end time vs prompt tokens. For each leg, a line through each size's median (filled
 * points, class `point`) and every recorded run as a ring (class `run`); a bridged leg
 * whose verdict was not `complete` is drawn as a grey cross and never counted as bridged. A leg
 * that was not run has no point.
 */
export function timeChart (env: EnvironmentSummary): string {
  const runs = env.sizes.flatMap((s) => s.points)
  const xs = [...env.sizes.map((s) => s.promptTokens ?? s.targetTokens), ...runs.map((r) => r.promptTokens)]
  const ys = [...env.sizes.flatMap((s) => [s.nativeMs, s.bridgedMs]), ...runs.flatMap((r) => [r.nativeMs, r.bridgedMs])].filter((v): v is number => v !== null)
  const xTicks = niceTicks(Math.max(1, ...xs))
  const yTicks = niceTicks(Math.max(1, ...ys) / 1000)
  const xMax = xTicks.at(-1)!
  const yMax = yTicks.at(-1)! * 1000
  const y0 = H - PAD.bottom
  const px = (x: number) => PAD.left + (x / xMax) * (W - PAD.left - PAD.right)
  const py = (ms: number) => y0 - (ms / yMax) * (H - PAD.top - PAD.bottom)
  const parts: string[] = []
  parts.push(`<text x="${(PAD.left + W - PAD.right) / 2}" y="20" text-anchor="middle" font-size="14">Cold prompt: end-to-end time vs prompt tokens (${escapeXml(env.environment.id)})</text>`)
  parts.push(yAxis(yTicks, (s) => py(s * 1000), (s) => `${n(s)} s`, 'end-to-end time (seconds)', y0, PAD.top))
  parts.push(xAxis(xTicks, px, groupDigits, 'prompt tokens sent', y0, PAD.top))
  const medians: string[] = []
  for (const series of SERIES) {
    const pts = env.sizes.flatMap((s) => {
      const y = s[series.median]
      const count = series.median === 'nativeMs' ? s.points.filter((r) => r.nativeMs !== null).length : s.points.filter((r) => r.counted).length
      return y === null ? [] : [{ x: s.promptTokens ?? s.targetTokens, y, count }]
    })
    if (pts.length > 1) parts.push(`<polyline class="series" fill="none" stroke="${series.color}" stroke-width="2" points="${pts.map((p) => `${n(px(p.x))},${n(py(p.y))}`).join(' ')}"/>`)
    for (const p of pts) {
      medians.push(`<circle class="point" data-series="${escapeXml(series.label)}" cx="${n(px(p.x))}" cy="${n(py(p.y))}" r="4" fill="${series.color}"><title>${escapeXml(series.label)}, median of ${p.count} run${p.count === 1 ? '' : 's'}: ${Math.round(p.x)} tokens, ${n(p.y / 1000)} s</title></circle>`)
    }
  }
  // Every run's legs as rings (hollow, so a median inside stays visible; the whole disc answers
  // the pointer), the medians over them, then the bridged legs that were not complete, on top.
  const crosses: string[] = []
  for (const r of runs) {
    if (r.nativeMs !== null) {
      parts.push(`<circle class="run" data-series="${SERIES[0].label}" cx="${n(px(r.promptTokens))}" cy="${n(py(r.nativeMs))}" r="6.5" fill="none" pointer-events="all" stroke="${SERIES[0].color}" stroke-width="1.5"><title>${escapeXml(`${SERIES[0].label}, run ${r.runId}: ${r.promptTokens} tokens, ${n(r.nativeMs / 1000)} s`)}</title></circle>`)
    }
    if (r.bridgedMs !== null && r.counted) {
      parts.push(`<circle class="run" data-series="${SERIES[1].label}" cx="${n(px(r.promptTokens))}" cy="${n(py(r.bridgedMs))}" r="6.5" fill="none" pointer-events="all" stroke="${SERIES[1].color}" stroke-width="1.5"><title>${escapeXml(`${SERIES[1].label}, run ${r.runId}: ${r.promptTokens} tokens, ${n(r.bridgedMs / 1000)} s`)}</title></circle>`)
    }
    else if (r.bridgedMs !== null) {
      crosses.push(`<g class="run not-counted" data-series="${NOT_COUNTED.label}">${cross(px(r.promptTokens), py(r.bridgedMs), NOT_COUNTED.color)}<title>${escapeXml(`bridged leg, verdict ${r.verdict ?? ''}, not counted as bridged, run ${r.runId}: ${r.promptTokens} tokens, ${n(r.bridgedMs / 1000)} s`)}</title></g>`)
    }
  }
  parts.push(...medians, ...crosses)
  SERIES.forEach((series, i) => {
    parts.push(legendSwatch(i, (x, y) => `<line x1="${x - 8}" y1="${y}" x2="${x + 8}" y2="${y}" stroke="${series.color}" stroke-width="2"/><circle cx="${x}" cy="${y}" r="4" fill="${series.color}"/>`, `${series.label}, median`))
    parts.push(legendSwatch(i + 2, (x, y) => `<circle cx="${x}" cy="${y}" r="6" fill="none" stroke="${series.color}" stroke-width="1.5"/>`, `${series.label}, one run`))
  })
  parts.push(legendSwatch(4, (x, y) => cross(x, y, NOT_COUNTED.color), NOT_COUNTED.label))
  parts.push(`<text x="${W - PAD.right + 32}" y="${PAD.top + 5 * 20 + 6}" font-size="10" fill="#555">(never counted as bridged)</text>`)
  return svg(parts)
}

/** The bridged stages in pipeline order, with the colours every chart gives them. */
export const STAGES = [
  { key: 'enginePrefill', label: 'engine prefill', color: '#1f618d' },
  { key: 'transfer', label: 'transfer', color: '#48c9b0' },
  { key: 'assembly', label: 'assembly', color: '#f4d03f' },
  { key: 'blockWrite', label: 'block write', color: '#e67e22' },
  { key: 'decoderTtft', label: 'decoder TTFT', color: '#8e44ad' },
] as const

/**
 * Stage shares of the bridged end-to-end time, one stacked bar per size with complete runs (the
 * medians over them). The x axis is the share in percent; each bar's y label is its prompt
 * tokens and its median end-to-end time.
 */
export function stageChart (env: EnvironmentSummary): string {
  const sizes = env.sizes.filter((s) => s.stagesMs.endToEnd !== null && s.stagesMs.endToEnd > 0)
  const barH = 30
  const gap = 12
  const legendBottom = PAD.top + 6 * 20 + 8
  const y0 = Math.max(PAD.top + Math.max(1, sizes.length) * (barH + gap), legendBottom - 20)
  const height = y0 + PAD.bottom
  const plotW = W - PAD.left - PAD.right
  const parts: string[] = []
  parts.push(`<text x="${(PAD.left + W - PAD.right) / 2}" y="20" text-anchor="middle" font-size="14">Bridged stage shares of end-to-end time (${escapeXml(env.environment.id)})</text>`)
  parts.push(xAxis([0, 25, 50, 75, 100], (p) => PAD.left + (p / 100) * plotW, (p) => `${p}%`, 'share of the median bridged end-to-end time', y0, PAD.top))
  const ticks: string[] = []
  sizes.forEach((s, i) => {
    const total = s.stagesMs.endToEnd!
    const y = PAD.top + i * (barH + gap)
    ticks.push(`<g class="tick"><text x="${PAD.left - 8}" y="${y + barH / 2 - 2}" text-anchor="end" font-size="11">${groupDigits(s.promptTokens ?? s.targetTokens)}</text><text x="${PAD.left - 8}" y="${y + barH / 2 + 11}" text-anchor="end" font-size="10" fill="#555">${(total / 1000).toFixed(2)} s</text></g>`)
    let x = PAD.left
    const segments: Array<{ label: string, color: string, ms: number }> = STAGES.map((st) => ({ label: st.label, color: st.color, ms: s.stagesMs[st.key] ?? 0 }))
    const known = segments.reduce((a, seg) => a + seg.ms, 0)
    segments.push({ label: 'other', color: '#bdc3c7', ms: Math.max(0, total - known) })
    const scale = Math.max(total, known)
    for (const seg of segments) {
      const w = (seg.ms / scale) * plotW
      parts.push(`<rect class="segment" x="${n(x)}" y="${y}" width="${n(w)}" height="${barH}" fill="${seg.color}"><title>${escapeXml(seg.label)}: ${n(seg.ms)} ms (${n((seg.ms / scale) * 100)}%) of ${n(total / 1000)} s end to end at ${Math.round(s.promptTokens ?? s.targetTokens)} tokens</title></rect>`)
      x += w
    }
  })
  const mid = (PAD.top + y0) / 2
  parts.push(`<g class="axis y"><line x1="${PAD.left}" y1="${PAD.top}" x2="${PAD.left}" y2="${y0}" stroke="#000"/>${ticks.join('')}<text class="axis-title" x="16" y="${mid}" text-anchor="middle" font-size="12" transform="rotate(-90 16 ${mid})">prompt tokens, median time</text></g>`)
  const legend: Array<{ label: string, color: string }> = [...STAGES, { label: 'other', color: '#bdc3c7' }]
  legend.forEach((st, i) => {
    parts.push(legendSwatch(i, (x, y) => `<rect x="${x - 6}" y="${y - 6}" width="12" height="12" fill="${st.color}"/>`, st.label))
  })
  return svg(parts, height)
}

/** The <svg> element around `parts`, one per line. */
export function svg (parts: string[], height = H): string {
  return `<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${height}" viewBox="0 0 ${W} ${height}" font-family="sans-serif">\n${parts.map((p) => `  ${p}`).join('\n')}\n</svg>\n`
}

/** The line under the charts: how many runs and sizes the time chart holds and what its marks are. */
export function timeChartNote (env: EnvironmentSummary): string {
  const runs = env.sizes.reduce((a, s) => a + s.runs, 0)
  const count = (k: number, one: string): string => `${k} ${one}${k === 1 ? '' : 's'}`
  return `Time chart: ${count(runs, 'recorded run')} at ${count(env.sizes.length, 'prompt size')}. Each leg's line joins its median at each size (filled points), ` +
    'and every run is plotted as well (rings; a bridged leg whose verdict was not complete is a grey cross and is never counted as bridged). ' +
    'The stage chart stacks the median stage times of the complete runs as shares of their median end-to-end time.'
}
