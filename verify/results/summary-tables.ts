// The report's summary, the first thing RESULTS.md and report.html show: the headline ratios of
// every environment with cold-prompt runs, the verdict tallies, the needle tallies and what each
// environment is. Plain data, so both files show the same cells. Every row is one environment's
// own numbers; nothing is computed across environments.
import { tally } from '../needle/heatmap.ts'
import { verdictKind, type EnvironmentSummary } from './summary.ts'
import { formatBytes, NOT_RUN, ratioCell, type Table } from './tables.ts'

/** The summary's tables. */
export type SummaryTableKind = 'headline' | 'verdicts' | 'needle' | 'environments'

/** A summary table: its kind, the line shown instead of it when it has no rows, a note after it. */
export interface SummaryTable extends Table {
  kind: SummaryTableKind
  /** Shown instead of the table when it has no rows. */
  empty: string
  /** A line after the table (empty: none). */
  note: string
}

/**
 * The order of the report's environment sections (and of the summary's rows): environments with
 * cold-prompt runs first, then those with needle runs, then the rest; by id within each.
 */
export function reportOrder (envs: readonly EnvironmentSummary[]): EnvironmentSummary[] {
  const rank = (e: EnvironmentSummary): number => e.sizes.length > 0 ? 0 : e.needle !== null ? 1 : 2
  return [...envs].sort((a, b) => rank(a) - rank(b) || (a.environment.id < b.environment.id ? -1 : a.environment.id > b.environment.id ? 1 : 0))
}

/** What a ratio (decoder alone / bridged) says, in words. */
export function ratioReading (ratio: number | null): string {
  if (ratio === null) return 'no paired run'
  const r = ratio.toFixed(2)
  return r === '1.00' ? 'about even' : ratio > 1 ? 'bridged faster' : 'bridged slower'
}

function seconds (ms: number | null): string {
  return ms === null ? NOT_RUN : `${(ms / 1000).toFixed(2)} s`
}

function headline (envs: EnvironmentSummary[]): SummaryTable {
  return {
    kind: 'headline',
    title: 'Headline: decoder alone vs bridged, cold prompts',
    headers: ['environment', 'model', 'cold prompt tokens', 'runs', 'decoder alone', 'bridged (complete only)', 'decoder alone / bridged (median, paired)', 'reading'],
    rows: envs.flatMap((e) => e.sizes.map((s) => [
      e.environment.id, e.environment.model, String(Math.round(s.promptTokens ?? s.targetTokens)), String(s.runs), seconds(s.nativeMs), seconds(s.bridgedMs),
      ratioCell(s), ratioReading(s.ratio),
    ])),
    empty: 'No cold-prompt runs in any environment.',
    note: 'Times are medians. The ratio is the median of decoder-alone / bridged time over paired runs (one run with both legs and a complete verdict): above 1 the bridge was faster. A pair "in two invocations" ran its decoder-alone leg first, in an invocation of its own on the same environment and commit (cold-bench --alone-only, then --pair-apart). The cold-prompt details of each environment are below.',
  }
}

/** Verdict counts by kind; `other` collects every other first word; `refused` is null for cold-prompt runs (never refused). */
interface VerdictCounts { runs: number, complete: number, partial: number, declined: number, other: number, notRun: number, refused: number | null }

function coldVerdicts (env: EnvironmentSummary): VerdictCounts {
  const c: VerdictCounts = { runs: 0, complete: 0, partial: 0, declined: 0, other: 0, notRun: 0, refused: null }
  for (const s of env.sizes) {
    c.runs += s.runs
    for (const [kind, count] of Object.entries(s.verdicts)) {
      if (kind === 'complete' || kind === 'partial' || kind === 'declined') c[kind] += count
      else if (kind === 'not run') c.notRun += count
      else c.other += count
    }
  }
  return c
}

