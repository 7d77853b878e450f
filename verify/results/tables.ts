// The report's tables as plain data, so RESULTS.md and report.html show exactly the same cells.
import type { EnvironmentSummary, SizeSummary } from './summary.ts'

import { NOT_RUN, type Table } from './table.ts'

export { NOT_RUN, type Table } from './table.ts'

function seconds (ms: number | null): string {
  return ms === null ? NOT_RUN : `${(ms / 1000).toFixed(2)} s`
}

function millis (ms: number | null): string {
  return ms === null ? NOT_RUN : `${ms.toFixed(1)} ms`
}

function fixed (n: number | null, digits: number, unit = ''): string {
  return n === null ? NOT_RUN : `${n.toFixed(digits)}${unit}`
}

/** Bytes in binary units, one decimal. */
export function formatBytes (b: number): string {
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB']
  let v = b
  let u = 0
  while (v >= 1024 && u < units.length - 1) {
    v /= 1024
    u++
  }
  return u === 0 ? `${b} B` : `${v.toFixed(1)} ${units[u]}`
}

/** Verdict counts in a fixed order: complete first, the rest by name. */
export function formatVerdicts (verdicts: Record<string, number>): string {
  const names = Object.keys(verdicts).sort((a, b) => a === 'complete' ? -1 : b === 'complete' ? 1 : a.localeCompare(b))
  return names.map((v) => `${verdicts[v]} ${v}`).join(', ')
}

/** The row label: the median prompt tokens actually sent, whole. */
function tokensCell (s: SizeSummary): string {
  return String(Math.round(s.promptTokens ?? s.targetTokens))
}

/** The ratio with how many pairs it is over, and how many of those ran their legs in two invocations. */
export function ratioCell (s: SizeSummary): string {
  if (s.ratio === null) return NOT_RUN
  return `${s.ratio.toFixed(2)}× (${s.pairs} paired${s.pairsApart > 0 ? `, ${s.pairsApart} in two invocations` : ''})`
}

/** The cold-prompt tables of one environment, in report order (none when it has no runs). */
export function coldTables (env: EnvironmentSummary): Table[] {
  if (env.sizes.length === 0) return []
  return [
    {
      title: 'Cold prompts: decoder alone vs bridged',
      headers: ['cold prompt tokens', 'runs', 'decoder alone', 'bridged (complete only)', 'ratio (median, paired)', 'verdicts', 'answers differ', 'answers cut at budget'],
      rows: env.sizes.map((s) => [tokensCell(s), String(s.runs), seconds(s.nativeMs), seconds(s.bridgedMs), ratioCell(s), formatVerdicts(s.verdicts), String(s.disagreements), String(s.truncated)]),
    },
    {
      title: 'Stage breakdown (medians over complete runs)',
      headers: ['cold prompt tokens', 'engine prefill', 'transfer', 'assembly', 'block write', 'decoder TTFT', 'end to end'],
      rows: env.sizes.map((s) => [tokensCell(s), millis(s.stagesMs.enginePrefill), millis(s.stagesMs.transfer), millis(s.stagesMs.assembly), millis(s.stagesMs.blockWrite),
        millis(s.stagesMs.decoderTtft), millis(s.stagesMs.endToEnd)]),
    },
    {
      title: 'Payload bytes per bridged token',
      headers: ['cold prompt tokens', 'moved', 'minimum (blocks)', 'moved / minimum'],
      rows: env.sizes.map((s) => [
        tokensCell(s),
        fixed(s.bytesPerToken, 1, ' B'),
        fixed(s.minBytesPerToken, 1, ' B'),
        s.bytesPerToken === null || s.minBytesPerToken === null || s.minBytesPerToken === 0 ? NOT_RUN : `${(s.bytesPerToken / s.minBytesPerToken).toFixed(3)}×`,
      ]),
    },
    {
      title: 'Decode rate (tokens/s after the first, medians)',
      headers: ['cold prompt tokens', 'decoder alone', 'bridged'],
      rows: env.sizes.map((s) => [tokensCell(s), fixed(s.nativeDecodeRate, 1), fixed(s.bridgedDecodeRate, 1)]),
    },
    {
      title: 'Peak memory (highest RSS over all runs)',
      headers: ['process', 'peak RSS'],
      rows: Object.entries(env.peakMemoryBytes).map(([p, b]) => [p, formatBytes(b)]),
    },
  ]
}

/** What the environment is: machine, Node, OS, model, config fingerprint, and the commits its records came from. */
export function environmentTable (env: EnvironmentSummary): Table {
  const e = env.environment
  return {
    title: 'Environment',
    headers: ['field', 'value'],
    rows: [
      ['id', e.id],
      ['CPU', e.cpu],
      ['cores', String(e.cores)],
      ['memory', formatBytes(e.memoryBytes)],
      ['Node', e.node],
      ['OS', e.os],
      ['model', e.model],
      ['config fingerprint', e.configFingerprint],
      ['commits', env.commits.join(', ')],
    ],
  }
}
