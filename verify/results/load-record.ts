// One run of the load protocol (protocols/load.mjs, docs/BENCHMARK-PROTOCOL.md, "Load") as it is
// written under results/load/: where it ran, the workload it sent (clients, duration, the mix of
// cold prompts meant to be bridged, warm repeats and short prompts that go native), and per route
// the requests, the verdicts the front door returned, latency and time-to-first-token percentiles,
// errors and 429s; the peak RSS of every process of the stack. The schema also holds the counting
// rules: an error is any answer that is not 2xx and not a 429 (or no answer at all), the totals are
// the routes' sums, and percentiles are ordered.
import { z } from 'zod'
import { environmentSchema } from './record.ts'
import { parseRecordJson, readRecordDir } from './record-files.ts'

/** The record's schema tag; a new layout gets a new tag so old records are never misread. */
export const LOAD_RECORD_SCHEMA = 'pd-bridge/load-run@1'

/** The routes a load request is sent as, in report order. */
export const LOAD_ROUTES = ['bridged', 'warm', 'native-short'] as const
/** What a request was meant to be: a cold prompt long enough to bridge, a repeat of one, or a short prompt. */
export type LoadRoute = typeof LOAD_ROUTES[number]

const count = z.int().nonnegative()
const ms = z.number().finite().nonnegative()
const bytes = z.number().int().nonnegative()

/** Nearest-rank percentiles of a set of times, ms. */
export const percentilesSchema = z.strictObject({
  p50: ms,
  p90: ms,
  p99: ms,
  max: ms,
}).superRefine((p, ctx) => {
  if (!(p.p50 <= p.p90 && p.p90 <= p.p99 && p.p99 <= p.max)) ctx.addIssue({ code: 'custom', message: 'percentiles must be ordered p50 <= p90 <= p99 <= max' })
})
/** p50, p90, p99 and max of a set of times, ms. */
export type Percentiles = z.infer<typeof percentilesSchema>

/** The requests of one route that got one verdict (normalized: digits as N). */
export const loadVerdictSchema = z.strictObject({
  /** The front door's verdict (pd_bridge.verdict, else X-PD-Bridge), its numbers replaced by N; `(no verdict)` when none came. */
  verdict: z.string().min(1),
  requests: count.min(1),
  /** End-to-end latency of these requests, ms. */
  latencyMs: percentilesSchema,
})

/** One route's requests over the run. */
export const loadRouteSchema = z.strictObject({
  route: z.enum(LOAD_ROUTES),
  /** Requests sent (finished, whatever the outcome). */
  requests: count,
  /** Answered 2xx. */
  ok: count,
  /** Not 2xx and not 429, or no answer (a reset, a timeout): must be 0. */
  errors: count,
  /** Answered 429. */
  rateLimited: count,
  /** Of those 429s, how many carried a Retry-After header. */
  retryAfterSeen: count,
  /** Requests sent as streams (the rest were whole answers). */
  streamed: count,
  /** Median prompt tokens of the requests sent (the client's own count); null without requests. */
  promptTokens: count.nullable(),
  /** End-to-end latency of the 2xx answers, ms; null when there were none. */
  latencyMs: percentilesSchema.nullable(),
  /** Time to the first content token of the 2xx streams, ms; null when there were none. */
  ttftMs: percentilesSchema.nullable(),
  /** The 2xx answers grouped by verdict, most requests first. */
  verdicts: z.array(loadVerdictSchema),
}).superRefine((r, ctx) => {
  if (r.ok + r.errors + r.rateLimited !== r.requests) ctx.addIssue({ code: 'custom', path: ['requests'], message: 'must be ok + errors + rateLimited' })
  if (r.retryAfterSeen > r.rateLimited) ctx.addIssue({ code: 'custom', path: ['retryAfterSeen'], message: 'cannot exceed rateLimited' })
  if (r.streamed > r.requests) ctx.addIssue({ code: 'custom', path: ['streamed'], message: 'cannot exceed requests' })
  if ((r.ok > 0) !== (r.latencyMs !== null)) ctx.addIssue({ code: 'custom', path: ['latencyMs'], message: 'is null exactly when no request was answered 2xx' })
  if (r.verdicts.reduce((a, v) => a + v.requests, 0) !== r.ok) ctx.addIssue({ code: 'custom', path: ['verdicts'], message: 'must count every 2xx answer once' })
})

