// A small self-contained SVG of angle error against position (log-log): the wrapped error (what a
// rotation gets wrong, at most pi), the unwrapped drift, the threshold and the original window.
// No plotting library: a polyline per series and a few ticks are all a report needs.
import { angleErrorAt, plotPositions } from './angle-error.ts'

/** What to plot. */
export interface AnglePlot {
  title: string
  /** Inverse frequencies of the two tables (equal length). */
  inv: [Float32Array, Float32Array]
  /** Positions covered by both tables: the x axis runs over [1, extent). */
  extent: number
  threshold: number
  /** Marked with a vertical line when given (YaRN's original window). */
  originalMax?: number | null
}

const W = 760
const H = 420
const M = { left: 70, right: 20, top: 40, bottom: 50 }

function esc (s: string): string {
  return s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;')
}

/** The SVG text of the plot. */
export function angleErrorSvg (plot: AnglePlot): string {
  const points = plotPositions(plot.extent, 400).map((p) => angleErrorAt(plot.inv[0], plot.inv[1], p))
  const floor = 1e-8
  const maxDrift = Math.max(Math.PI, ...points.map((p) => p.drift))
  const xMax = Math.log10(Math.max(10, plot.extent - 1))
  const yMin = Math.log10(floor)
  const yMax = Math.ceil(Math.log10(maxDrift))
  const x = (pos: number) => M.left + (Math.log10(Math.max(1, pos)) / xMax) * (W - M.left - M.right)
  const y = (v: number) => H - M.bottom - ((Math.log10(Math.max(floor, v)) - yMin) / (yMax - yMin)) * (H - M.top - M.bottom)
  const line = (key: 'error' | 'drift') => points.map((p) => `${x(p.position).toFixed(1)},${y(p[key]).toFixed(1)}`).join(' ')
  const parts: string[] = []
  parts.push(`<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${H}" viewBox="0 0 ${W} ${H}" font-family="sans-serif" font-size="11">`)
  parts.push(`<rect width="${W}" height="${H}" fill="white"/>`)
  parts.push(`<text x="${W / 2}" y="20" text-anchor="middle" font-size="13">${esc(plot.title)}</text>`)
  for (let d = 0; d <= Math.floor(xMax); d++) {
    const px = x(10 ** d)
    parts.push(`<line x1="${px}" y1="${M.top}" x2="${px}" y2="${H - M.bottom}" stroke="#eee"/>`)
    parts.push(`<text x="${px}" y="${H - M.bottom + 16}" text-anchor="middle">1e${d}</text>`)
  }
  for (let d = Math.ceil(yMin); d <= yMax; d++) {
    const py = y(10 ** d)
    parts.push(`<line x1="${M.left}" y1="${py}" x2="${W - M.right}" y2="${py}" stroke="#eee"/>`)
    parts.push(`<text x="${M.left - 6}" y="${py + 4}" text-anchor="end">1e${d}</text>`)
  }
  parts.push(`<text x="${W / 2}" y="${H - 12}" text-anchor="middle">position</text>`)
  parts.push(`<text x="16" y="${H / 2}" text-anchor="middle" transform="rotate(-90 16 ${H / 2})">angle error (rad)</text>`)
  const ty = y(plot.threshold)
  parts.push(`<line x1="${M.left}" y1="${ty}" x2="${W - M.right}" y2="${ty}" stroke="#c00" stroke-dasharray="6 4"/>`)
  parts.push(`<text x="${W - M.right - 4}" y="${ty - 4}" text-anchor="end" fill="#c00">threshold ${plot.threshold} rad</text>`)
  if (plot.originalMax != null && plot.originalMax < plot.extent) {
    const ox = x(plot.originalMax)
    parts.push(`<line x1="${ox}" y1="${M.top}" x2="${ox}" y2="${H - M.bottom}" stroke="#888" stroke-dasharray="3 3"/>`)
    parts.push(`<text x="${ox + 4}" y="${M.top + 12}" fill="#555">original window ${plot.originalMax}</text>`)
  }
  parts.push(`<polyline fill="none" stroke="#999" stroke-width="1.2" points="${line('drift')}"/>`)
  parts.push(`<polyline fill="none" stroke="#06c" stroke-width="1.5" points="${line('error')}"/>`)
  parts.push(`<text x="${M.left + 8}" y="${M.top + 14}" fill="#06c">max over pairs of |wrapped angle difference|</text>`)
  parts.push(`<text x="${M.left + 8}" y="${M.top + 28}" fill="#777">unwrapped drift</text>`)
  parts.push('</svg>')
  return parts.join('\n') + '\n'
}
