// The report's third chart: what each bridged stage costs per bridged token as prompts grow. Both
// axes are log scales (prompt tokens in octaves, µs per token in decades), so a stage whose time
// grows linearly with the prompt is a flat line and one that grows faster rises. Drawn from
// costPerTokenData, which the tests read directly; same SVG style and stage colours as charts.ts.
import { escapeXml, groupDigits, H, legendSwatch, n, PAD, STAGES, svg, W, xAxis, yAxis } from './charts.ts'
import type { BridgedLeg } from './record.ts'
import { BRIDGED_VERDICT, median, type EnvironmentSummary } from './summary.ts'

/** A stage the cost chart draws (the stage chart's five, in pipeline order). */
export type CostStage = typeof STAGES[number]['key']

/** The fewest sizes with complete bridged runs that get a cost chart: fewer say nothing about growth. */
export const COST_CHART_MIN_SIZES = 3

/** What the cost chart draws, one entry per size in each array (sizes ascending). */
export interface CostPerTokenData {
  /** The sizes with at least one complete bridged run that bridged tokens. */
  targetTokens: number[]
  /** Median prompt tokens of those runs' bridged legs: each size's x. */
  promptTokens: number[]
  /** How many such runs each size has. */
  runs: number[]
  /** Per stage: the median over the size's runs of stage ms * 1000 / bridged tokens (µs per bridged token); null where none of them timed it. */
  usPerToken: Record<CostStage, Array<number | null>>
  /** Per stage: how many runs that median is over. */
  timed: Record<CostStage, number[]>
}

/** A bridged leg the cost chart counts: verdict complete, some tokens bridged. */
function counts (leg: BridgedLeg): boolean {
  return leg.verdict.trim().startsWith(BRIDGED_VERDICT) && leg.bridgedTokens > 0
}

/** Each size's µs per bridged token by stage, medians over its complete bridged runs (a run whose stage is null is left out of that stage). */
export function costPerTokenData (env: EnvironmentSummary): CostPerTokenData {
  const data: CostPerTokenData = {
    targetTokens: [],
    promptTokens: [],
    runs: [],
    usPerToken: Object.fromEntries(STAGES.map((st) => [st.key, []])) as unknown as CostPerTokenData['usPerToken'],
    timed: Object.fromEntries(STAGES.map((st) => [st.key, []])) as unknown as CostPerTokenData['timed'],
  }
  for (const size of env.sizes) {
    const legs = size.bridgedLegs.filter(counts)
    if (legs.length === 0) continue
    data.targetTokens.push(size.targetTokens)
    data.promptTokens.push(median(legs.map((b) => b.promptTokens))!)
    data.runs.push(legs.length)
    for (const st of STAGES) {
      const values = legs.flatMap((b) => {
        const ms = b.stagesMs[st.key]
        return ms === null ? [] : [(ms * 1000) / b.bridgedTokens]
      })
      data.usPerToken[st.key].push(median(values))
      data.timed[st.key].push(values.length)
    }
  }
  return data
}

/** Whether `env` gets a cost chart: complete bridged runs at COST_CHART_MIN_SIZES sizes or more. */
export function hasCostChart (env: EnvironmentSummary): boolean {
  return costPerTokenData(env).targetTokens.length >= COST_CHART_MIN_SIZES
}

/** µs per token as the point titles give it: 4 significant digits, whole µs from 1,000 up. */
export function formatUs (us: number): string {
  return us >= 1000 ? String(Math.round(us)) : String(Number(us.toPrecision(4)))
}

/** The x axis's ticks: powers of two inside [lo, hi] (log2 exponents), every `step`-th so at most 7 are labelled. */
function octaveTicks (lo: number, hi: number): number[] {
  for (let step = 1; ; step++) {
    const ticks: number[] = []
    for (let k = Math.ceil(lo / step) * step; k <= hi; k += step) ticks.push(k)
    if (ticks.length <= 7) return ticks
  }
}

/**
 * µs per bridged token by stage vs prompt tokens, for the sizes of costPerTokenData: one line
 * and one point per size for each stage (class `point`, its exact value in a <title>). The x axis
 * is log2 (ticks at powers of two), the y axis log10 (ticks at decades). A value of 0 or none has
 * no point (a log scale has no 0); the line joins the points a stage has.
 */