/** One request that counted as an error (the first few are kept). */
export const loadErrorSchema = z.strictObject({
  route: z.enum(LOAD_ROUTES),
  /** HTTP status; null when no response came. */
  status: z.int().nullable(),
  streamed: z.boolean(),
  message: z.string(),
})

/** One load protocol run. */
export const loadRecordSchema = z.strictObject({
  schema: z.literal(LOAD_RECORD_SCHEMA),
  runId: z.string().min(1),
  startedAt: z.iso.datetime(),
  finishedAt: z.iso.datetime(),
  environment: environmentSchema,
  settings: z.strictObject({
    /** Concurrent clients, each sending one request after another. */
    clients: z.int().positive(),
    /** How long clients start new requests, s (requests in flight at the end are waited for). */
    durationS: z.number().positive(),
    /** Share of requests per route (weights that sum to 1). */
    mix: z.strictObject({ bridged: z.number().min(0).max(1), warm: z.number().min(0).max(1), 'native-short': z.number().min(0).max(1) }),
    /** Share of requests sent as streams. */
    streamShare: z.number().min(0).max(1),
    /** Size of each fresh cold prompt, tokens (about: the builder goes past it by less than a sentence). */
    coldTokens: z.int().positive(),
    /** Size of each short prompt, tokens (below the front door's minimum, so it goes native). */
    shortTokens: z.int().positive(),
    /** max_tokens of every request, greedy. */
    maxTokens: z.int().positive(),
    requestTimeoutMs: ms,
    /** The front door's queue.whenFull: native (serve natively) or reject (429 with Retry-After). */
    whenFull: z.enum(['native', 'reject']),
    /** The invocation seed (prompt seeds and the mix draw derive from it). */
    seed: z.int().nonnegative(),
  }),
  /** From the first request of the timed window to the last answer, ms. */
  wallMs: ms,
  routes: z.array(loadRouteSchema).length(LOAD_ROUTES.length),
  totals: z.strictObject({
    requests: count,
    ok: count,
    errors: count,
    rateLimited: count,
    retryAfterSeen: count,
    /** End-to-end latency of every 2xx answer, all routes, ms. */
    latencyMs: percentilesSchema.nullable(),
  }),
  /** The first errors (at most 20), for the reader. */
  errorSamples: z.array(loadErrorSchema).max(20),
  /** Peak resident memory per process (Linux VmHWM), bytes: the protocol and every child of the stack. */
  peakMemoryBytes: z.record(z.string(), bytes),
}).superRefine((r, ctx) => {
  r.routes.forEach((route, i) => {
    if (route.route !== LOAD_ROUTES[i]) ctx.addIssue({ code: 'custom', path: ['routes', i, 'route'], message: `must be ${LOAD_ROUTES[i]} (routes in order ${LOAD_ROUTES.join(', ')})` })
  })
  for (const key of ['requests', 'ok', 'errors', 'rateLimited', 'retryAfterSeen'] as const) {
    const sum = r.routes.reduce((a, route) => a + route[key], 0)
    if (r.totals[key] !== sum) ctx.addIssue({ code: 'custom', path: ['totals', key], message: `is ${r.totals[key]}, but the routes sum to ${sum}` })
  }
  if ((r.totals.ok > 0) !== (r.totals.latencyMs !== null)) ctx.addIssue({ code: 'custom', path: ['totals', 'latencyMs'], message: 'is null exactly when no request was answered 2xx' })
  if (r.errorSamples.length > r.totals.errors) ctx.addIssue({ code: 'custom', path: ['errorSamples'], message: 'more samples than errors' })
  const mix = r.settings.mix.bridged + r.settings.mix.warm + r.settings.mix['native-short']
  if (Math.abs(mix - 1) > 1e-9) ctx.addIssue({ code: 'custom', path: ['settings', 'mix'], message: `must sum to 1, sums to ${mix}` })
})

/** One load protocol run. */
export type LoadRecord = z.infer<typeof loadRecordSchema>
/** One route of a run. */
export type LoadRouteResult = z.infer<typeof loadRouteSchema>

/** Nearest-rank percentiles (p50, p90, p99, max) of `values`; null when there are none. */
export function percentiles (values: readonly number[]): Percentiles | null {
  if (values.length === 0) return null
  const sorted = [...values].sort((a, b) => a - b)
  const at = (p: number): number => sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(p * sorted.length) - 1))]
  return { p50: at(0.5), p90: at(0.9), p99: at(0.99), max: sorted[sorted.length - 1] }
}