function needleVerdicts (env: EnvironmentSummary): VerdictCounts {
  const c: VerdictCounts = { runs: 0, complete: 0, partial: 0, declined: 0, other: 0, notRun: 0, refused: 0 }
  for (const cell of env.needle!.cells.flat()) {
    if (cell === null) continue
    c.runs += cell.runs
    c.complete += cell.bridged.pass + cell.bridged.miss
    for (const [verdict, count] of cell.bridged.notBridged) {
      const kind = verdictKind(verdict)
      if (kind === 'partial' || kind === 'declined') c[kind] += count
      else c.other += count
    }
    c.notRun += cell.bridged.notRun
    c.refused! += cell.refused
  }
  return c
}

function verdicts (envs: EnvironmentSummary[]): SummaryTable {
  const rows: Array<{ env: EnvironmentSummary, records: string, c: VerdictCounts }> = []
  for (const env of envs) {
    if (env.sizes.length > 0) rows.push({ env, records: 'cold prompt', c: coldVerdicts(env) })
    if (env.needle !== null) rows.push({ env, records: 'needle', c: needleVerdicts(env) })
  }
  // A column for verdicts other than complete, partial and declined only when some run had one.
  const other = rows.some((r) => r.c.other > 0)
  return {
    kind: 'verdicts',
    title: 'Verdicts of the bridged legs',
    headers: ['environment', 'model', 'records', 'runs', 'complete (bridged)', 'partial (not bridged)', 'declined (not bridged)', ...(other ? ['other verdicts (not bridged)'] : []), 'bridged leg not run', 'refused (reused seed)'],
    rows: rows.map(({ env, records, c }) => [
      env.environment.id, env.environment.model, records, String(c.runs), String(c.complete), String(c.partial), String(c.declined),
      ...(other ? [String(c.other)] : []), String(c.notRun), c.refused === null ? NOT_RUN : String(c.refused),
    ]),
    empty: 'No cold-prompt or needle runs in any environment.',
    note: 'A run counts as bridged only when its verdict is exactly complete; partial and declined runs are never in the bridged times, ratios or needle passes.',
  }
}

function needle (envs: EnvironmentSummary[]): SummaryTable {
  return {
    kind: 'needle',
    title: 'Needle retrieval tally',
    headers: ['environment', 'model', 'runs', 'cells (lengths x depths)', 'bridged passes (of complete runs)', 'bridged misses', 'not bridged (partial or declined)', 'refused', 'decoder alone passes (of runs judged)'],
    rows: envs.filter((e) => e.needle !== null).map((e) => {
      const grid = e.needle!
      const t = tally(grid)
      const cells = grid.cells.flat().filter((c) => c !== null)
      return [
        e.environment.id, e.environment.model, String(cells.reduce((a, c) => a + c.runs, 0)), `${cells.length} (${grid.lengths.length} x ${grid.depths.length})`,
        `${t.bridgedPass} of ${t.bridgedComplete}`, String(t.bridgedMiss), String(t.notBridged), String(t.refused), `${t.nativePass} of ${t.nativePass + t.nativeMiss}`,
      ]
    }),
    empty: 'No needle runs in any environment.',
    note: 'A bridged needle run is a pass only with a complete verdict and the expected word in its answer. Each environment\'s grid and heatmap are in its section below.',
  }
}

function environments (envs: EnvironmentSummary[]): SummaryTable {
  return {
    kind: 'environments',
    title: 'Environments',
    headers: ['environment', 'model', 'machine', 'cold-prompt runs', 'needle runs', 'micro-benchmark records'],
    rows: envs.map((e) => {
      const m = e.environment
      const needleRuns = e.needle === null ? 0 : e.needle.cells.flat().reduce((a, c) => a + (c?.runs ?? 0), 0)
      return [m.id, m.model, `${m.cpu}, ${m.cores} cores, ${formatBytes(m.memoryBytes)}`, String(e.sizes.reduce((a, s) => a + s.runs, 0)), String(needleRuns), String(e.micro.records)]
    }),
    empty: 'No records yet.',
    note: 'One section per environment follows, in this order: its cold-prompt tables and charts, needle retrieval, micro benchmarks, then what the environment is.',
  }
}

/** The summary's tables in report order: headline ratios, verdicts, needle tally, environments. `envs` in report order. */
export function summaryTables (envs: EnvironmentSummary[]): SummaryTable[] {
  return [headline(envs), verdicts(envs), needle(envs), environments(envs)]
}
