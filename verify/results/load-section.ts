// One environment's load protocol runs for the report, as plain data so RESULTS.md and report.html
// say the same thing: the newest run's headline ("load: N requests, 0 errors, p99 ..."), its
// per-route table, its verdicts per route, the stack's peak memory, and one line per run when there
// are several.
import { LOAD_ROUTES, type LoadRecord, type Percentiles } from './load-record.ts'
import { seconds, plural, NOT_RUN, type Table } from './table.ts'

/** One environment's load runs, newest last. */
export interface LoadSummary {
  runs: LoadRecord[]
}

/** The environment's load runs in start order (null when there are none). */
export function summarizeLoad (records: readonly LoadRecord[]): LoadSummary | null {
  if (records.length === 0) return null
  return { runs: [...records].sort((a, b) => a.startedAt.localeCompare(b.startedAt) || a.runId.localeCompare(b.runId)) }
}

function durationWords (s: number): string {
  return Number.isInteger(s) ? `${s} s` : `${s.toFixed(1)} s`
}

/** The headline of one run: `load: 1234 requests (16 clients, 60 s), 0 errors, 0 429s, p99 4.10 s (bridged ..., warm ..., native-short ...)`. */
export function loadHeadline (record: LoadRecord): string {
  const t = record.totals
  const perRoute = record.routes.filter((r) => r.latencyMs !== null).map((r) => `${r.route} ${seconds(r.latencyMs!.p99)}`)
  const p99 = t.latencyMs === null ? 'no answer' : `p99 ${seconds(t.latencyMs.p99)}${perRoute.length > 0 ? ` (${perRoute.join(', ')})` : ''}`
  const limited = t.rateLimited === 0 ? '0 429s' : `${plural(t.rateLimited, '429')} (${t.retryAfterSeen} with Retry-After)`
  return `load: ${plural(t.requests, 'request')} (${plural(record.settings.clients, 'client')}, ${durationWords(record.settings.durationS)}), ${plural(t.errors, 'error')}, ${limited}, ${p99}`
}

/** The line under the headline: which run it is and what it sent. */
export function loadRunLine (summary: LoadSummary): string {
  const newest = summary.runs[summary.runs.length - 1]
  const s = newest.settings
  const earlier = summary.runs.length - 1
  const pct = (x: number): string => `${Math.round(x * 100)}%`
  const mix = LOAD_ROUTES.map((r) => `${pct(s.mix[r])} ${r}`).join(', ')
  return `Newest run ${newest.runId} (commit ${newest.environment.commit}, ${newest.startedAt}): ${s.clients} concurrent clients for ${durationWords(s.durationS)}, ${mix}; cold prompts of about ${s.coldTokens} tokens, short ones of about ${s.shortTokens}, max_tokens ${s.maxTokens}, ${pct(s.streamShare)} streamed, queue when full: ${s.whenFull}; ${(newest.wallMs / 1000).toFixed(1)} s from the first request to the last answer${earlier > 0 ? `; ${plural(earlier, 'earlier run')} listed below` : ''}. protocols/load.mjs, docs/BENCHMARK-PROTOCOL.md.`
}

function p (x: Percentiles | null, key: 'p50' | 'p90' | 'p99'): string {
  return x === null ? NOT_RUN : seconds(x[key])
}

/** The newest run's routes, one row each. */
export function loadRouteTable (summary: LoadSummary): Table {
  const newest = summary.runs[summary.runs.length - 1]
  return {
    title: 'Load: newest run, per route',
    headers: ['route', 'requests', 'prompt tokens', 'ok', 'errors', '429 (Retry-After)', 'streamed', 'p50', 'p90', 'p99', 'TTFT p50', 'TTFT p90', 'TTFT p99'],
    rows: newest.routes.map((r) => [
      r.route, String(r.requests), r.promptTokens === null ? NOT_RUN : String(r.promptTokens), String(r.ok), String(r.errors),
      `${r.rateLimited} (${r.retryAfterSeen})`, String(r.streamed),
      p(r.latencyMs, 'p50'), p(r.latencyMs, 'p90'), p(r.latencyMs, 'p99'), p(r.ttftMs, 'p50'), p(r.ttftMs, 'p90'), p(r.ttftMs, 'p99'),
    ]),
  }
}

/** The newest run's 2xx answers by route and verdict (numbers in verdicts shown as N). */
export function loadVerdictTable (summary: LoadSummary): Table {
  const newest = summary.runs[summary.runs.length - 1]
  return {
    title: 'Load: verdicts per route',
    headers: ['route', 'verdict (X-PD-Bridge / pd_bridge)', 'requests', 'p50', 'p99'],
    rows: newest.routes.flatMap((r) => r.verdicts.map((v) => [r.route, v.verdict, String(v.requests), seconds(v.latencyMs.p50), seconds(v.latencyMs.p99)])),
  }
}

function mib (b: number): string {
  return `${(b / 2 ** 20).toFixed(1)} MiB`
}

/** The newest run's peak RSS per process. */
export function loadMemoryTable (summary: LoadSummary): Table {
  const newest = summary.runs[summary.runs.length - 1]
  return {
    title: 'Load: peak memory per process',
    headers: ['process', 'peak RSS'],
    rows: Object.entries(newest.peakMemoryBytes).sort(([a], [b]) => a.localeCompare(b)).map(([name, b]) => [name, mib(b)]),
  }
}

/** Every run of the environment, one row each (only shown when there is more than one). */
export function loadRunsTable (summary: LoadSummary): Table {
  return {
    title: 'Load runs',
    headers: ['run', 'commit', 'clients', 'duration', 'requests', 'errors', '429s', 'p50', 'p99'],
    rows: summary.runs.map((r) => [
      r.runId, r.environment.commit, String(r.settings.clients), durationWords(r.settings.durationS), String(r.totals.requests),
      String(r.totals.errors), String(r.totals.rateLimited), p(r.totals.latencyMs, 'p50'), p(r.totals.latencyMs, 'p99'),
    ]),
  }
}

/** The section's tables in report order. */
export function loadTables (summary: LoadSummary): Table[] {
  const tables = [loadRouteTable(summary), loadVerdictTable(summary), loadMemoryTable(summary)]
  return summary.runs.length > 1 ? [...tables, loadRunsTable(summary)] : tables
}

/** The rule under the report's counting rules. */
export const LOAD_RULE = 'Load (protocols/load.mjs): concurrent clients send a mix of fresh cold prompts (long enough to bridge), warm repeats of earlier ones and short prompts (native) through the front door for a fixed time; the route is what the request was sent as, the verdict what the front door answered. An error is any answer that is neither 2xx nor 429, or no answer; latencies (end to end, and time to the first token of streams) are nearest-rank percentiles of the 2xx answers; a 429 is counted apart, with whether it carried Retry-After.'