/** A verdict with its numbers replaced by N and cut to 120 characters, so verdicts group. */
export function verdictGroup (verdict: string | null | undefined): string {
  if (verdict === null || verdict === undefined || verdict.trim() === '') return '(no verdict)'
  const one = verdict.replace(/\s+/g, ' ').trim().replace(/\d+(?:\.\d+)?/g, 'N')
  return one.length > 120 ? `${one.slice(0, 119)}…` : one
}

/** Whether an answer counts as an error: no response, or a status that is neither 2xx nor 429. */
export function isLoadError (status: number | null): boolean {
  return status === null || (status !== 429 && (status < 200 || status > 299))
}

/** Check parsed JSON against the schema; the error names the file and the first bad field. */
export function parseLoadRecord (json: unknown, file: string): LoadRecord {
  return parseRecordJson(loadRecordSchema, json, file, 'load record')
}

/** Read every `*.json` record in `dir`, sorted by file name; a missing directory holds none. */
export async function readLoadRecords (dir: string): Promise<LoadRecord[]> {
  return (await readRecordDir(dir, { plural: 'load records', notJson: 'not JSON' }, parseLoadRecord)).map((r) => r.record)
}

/** One finished request of a load run, as the protocol saw it (not recorded one by one: see loadTotals). */
export interface LoadSample {
  route: LoadRoute
  /** HTTP status; null when no response came. */
  status: number | null
  streamed: boolean
  /** End to end, ms. */
  ms: number
  /** Streams: to the first content token, ms; null for whole answers or a stream without content. */
  ttftMs: number | null
  /** pd_bridge.verdict, else X-PD-Bridge, else null. */
  verdict: string | null
  /** Tokens of the prompt sent (the client's count). */
  promptTokens: number
  /** The Retry-After header of a 429, else null. */
  retryAfter: string | null
  /** What went wrong, for an error; null otherwise. */
  message: string | null
}

function medianInt (values: number[]): number | null {
  if (values.length === 0) return null
  const s = [...values].sort((a, b) => a - b)
  return s[(s.length - 1) >> 1]
}

/** One route's fields of the record from its samples. */
export function loadRoute (route: LoadRoute, samples: readonly LoadSample[]): LoadRouteResult {
  const mine = samples.filter((s) => s.route === route)
  const ok = mine.filter((s) => s.status !== null && s.status >= 200 && s.status <= 299)
  const limited = mine.filter((s) => s.status === 429)
  const groups = new Map<string, number[]>()
  for (const s of ok) {
    const v = verdictGroup(s.verdict)
    const g = groups.get(v)
    if (g === undefined) groups.set(v, [s.ms])
    else g.push(s.ms)
  }
  return {
    route,
    requests: mine.length,
    ok: ok.length,
    errors: mine.filter((s) => isLoadError(s.status)).length,
    rateLimited: limited.length,
    retryAfterSeen: limited.filter((s) => s.retryAfter !== null && s.retryAfter !== '').length,
    streamed: mine.filter((s) => s.streamed).length,
    promptTokens: medianInt(mine.map((s) => s.promptTokens)),
    latencyMs: percentiles(ok.map((s) => s.ms)),
    ttftMs: percentiles(ok.filter((s) => s.streamed && s.ttftMs !== null).map((s) => s.ttftMs!)),
    verdicts: [...groups.entries()]
      .map(([verdict, times]) => ({ verdict, requests: times.length, latencyMs: percentiles(times)! }))
      .sort((a, b) => b.requests - a.requests || a.verdict.localeCompare(b.verdict)),
  }
}

/** The record's routes, totals and error samples from every sample of the run. */
export function loadTotals (samples: readonly LoadSample[]): Pick<LoadRecord, 'routes' | 'totals' | 'errorSamples'> {
  const routes = LOAD_ROUTES.map((r) => loadRoute(r, samples))
  const sum = (k: 'requests' | 'ok' | 'errors' | 'rateLimited' | 'retryAfterSeen'): number => routes.reduce((a, r) => a + r[k], 0)
  const ok = samples.filter((s) => s.status !== null && s.status >= 200 && s.status <= 299)
  return {
    routes,
    totals: { requests: sum('requests'), ok: sum('ok'), errors: sum('errors'), rateLimited: sum('rateLimited'), retryAfterSeen: sum('retryAfterSeen'), latencyMs: percentiles(ok.map((s) => s.ms)) },
    errorSamples: samples.filter((s) => isLoadError(s.status)).slice(0, 20).map((s) => ({ route: s.route, status: s.status, streamed: s.streamed, message: (s.message ?? '').slice(0, 300) })),
  }
}
