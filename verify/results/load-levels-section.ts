// One environment's load-levels runs for the report, as plain data so RESULTS.md and report.html
// say the same thing: per decoder kind the newest run's headline (answers that differ from their
// solo runs, the throughput and latency goals), its per-level table, its verdicts and the latency
// probe; one line per run when there are several.
import { LOAD_GOALS, type LoadLevel, type LoadLevelsRecord } from './load-levels-record.ts'
import type { Percentiles } from './load-record.ts'
import { seconds, plural, NOT_RUN, type Table } from './table.ts'

/** One environment's load-levels runs, in start order. */
export interface LoadLevelsSummary {
  runs: LoadLevelsRecord[]
}

/** The environment's runs in start order (null when there are none). */
export function summarizeLoadLevels (records: readonly LoadLevelsRecord[]): LoadLevelsSummary | null {
  if (records.length === 0) return null
  return { runs: [...records].sort((a, b) => a.startedAt.localeCompare(b.startedAt) || a.runId.localeCompare(b.runId)) }
}

/** The newest run of each decoder kind, kinds in name order. */
export function newestPerKind (summary: LoadLevelsSummary): LoadLevelsRecord[] {
  const byKind = new Map<string, LoadLevelsRecord>()
  for (const r of summary.runs) byKind.set(r.decoder.kind, r)
  return [...byKind.entries()].sort(([a], [b]) => a.localeCompare(b)).map(([, r]) => r)
}

function x (v: number): string {
  return `${v.toFixed(2)}x`
}

function goalWords (measured: number | null, met: boolean | null, target: string): string {
  return measured === null ? `not measured (goal ${target})` : `${x(measured)} (goal ${target}: ${met === true ? 'met' : 'not met'})`
}

/** The headline of one run. */
export function loadLevelsHeadline (r: LoadLevelsRecord): string {
  const g = r.goals
  const t = r.totals
  const probe = r.latency === null ? 'latency probe not run' : `short-prompt TTFT p99 under a bridge ${goalWords(g.ttftUnderBridge.measured, g.ttftUnderBridge.met, `<= ${LOAD_GOALS.ttftRatio}x idle`)}`
  return `load levels, decoder ${r.decoder.kind}: ${r.settings.levels.join('/')} clients, ${plural(t.requests, 'request')}, ${plural(t.errors, 'error')}, ${t.answersDiffering} of ${t.answersCompared} answers differ from their solo runs; ` +
    `decode tokens/s at ${LOAD_GOALS.throughputClients} clients over 1 ${goalWords(g.throughput.measured, g.throughput.met, `>= ${LOAD_GOALS.throughputSpeedup}x`)}${freeStepsWords(r)}${contention(r)}; ${probe}`
}

/** The throughput level's bound with free steps (loadLevelsTimeTable), when its counters are there. */
function freeStepsWords (r: LoadLevelsRecord): string {
  const l = r.levels.find((v) => v.clients === LOAD_GOALS.throughputClients)
  const bound = l === undefined ? null : freeStepsSpeedup(r, l)
  return bound === null ? '' : `, at most ${x(bound)} had its batched steps cost nothing`
}

/** Level `l`'s steps' rows over its seated time outside the steps, over the 1-client level's decode tokens/s. */
function freeStepsSpeedup (r: LoadLevelsRecord, l: LoadLevel): number | null {
  const one = r.levels.find((v) => v.clients === 1)?.decodeTokensPerS ?? null
  const b = l.decoderBatch
  if (b?.time === undefined || one === null || one <= 0) return null
  const rest = b.time.seatedMs - b.time.stepMs
  return rest > 0 ? (b.rows / (rest / 1000)) / one : null
}

/**
 * Where other work outran the machine's cores at some level's start, the levels ran on unequal
 * shares of it: the ratio between them then measures that contention as much as the decoder.
 */
function contention (r: LoadLevelsRecord): string {
  const loads = r.levels.map((l) => l.loadAverage.start)
  if (loads.length === 0 || Math.max(...loads) <= r.machine.cpus) return ''
  return ` (on a loaded machine: 1-minute load average ${Math.min(...loads).toFixed(1)} to ${Math.max(...loads).toFixed(1)} on ${r.machine.cpus} CPUs at the levels' starts, so the ratio is contention's as much as the decoder's)`
}

