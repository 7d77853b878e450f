// The report's two charts as standalone SVG: time vs prompt tokens (both legs) and each size's
// stage shares. Plain SVG with <title> tooltips, so the same markup works as a file and inline.
import type { EnvironmentSummary } from './summary.ts'

/** Escape text for XML/HTML content and attribute values. */
export function escapeXml (text: string): string {
  return text.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;').replace(/'/g, '&#39;')
}

const W = 640
const H = 360
const PAD = { left: 64, right: 150, top: 32, bottom: 48 }
const SERIES = [
  { key: 'nativeMs', label: 'decoder alone', color: '#c0392b' },
  { key: 'bridgedMs', label: 'bridged (complete)', color: '#2471a3' },
] as const

function n (v: number): string {
  return Number(v.toFixed(2)).toString()
}

/** Time vs prompt tokens: one line per leg through each size's median; a leg not run has no point. */
export function timeChart (env: EnvironmentSummary): string {
  const xs = env.sizes.map((s) => s.promptTokens ?? s.targetTokens)
  const ys = env.sizes.flatMap((s) => [s.nativeMs, s.bridgedMs]).filter((v): v is number => v !== null)
  const xMax = Math.max(1, ...xs)
  const yMax = Math.max(1, ...ys)
  const px = (x: number) => PAD.left + (x / xMax) * (W - PAD.left - PAD.right)
  const py = (y: number) => H - PAD.bottom - (y / yMax) * (H - PAD.top - PAD.bottom)
  const parts: string[] = []
  parts.push(`<text x="${W / 2 - PAD.right / 2}" y="20" text-anchor="middle" font-size="14">Cold prompt: end-to-end time vs prompt tokens (${escapeXml(env.environment.id)})</text>`)
  parts.push(`<line x1="${PAD.left}" y1="${H - PAD.bottom}" x2="${W - PAD.right}" y2="${H - PAD.bottom}" stroke="#000"/>`)
  parts.push(`<line x1="${PAD.left}" y1="${PAD.top}" x2="${PAD.left}" y2="${H - PAD.bottom}" stroke="#000"/>`)
  parts.push(`<text x="${(PAD.left + W - PAD.right) / 2}" y="${H - 12}" text-anchor="middle" font-size="12">prompt tokens (max ${xMax})</text>`)
  parts.push(`<text x="14" y="${(PAD.top + H - PAD.bottom) / 2}" text-anchor="middle" font-size="12" transform="rotate(-90 14 ${(PAD.top + H - PAD.bottom) / 2})">seconds (max ${n(yMax / 1000)})</text>`)
  SERIES.forEach((series, i) => {
    const pts = env.sizes.flatMap((s) => {
      const y = s[series.key]
      return y === null ? [] : [{ x: s.promptTokens ?? s.targetTokens, y }]
    })
    if (pts.length > 1) parts.push(`<polyline class="series" fill="none" stroke="${series.color}" stroke-width="2" points="${pts.map((p) => `${n(px(p.x))},${n(py(p.y))}`).join(' ')}"/>`)
    for (const p of pts) {
      parts.push(`<circle class="point" data-series="${escapeXml(series.label)}" cx="${n(px(p.x))}" cy="${n(py(p.y))}" r="4" fill="${series.color}"><title>${escapeXml(series.label)}: ${Math.round(p.x)} tokens, ${n(p.y / 1000)} s</title></circle>`)
    }
    parts.push(`<rect x="${W - PAD.right + 12}" y="${PAD.top + i * 20}" width="12" height="12" fill="${series.color}"/>`)
    parts.push(`<text x="${W - PAD.right + 30}" y="${PAD.top + i * 20 + 11}" font-size="12">${escapeXml(series.label)}</text>`)
  })
  return svg(parts)
}

const STAGES = [
  { key: 'enginePrefill', label: 'engine prefill', color: '#1f618d' },
  { key: 'transfer', label: 'transfer', color: '#48c9b0' },
  { key: 'assembly', label: 'assembly', color: '#f4d03f' },
  { key: 'blockWrite', label: 'block write', color: '#e67e22' },
  { key: 'decoderTtft', label: 'decoder TTFT', color: '#8e44ad' },
] as const

/** Stage shares of the bridged end-to-end time, one stacked bar per size with complete runs. */
export function stageChart (env: EnvironmentSummary): string {
  const sizes = env.sizes.filter((s) => s.stagesMs.endToEnd !== null && s.stagesMs.endToEnd > 0)
  const barH = 24
  const height = PAD.top + Math.max(1, sizes.length) * (barH + 12) + PAD.bottom
  const plotW = W - PAD.left - PAD.right
  const parts: string[] = []
  parts.push(`<text x="${W / 2 - PAD.right / 2}" y="20" text-anchor="middle" font-size="14">Bridged stage shares of end-to-end time (${escapeXml(env.environment.id)})</text>`)
  sizes.forEach((s, i) => {
    const total = s.stagesMs.endToEnd!
    const y = PAD.top + i * (barH + 12)
    parts.push(`<text x="${PAD.left - 6}" y="${y + barH / 2 + 4}" text-anchor="end" font-size="12">${Math.round(s.promptTokens ?? s.targetTokens)}</text>`)
    let x = PAD.left
    const segments: Array<{ label: string, color: string, ms: number }> = STAGES.map((st) => ({ label: st.label, color: st.color, ms: s.stagesMs[st.key] ?? 0 }))
    const known = segments.reduce((a, seg) => a + seg.ms, 0)
    segments.push({ label: 'other', color: '#bdc3c7', ms: Math.max(0, total - known) })
    const scale = Math.max(total, known)
    for (const seg of segments) {
      const w = (seg.ms / scale) * plotW
      parts.push(`<rect class="segment" x="${n(x)}" y="${y}" width="${n(w)}" height="${barH}" fill="${seg.color}"><title>${escapeXml(seg.label)}: ${n(seg.ms)} ms (${n((seg.ms / scale) * 100)}%)</title></rect>`)
      x += w
    }
  })
  const legend: Array<{ label: string, color: string }> = [...STAGES, { label: 'other', color: '#bdc3c7' }]
  legend.forEach((st, i) => {
    parts.push(`<rect x="${W - PAD.right + 12}" y="${PAD.top + i * 20}" width="12" height="12" fill="${st.color}"/>`)
    parts.push(`<text x="${W - PAD.right + 30}" y="${PAD.top + i * 20 + 11}" font-size="12">${escapeXml(st.label)}</text>`)
  })
  return svg(parts, Math.max(height, PAD.top + 6 * 20 + 8))
}

function svg (parts: string[], height = H): string {
  return `<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${height}" viewBox="0 0 ${W} ${height}" font-family="sans-serif">\n${parts.map((p) => `  ${p}`).join('\n')}\n</svg>\n`
}