export function costPerTokenChart (env: EnvironmentSummary): string {
  const data = costPerTokenData(env)
  const values = STAGES.flatMap((st) => data.usPerToken[st.key]).filter((v): v is number => v !== null && v > 0)
  // x: a quarter octave either side of the sizes (an octave when there is one), widened to whole
  // octaves when no power of two falls inside.
  const logs = data.promptTokens.map((t) => Math.log2(Math.max(1, t)))
  let x0 = logs.length === 0 ? 10 : Math.min(...logs) - 0.25
  let x1 = logs.length === 0 ? 11 : Math.max(...logs) + 0.25
  if (x1 - x0 < 1) { x0 -= 0.5; x1 += 0.5 }
  if (Math.ceil(x0) > Math.floor(x1)) { x0 = Math.floor(x0); x1 = Math.ceil(x1) }
  // y: whole decades around the values.
  const e0 = values.length === 0 ? 0 : Math.floor(Math.log10(Math.min(...values)))
  const e1 = Math.max(e0 + 1, values.length === 0 ? 1 : Math.ceil(Math.log10(Math.max(...values))))
  const y0 = H - PAD.bottom
  const px = (tokens: number) => PAD.left + ((Math.log2(tokens) - x0) / (x1 - x0)) * (W - PAD.left - PAD.right)
  const py = (us: number) => y0 - ((Math.log10(us) - e0) / (e1 - e0)) * (H - PAD.top - PAD.bottom)
  const decades = Array.from({ length: e1 - e0 + 1 }, (_, i) => e0 + i)
  const parts: string[] = []
  parts.push(`<text x="${(PAD.left + W - PAD.right) / 2}" y="20" text-anchor="middle" font-size="14">Bridged cost per token by stage vs prompt tokens (${escapeXml(env.environment.id)})</text>`)
  parts.push(yAxis(decades, (e) => py(10 ** e), (e) => e >= 0 ? groupDigits(10 ** e) : (10 ** e).toFixed(-e), 'µs per bridged token (log scale)', y0, PAD.top))
  parts.push(xAxis(octaveTicks(x0, x1), (k) => px(2 ** k), (k) => groupDigits(2 ** k), 'prompt tokens sent (log scale)', y0, PAD.top))
  const points: string[] = []
  for (const st of STAGES) {
    const pts = data.promptTokens.flatMap((x, i) => {
      const y = data.usPerToken[st.key][i]
      return y === null || y <= 0 ? [] : [{ x, y, runs: data.timed[st.key][i] }]
    })
    if (pts.length > 1) parts.push(`<polyline class="series" data-series="${escapeXml(st.label)}" fill="none" stroke="${st.color}" stroke-width="2" points="${pts.map((p) => `${n(px(p.x))},${n(py(p.y))}`).join(' ')}"/>`)
    for (const p of pts) {
      points.push(`<circle class="point" data-series="${escapeXml(st.label)}" cx="${n(px(p.x))}" cy="${n(py(p.y))}" r="4" fill="${st.color}"><title>${escapeXml(`${st.label} at ${groupDigits(p.x)} tokens: ${formatUs(p.y)} µs per token (median of ${p.runs} run${p.runs === 1 ? '' : 's'})`)}</title></circle>`)
    }
  }
  // Points over every line, so no line hides another stage's point.
  parts.push(...points)
  STAGES.forEach((st, i) => {
    parts.push(legendSwatch(i, (x, y) => `<line x1="${x - 8}" y1="${y}" x2="${x + 8}" y2="${y}" stroke="${st.color}" stroke-width="2"/><circle cx="${x}" cy="${y}" r="4" fill="${st.color}"/>`, st.label))
  })
  parts.push(`<text x="${W - PAD.right + 32}" y="${PAD.top + STAGES.length * 20 + 6}" font-size="10" fill="#555">(median per size, complete runs)</text>`)
  return svg(parts)
}

/** The line under the cost chart: what it shows and how to read its slopes. */
export function costChartNote (env: EnvironmentSummary): string {
  const data = costPerTokenData(env)
  const runs = data.runs.reduce((a, r) => a + r, 0)
  return `Cost chart: µs per bridged token by stage, median per size over complete bridged runs (${runs} run${runs === 1 ? '' : 's'} at ${data.targetTokens.length} prompt sizes; both axes log scale); ` +
    'flat lines are linear costs, rising ones grow faster than the prompt.'
}
