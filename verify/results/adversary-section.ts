// One environment's adversary protocol runs for the report, as plain data so RESULTS.md and
// report.html say the same thing: the newest run's headline, which run it is, its per-case table,
// and one line per run when there are several.
import { adversaryHeadline, adversaryTally, type AdversaryCase, type AdversaryRecord } from './adversary-record.ts'
import { groupDigits, NOT_RUN, plural, type Table } from './table.ts'

/** One environment's adversary runs, newest last. */
export interface AdversarySummary {
  runs: AdversaryRecord[]
}

/** The environment's adversary runs in start order (null when there are none). */
export function summarizeAdversary (records: readonly AdversaryRecord[]): AdversarySummary | null {
  if (records.length === 0) return null
  return { runs: [...records].sort((a, b) => a.startedAt.localeCompare(b.startedAt) || a.runId.localeCompare(b.runId)) }
}

/** The headline of the newest run. */
export function adversarySectionHeadline (summary: AdversarySummary): string {
  return adversaryHeadline(summary.runs[summary.runs.length - 1])
}

/** The line under the headline: which run it is. */
export function adversaryRunLine (summary: AdversarySummary): string {
  const newest = summary.runs[summary.runs.length - 1]
  const earlier = summary.runs.length - 1
  return `Newest run ${newest.runId} (commit ${newest.environment.commit}, ${newest.startedAt}; ${newest.settings.keyed ? 'with' : 'without'} a deployment key)` +
    `${earlier > 0 ? `; ${plural(earlier, 'earlier run')} listed below` : ''}. protocols/adversary.mjs, docs/BENCHMARK-PROTOCOL.md.`
}

function caseRow (c: AdversaryCase): string[] {
  return [c.name, c.tried_what, groupDigits(c.tried), groupDigits(c.answers_compared), String(c.wrong_answers_served), String(c.internal_routes_reached),
    String(c.paths_leaked), groupDigits(c.bytes_left), c.correct ? 'yes' : 'no']
}

/** The newest run's cases, one row each, and what the stopped stack left. */
export function adversaryTable (summary: AdversarySummary): Table {
  const newest = summary.runs[summary.runs.length - 1]
  const left = newest.after_stop
  return {
    title: 'Adversary: newest run',
    headers: ['case', 'tried', 'requests', 'answers compared', 'wrong answers served', 'internal routes reached', 'paths leaked', 'bytes left', 'correct'],
    rows: [
      ...newest.cases.map(caseRow),
      ['after stop', `${plural(left.processes_left, 'process', 'processes')} alive; ${left.captures_left} captures, ${left.spool_files} spool files, ${left.temp_block_files} temp block files`,
        NOT_RUN, NOT_RUN, NOT_RUN, NOT_RUN, NOT_RUN, groupDigits(left.bytes_left), left.processes_left === 0 && left.bytes_left === 0 ? 'yes' : 'no'],
    ],
  }
}

/** Every run of the environment, one row each (only shown when there is more than one). */
export function adversaryRunsTable (summary: AdversarySummary): Table {
  return {
    title: 'Adversary runs',
    headers: ['run', 'commit', 'cases correct', 'answers compared', 'wrong answers served', 'routes reached', 'paths leaked', 'processes left', 'bytes left'],
    rows: summary.runs.map((r) => {
      const t = adversaryTally(r)
      return [r.runId, r.environment.commit, `${t.correct} of ${t.cases}`, groupDigits(t.compared), String(t.wrong), String(t.reached), String(t.leaked), String(r.after_stop.processes_left), groupDigits(t.bytesLeft)]
    }),
  }
}

/** The section's tables in report order. */
export function adversaryTables (summary: AdversarySummary): Table[] {
  return summary.runs.length > 1 ? [adversaryTable(summary), adversaryRunsTable(summary)] : [adversaryTable(summary)]
}

/** The rule under the report's counting rules. */
export const ADVERSARY_RULE = 'Adversary (protocols/adversary.mjs): what an attacker on the same host tries against the embedded stack started with a deployment key. ' +
  'A case is correct only when no wrong answer was served (every 200 equals the decoder alone\'s greedy tokens), no spelling reached an internal route, ' +
  'no answer to a caller without the key carried an absolute path of the deployment, and nothing but what retention keeps was left on disk.'
