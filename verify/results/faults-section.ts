// One environment's fault protocol runs for the report, as plain data so RESULTS.md and report.html
// say the same thing: the newest run's headline ("faults: N/N answered correctly, 0 corrupt blocks
// served"), its per-fault table, and one line per run when there are several.
import type { FaultResult, FaultsRecord } from './fault-record.ts'
import { plural, NOT_RUN, type Table } from './table.ts'

/** One environment's fault runs, newest last. */
export interface FaultsSummary {
  runs: FaultsRecord[]
}

/** The environment's fault runs in start order (null when there are none). */
export function summarizeFaults (records: readonly FaultsRecord[]): FaultsSummary | null {
  if (records.length === 0) return null
  return { runs: [...records].sort((a, b) => a.startedAt.localeCompare(b.startedAt) || a.runId.localeCompare(b.runId)) }
}

/** A run's totals: faults injected (skipped ones left out), answered correctly, corrupt blocks served and indexed. */
export interface FaultTally {
  run: number
  correct: number
  skipped: number
  served: number
  indexed: number
}

export function faultTally (record: FaultsRecord): FaultTally {
  const run = record.faults.filter((f) => f.skipped === null)
  return {
    run: run.length,
    correct: run.filter((f) => f.correct).length,
    skipped: record.faults.length - run.length,
    served: run.reduce((a, f) => a + f.corrupt_blocks_served, 0),
    indexed: run.reduce((a, f) => a + f.corrupt_blocks_indexed, 0),
  }
}

/** The headline of one run: `faults: 11/12 answered correctly, 0 corrupt blocks served` and what else must be said. */
export function faultHeadline (record: FaultsRecord): string {
  const t = faultTally(record)
  const words = [`faults: ${t.correct}/${t.run} answered correctly, ${plural(t.served, 'corrupt block')} served`]
  if (t.indexed > 0) words.push(`${plural(t.indexed, 'corrupt block')} left in the store`)
  if (t.skipped > 0) words.push(`${t.skipped} skipped (${record.faults.filter((f) => f.skipped !== null).map((f) => f.name).join(', ')})`)
  const wrong = record.faults.filter((f) => f.skipped === null && !f.correct).map((f) => f.name)
  if (wrong.length > 0) words.push(`not correct: ${wrong.join(', ')}`)
  return words.join('; ')
}

/** The line under the headline: which run it is. */
export function faultRunLine (summary: FaultsSummary): string {
  const newest = summary.runs[summary.runs.length - 1]
  const earlier = summary.runs.length - 1
  return `Newest run ${newest.runId} (commit ${newest.environment.commit}, ${newest.startedAt})${earlier > 0 ? `; ${plural(earlier, 'earlier run')} listed below` : ''}. protocols/faults.mjs, docs/BENCHMARK-PROTOCOL.md.`
}

/** A verdict cell: the verdict as sent, cut to a table's width. */
function verdictCell (v: string): string {
  const one = v.replace(/\s+/g, ' ').trim()
  return one.length > 140 ? `${one.slice(0, 139)}…` : one
}

function yesNo (b: boolean | null): string {
  return b === null ? NOT_RUN : b ? 'yes' : 'no'
}

function seconds (ms: number | null): string {
  return ms === null ? NOT_RUN : `${(ms / 1000).toFixed(2)} s`
}

/** One fault's cells under FAULT_HEADERS (the two-host section's faults use it too). */
export function faultRow (f: FaultResult): string[] {
  if (f.skipped !== null) return [f.name, `skipped: ${verdictCell(f.skipped)}`, NOT_RUN, NOT_RUN, NOT_RUN, NOT_RUN, NOT_RUN, NOT_RUN]
  return [
    f.name,
    verdictCell(f.verdict),
    f.status === null ? 'none' : String(f.status),
    yesNo(f.answer_equals_native),
    String(f.corrupt_blocks_indexed),
    String(f.corrupt_blocks_served),
    seconds(f.recovery_ms),
    f.correct ? 'yes' : 'no',
  ]
}

/** The columns of a fault's row. */
export const FAULT_HEADERS = ['fault', 'verdict', 'HTTP', 'answer = native', 'corrupt blocks indexed', 'corrupt blocks served', 'recovery', 'correct']

/** The newest run's faults, one row each. */
export function faultTable (summary: FaultsSummary): Table {
  const newest = summary.runs[summary.runs.length - 1]
  return {
    title: 'Faults: newest run',
    headers: FAULT_HEADERS,
    rows: newest.faults.map(faultRow),
  }
}

/** Every run of the environment, one row each (only shown when there is more than one). */
export function faultRunsTable (summary: FaultsSummary): Table {
  return {
    title: 'Fault runs',
    headers: ['run', 'commit', 'answered correctly', 'corrupt blocks served', 'corrupt blocks indexed', 'skipped'],
    rows: summary.runs.map((r) => {
      const t = faultTally(r)
      return [r.runId, r.environment.commit, `${t.correct} of ${t.run}`, String(t.served), String(t.indexed), String(t.skipped)]
    }),
  }
}

/** The section's tables in report order. */
export function faultTables (summary: FaultsSummary): Table[] {
  return summary.runs.length > 1 ? [faultTable(summary), faultRunsTable(summary)] : [faultTable(summary)]
}

/** The rule under the report's counting rules. */
export const FAULTS_RULE = 'Faults (protocols/faults.mjs): each fault is injected into the embedded stack and its request compared with the decoder alone; it is answered correctly only when the answer equals the native one (greedy token ids and finish reason, or the same refusal) and no corrupt block was left in the store or served. Recovery is the time from the end of the fault to a fresh cold prompt bridged complete with the native tokens.'