/** What a run sent, and where, under its headline. */
export function loadLevelsRunLine (r: LoadLevelsRecord): string {
  const s = r.settings
  const pct = (v: number): string => `${Math.round(v * 100)}%`
  const loads = r.levels.map((l) => l.loadAverage.start)
  return `Run ${r.runId} (commit ${r.environment.commit}, ${r.startedAt}, ${r.machine.cpus} CPUs, 1-minute load average ${Math.min(...loads).toFixed(1)} to ${Math.max(...loads).toFixed(1)} at the levels' starts): ` +
    `${s.preset === undefined ? '' : `preset ${s.preset}; `}${s.requestsPerClient} requests per client per level, ${pct(s.mix.bridged)} bridged, ${pct(s.mix.warm)} warm, ${pct(s.mix['native-short'])} native-short; cold prompts of about ${s.coldTokens} tokens, short ones of about ${s.shortTokens}; ` +
    `max_tokens ${s.maxTokens}, temperature ${s.temperature}, top_p ${s.topP}, a seed per request from ${s.seed}; all streamed by the openai client. protocols/load.mjs, docs/BENCHMARK-PROTOCOL.md.`
}

function p (v: Percentiles | null, key: 'p50' | 'p90' | 'p99'): string {
  return v === null ? NOT_RUN : seconds(v[key])
}

function mib (b: number | undefined): string {
  return b === undefined ? NOT_RUN : `${(b / 2 ** 20).toFixed(0)} MiB`
}

/** The run's levels, one row each. */
export function loadLevelsTable (r: LoadLevelsRecord): Table {
  return {
    title: `Load levels: decoder ${r.decoder.kind}, per level`,
    headers: ['clients', 'requests', 'errors', 'decode tok/s', 'vs 1 client', 'tok/s', 'TTFT p50', 'TTFT p90', 'TTFT p99', 'e2e p50', 'e2e p90', 'e2e p99', 'differ / compared', 'peak RSS decoder', 'peak RSS front', 'load avg'],
    rows: r.levels.map((l) => {
      const speedup = r.speedup?.[String(l.clients)] ?? null
      return [
        String(l.clients), String(l.requests), String(l.errors), l.decodeTokensPerS === null ? NOT_RUN : l.decodeTokensPerS.toFixed(1), speedup === null ? NOT_RUN : x(speedup),
        l.tokensPerS.toFixed(1), p(l.ttftMs, 'p50'), p(l.ttftMs, 'p90'), p(l.ttftMs, 'p99'), p(l.latencyMs, 'p50'), p(l.latencyMs, 'p90'), p(l.latencyMs, 'p99'),
        `${l.answersDiffering} / ${l.answersCompared}`, mib(l.peakRssBytes.decoder), mib(l.peakRssBytes.front), l.loadAverage.start.toFixed(1),
      ]
    }),
  }
}

/**
 * Where the decoder's seated time went at each level (its batch timing counters; null when no level
 * has them): seated is the wall time while some request was decoding, split into the batched steps
 * and the rest (the prefill chunks of requests joining between steps, the samplers, the loop's own
 * work); the chunks are shown with all their time, since a chunk run while nothing decodes (each
 * level's first) is not seated. The last column bounds what cheaper steps can give: the steps' rows
 * over the seated time outside the steps, i.e. the level's tokens/s had its steps cost nothing,
 * over the 1-client level's decode tokens/s. Where it is below the throughput goal, no cheaper step
 * meets the goal on that workload and machine.
 */
export function loadLevelsTimeTable (r: LoadLevelsRecord): Table | null {
  const timed = r.levels.filter((l) => l.decoderBatch?.time !== undefined)
  if (timed.length === 0) return null
  const share = (ms: number, of: number): string => `${seconds(ms)} (${of > 0 ? Math.round(100 * ms / of) : 0}%)`
  return {
    title: `Load levels: decoder ${r.decoder.kind}, where the decoder's time went while some request was decoding (seated)`,
    headers: ['clients', 'steps', 'mean rows', 'ms per step', 'seated', 'in steps', 'seated, not in a step', 'prefill chunks (all their time)', 'with free steps, vs 1 client'],
    rows: timed.map((l) => {
      const b = l.decoderBatch!
      const t = b.time!
      const rest = Math.max(0, t.seatedMs - t.stepMs)
      const free = freeStepsSpeedup(r, l)
      return [
        String(l.clients), String(b.steps), b.meanRows === null ? NOT_RUN : b.meanRows.toFixed(2), t.stepMsPerStep === null ? NOT_RUN : t.stepMsPerStep.toFixed(1),
        seconds(t.seatedMs), share(t.stepMs, t.seatedMs), share(rest, t.seatedMs), `${b.chunks} in ${seconds(t.chunkMs)}`, free === null ? NOT_RUN : x(free),
      ]
    }),
  }
}

/** The run's 2xx answers by route and verdict, summed over the levels. */
export function loadLevelsVerdictTable (r: LoadLevelsRecord): Table {
  const counts = new Map<string, number>()
  for (const l of r.levels) for (const route of l.routes) for (const v of route.verdicts) counts.set(`${route.route}\u0000${v.verdict}`, (counts.get(`${route.route}\u0000${v.verdict}`) ?? 0) + v.requests)
  return {
    title: `Load levels: decoder ${r.decoder.kind}, verdicts per route (all levels)`,
    headers: ['route', 'verdict (X-PD-Bridge / pd_bridge)', 'requests'],
    rows: [...counts.entries()].map(([k, n]) => [...k.split('\u0000'), String(n)]),
  }
}

/** The latency probe: short prompts idle and under a bridge. */
export function loadLatencyTable (r: LoadLevelsRecord): Table | null {
  const l = r.latency
  if (l === null) return null
  const longs = l.longVerdicts.map((v) => `${v.requests} × ${v.verdict}`).join('; ')
  return {
    title: `Load levels: decoder ${r.decoder.kind}, TTFT of short prompts idle and while a ${r.settings.longTokens}-token prompt is bridged (${plural(l.longPrompts, 'long prompt')}: ${longs === '' ? 'none answered' : longs})`,
    headers: ['stack', 'short prompts', 'TTFT p50', 'TTFT p90', 'TTFT p99'],
    rows: [
      ['idle', String(l.samples), p(l.idleTtftMs, 'p50'), p(l.idleTtftMs, 'p90'), p(l.idleTtftMs, 'p99')],
      ['under a bridge', String(l.samples), p(l.underBridgeTtftMs, 'p50'), p(l.underBridgeTtftMs, 'p90'), p(l.underBridgeTtftMs, 'p99')],
    ],
  }
}

/** Every run of the environment, one row each (only shown when there is more than one). */
export function loadLevelsRunsTable (summary: LoadLevelsSummary): Table {
  return {
    title: 'Load-levels runs',
    headers: ['run', 'decoder', 'commit', 'levels', 'requests', 'errors', 'differ', `decode ${LOAD_GOALS.throughputClients} vs 1`, 'TTFT p99 under bridge / idle'],
    rows: summary.runs.map((r) => [
      r.runId, r.decoder.kind, r.environment.commit, r.settings.levels.join('/'), String(r.totals.requests), String(r.totals.errors), String(r.totals.answersDiffering),
      r.goals.throughput.measured === null ? NOT_RUN : x(r.goals.throughput.measured), r.goals.ttftUnderBridge.measured === null ? NOT_RUN : x(r.goals.ttftUnderBridge.measured),
    ]),
  }
}

/** One newest run's paragraphs and tables: headline, run line, tables. */
export function loadLevelsBlocks (summary: LoadLevelsSummary): Array<{ headline: string, line: string, tables: Table[] }> {
  return newestPerKind(summary).map((r) => ({
    headline: loadLevelsHeadline(r),
    line: loadLevelsRunLine(r),
    tables: [loadLevelsTable(r), ...[loadLevelsTimeTable(r)].filter((t): t is Table => t !== null), loadLevelsVerdictTable(r), ...[loadLatencyTable(r)].filter((t): t is Table => t !== null)],
  }))
}

/** The rule under the report's counting rules. */
export const LOAD_LEVELS_RULE = `Load levels (protocols/load.mjs): at each level that many clients send streamed, seeded requests (fresh cold prompts to bridge, warm repeats, short prompts) through the front door; every 2xx answer is sent again alone to a second decoder of the same kind with its own store and must equal it token for token. Decode tok/s is the tokens after each answer's first over the time some answer of the level was decoding (the union of first-token-to-end spans); "vs 1 client" divides it by the 1-client level's (goal: ${LOAD_GOALS.throughputSpeedup}x at ${LOAD_GOALS.throughputClients}). The latency probe sends short prompts one after another on the idle stack, then while long prompts with max_tokens 1 (little but the bridge) are in flight (goal: p99 within ${LOAD_GOALS.ttftRatio}x of idle). Peak RSS is VmRSS sampled every 100 ms during the level.`
