// One run of the load protocol's concurrency levels (protocols/load.mjs, docs/BENCHMARK-PROTOCOL.md,
// "Load: concurrency levels") as written under results/load/levels/: one decoder kind on the
// embedded stack, 1, 2, 4, 8, 16 ... concurrent clients (the official openai client, streamed,
// seeded sampling) mixing fresh cold prompts (bridged), warm repeats and short prompts; per level
// the aggregate decode tokens/s, TTFT and end-to-end percentiles, errors, verdicts, peak RSS per
// process and the load average, and every answer compared token for token with the same request
// sent alone to a decoder of the same kind with its own store (its solo run). Then the latency
// goal: TTFT of short prompts on an idle stack and while a long prompt is being bridged. The schema
// holds the counting rules: totals are the levels' sums, the goals are computed from the levels.
import { z } from 'zod'
import { environmentSchema } from './record.ts'
import { parseRecordJson, readRecordDir } from './record-files.ts'
import { LOAD_ROUTES, percentiles, percentilesSchema, verdictGroup, isLoadError, type LoadRoute, type Percentiles } from './load-record.ts'

/** The record's schema tag; a new layout gets a new tag so old records are never misread. */
export const LOAD_LEVELS_RECORD_SCHEMA = 'pd-bridge/load-levels@1'

/** The issue's goals (#41): decode throughput at 8 streams over 1 stream, p99 TTFT of short prompts under a bridge over idle. */
export const LOAD_GOALS = { throughputClients: 8, throughputSpeedup: 4, ttftRatio: 2 } as const

/**
 * What the record's rates and goals are, in words, written into every new record (`definitions`) so a
 * record read alone says how its numbers were made.
 */
export const LOAD_LEVELS_DEFINITIONS = {
  decodeTokensPerS: 'aggregate decode tokens/s: the completion tokens after each 2xx answer\'s first, summed over the level, divided by the wall time of the level\'s decode phase, which is the union of the answers\' spans from their first content token to their end (client clock); time in which no answer was decoding (all waiting on a prefill, restore or bridge) is not in it',
  tokensPerS: 'completion tokens of the 2xx answers over the level\'s wall time, from its first request sent to its last answer received (prefills and bridges included)',
  speedup: 'each level\'s decodeTokensPerS over the 1-client level\'s',
  goals: `throughput: speedup at ${LOAD_GOALS.throughputClients} clients, target at least ${LOAD_GOALS.throughputSpeedup}; ttftUnderBridge: p99 TTFT of short prompts while a long prompt is bridged over p99 on the idle stack (latency probe), target at most ${LOAD_GOALS.ttftRatio}; answersDiffering: 2xx answers (levels and probe) whose token ids differ from the same request sent alone to a second decoder of the kind, target 0`,
} as const

const count = z.int().nonnegative()
const ms = z.number().finite().nonnegative()
const bytes = z.number().int().nonnegative()
const rate = z.number().finite().nonnegative()

/** One route's requests at one level. */
export const levelRouteSchema = z.strictObject({
  route: z.enum(LOAD_ROUTES),
  requests: count,
  ok: count,
  /** Time to the first content token, 2xx answers, ms. */
  ttftMs: percentilesSchema.nullable(),
  latencyMs: percentilesSchema.nullable(),
  /** The front door's verdicts of the 2xx answers (numbers as N), most frequent first. */
  verdicts: z.array(z.strictObject({ verdict: z.string().min(1), requests: count.min(1) })),
})

/** One concurrency level. */
export const loadLevelSchema = z.strictObject({
  clients: z.int().positive(),
  requests: count,
  ok: count,
  /** No answer, or a status neither 2xx nor 429: must be 0. */
  errors: count,
  rateLimited: count,
  /** From the level's first request to its last answer, ms. */
  wallMs: ms,
  completionTokens: count,
  /** Completion tokens of the 2xx answers over wallMs. */
  tokensPerS: rate,
  /** Tokens after each answer's first, over the time some answer was decoding (the union of first-token-to-end spans); null when none decoded. */
  decodeTokensPerS: rate.nullable(),
  ttftMs: percentilesSchema.nullable(),
  latencyMs: percentilesSchema.nullable(),
  routes: z.array(levelRouteSchema).length(LOAD_ROUTES.length),
  /** 2xx answers compared token for token with their solo run. */
  answersCompared: count,
  /** Of those, how many differ (or whose solo run failed): must be 0. */
  answersDiffering: count,
  /** Peak resident memory per process during the level (VmRSS sampled every 100 ms), bytes. */
  peakRssBytes: z.record(z.string(), bytes),
  /** 1-minute load average when the level started and when it ended. */
  loadAverage: z.strictObject({ start: z.number().nonnegative(), end: z.number().nonnegative() }),
  /**
   * The decoder's batched steps during the level, from its /health `batch` counters (a kind that
   * batches reports them; null otherwise; absent in records written before): steps, the rows they
   * fed, rows per step, and the prefill chunks run between steps.
   */
  decoderBatch: z.strictObject({
    steps: count, rows: count, meanRows: rate.nullable(), chunks: count,
    /**
     * Where the decoder's time went (its batch timing counters; absent in records written before
     * them), ms: the seated wall time (some seat decoding), inside decodeBatch, inside the prefill
     * chunks, in the samplers (all rows), the event loop's other active time, its idle time; per
     * step, per row and per chunk; steps run without stragglers.
     */
    time: z.strictObject({
      seatedMs: z.number().nonnegative(), stepMs: z.number().nonnegative(), chunkMs: z.number().nonnegative(), pickMs: z.number().nonnegative(),
      otherActiveMs: z.number().nonnegative(), idleMs: z.number().nonnegative(),
      stepMsPerStep: z.number().nonnegative().nullable(), seatedMsPerStep: z.number().nonnegative().nullable(),
      pickMsPerRow: z.number().nonnegative().nullable(), chunkMsPerChunk: z.number().nonnegative().nullable(),
      partialSteps: count,
    }).optional(),
  }).nullable().optional(),
})

/** The latency goal: short prompts one after another on an idle stack, then while a long prompt is bridged. */
export const latencyProbeSchema = z.strictObject({
  /** Short prompts per leg. */
  samples: z.int().positive(),
  idleTtftMs: percentilesSchema.nullable(),
  underBridgeTtftMs: percentilesSchema.nullable(),
  /** p99 under a bridge over p99 idle; null when a leg has no answer. */
  ratioP99: rate.nullable(),
  /** Long prompts sent to keep a bridge running, and their verdicts (numbers as N). */
  longPrompts: count,
  longVerdicts: z.array(z.strictObject({ verdict: z.string().min(1), requests: count.min(1) })),
  /** Short answers that arrived while no long prompt was in flight (not counted in underBridgeTtftMs). */
  outsideBridge: count,
  errors: count,
  answersCompared: count,
  answersDiffering: count,
})

/** One goal: what was measured against what was asked; met is null when it could not be measured. */
export const goalSchema = z.strictObject({ target: z.number(), measured: z.number().nullable(), met: z.boolean().nullable() })

/** One load-levels run. */
export const loadLevelsRecordSchema = z.strictObject({
  schema: z.literal(LOAD_LEVELS_RECORD_SCHEMA),
  runId: z.string().min(1),
  startedAt: z.iso.datetime(),
  finishedAt: z.iso.datetime(),
  environment: environmentSchema,
  /** The stack's decoder kind and its numerics profile. */
  decoder: z.strictObject({ kind: z.string().min(1), profile: z.string().min(1) }),
  machine: z.strictObject({ cpus: z.int().positive(), cpu: z.string(), totalMemoryBytes: bytes }),
  /** What the rates and goals are (LOAD_LEVELS_DEFINITIONS); absent in records written before it. */
  definitions: z.strictObject({ decodeTokensPerS: z.string(), tokensPerS: z.string(), speedup: z.string(), goals: z.string() }).optional(),
  settings: z.strictObject({
    /** The checkpoint preset the stack served; absent in records written before --preset (tiny). */
    preset: z.string().min(1).optional(),
    levels: z.array(z.int().positive()).min(1),
    /** Requests each client sends one after another at a level. */
    requestsPerClient: z.int().positive(),
    mix: z.strictObject({ bridged: z.number().min(0).max(1), warm: z.number().min(0).max(1), 'native-short': z.number().min(0).max(1) }),
    coldTokens: z.int().positive(),
    shortTokens: z.int().positive(),
    longTokens: z.int().positive(),
    maxTokens: z.int().positive(),
    /** Sampling of every request; each request has its own seed derived from the invocation seed. */
    temperature: z.number().nonnegative(),
    topP: z.number().gt(0).max(1),
    seed: z.int().nonnegative(),
    latencySamples: z.int().nonnegative(),
    requestTimeoutMs: ms,
  }),
  levels: z.array(loadLevelSchema).min(1),
  /** null when the latency probe was not run (--latency-samples 0). */
  latency: latencyProbeSchema.nullable(),
  /** Aggregate decode tokens/s of each level over the 1-client level's (keys: clients); null without a 1-client level. */
  speedup: z.record(z.string(), rate.nullable()).nullable(),
  goals: z.strictObject({ throughput: goalSchema, ttftUnderBridge: goalSchema, answersDiffering: goalSchema }),
  totals: z.strictObject({ requests: count, ok: count, errors: count, rateLimited: count, answersCompared: count, answersDiffering: count }),
  errorSamples: z.array(z.strictObject({ clients: z.int().nonnegative(), route: z.enum(LOAD_ROUTES), status: z.int().nullable(), message: z.string() })).max(20),
}).superRefine((r, ctx) => {
  r.levels.forEach((l, i) => {
    if (l.clients !== r.settings.levels[i]) ctx.addIssue({ code: 'custom', path: ['levels', i, 'clients'], message: `must be ${r.settings.levels[i]} (the settings' levels in order)` })
    if (l.answersDiffering > l.answersCompared) ctx.addIssue({ code: 'custom', path: ['levels', i, 'answersDiffering'], message: 'more differing answers than compared' })
  })
  if (r.levels.length !== r.settings.levels.length) ctx.addIssue({ code: 'custom', path: ['levels'], message: 'one entry per level of the settings' })
  // The latency probe adds its errors and compared answers to the totals, not its requests.
  const probe = r.latency
  const latency = { requests: 0, ok: 0, errors: probe?.errors ?? 0, answersCompared: probe?.answersCompared ?? 0, answersDiffering: probe?.answersDiffering ?? 0 }
  for (const key of ['requests', 'ok', 'errors', 'rateLimited', 'answersCompared', 'answersDiffering'] as const) {
    const sum = r.levels.reduce((a, l) => a + l[key], 0) + (key === 'rateLimited' ? 0 : latency[key])
    if (r.totals[key] !== sum) ctx.addIssue({ code: 'custom', path: ['totals', key], message: `is ${r.totals[key]}, but the levels (and the latency probe) sum to ${sum}` })
  }
})

export type LoadLevelsRecord = z.infer<typeof loadLevelsRecordSchema>
export type LoadLevel = z.infer<typeof loadLevelSchema>
export type LatencyProbe = z.infer<typeof latencyProbeSchema>

/** Check parsed JSON against the schema; the error names the file and the first bad field. */
export function parseLoadLevelsRecord (json: unknown, file: string): LoadLevelsRecord {
  return parseRecordJson(loadLevelsRecordSchema, json, file, 'load-levels record')
}

/** Read every `*.json` record in `dir`, sorted by file name; a missing directory holds none. */
export async function readLoadLevelsRecords (dir: string): Promise<LoadLevelsRecord[]> {
  return (await readRecordDir(dir, { plural: 'load-levels records', notJson: 'not JSON' }, parseLoadLevelsRecord)).map((r) => r.record)
}

/** One finished streamed request of a level, as the protocol saw it. */
export interface LevelSample {
  route: LoadRoute
  status: number | null
  /** Client clock (performance.now()), ms: sent, first content token (null: none came), last byte. */
  start: number
  first: number | null
  end: number
  completionTokens: number
  verdict: string | null
  /** Whether the answer equals its solo run token for token; null when it was not compared (not 2xx). */
  sameAsSolo: boolean | null
  message: string | null
}

function isOk (s: LevelSample): boolean {
  return s.status !== null && s.status >= 200 && s.status <= 299
}

/** Total length of the union of [start, end] intervals, ms. */
export function unionMs (spans: ReadonlyArray<readonly [number, number]>): number {
  const sorted = [...spans].filter(([a, b]) => b > a).sort((x, y) => x[0] - y[0])
  let total = 0
  let at = -Infinity
  for (const [a, b] of sorted) {
    const from = Math.max(a, at)
    if (b > from) total += b - from
    at = Math.max(at, b)
  }
  return total
}

function verdictCounts (samples: readonly LevelSample[]): Array<{ verdict: string, requests: number }> {
  const m = new Map<string, number>()
  for (const s of samples) m.set(verdictGroup(s.verdict), (m.get(verdictGroup(s.verdict)) ?? 0) + 1)
  return [...m.entries()].map(([verdict, requests]) => ({ verdict, requests })).sort((a, b) => b.requests - a.requests || a.verdict.localeCompare(b.verdict))
}

function ttfts (samples: readonly LevelSample[]): Percentiles | null {
  return percentiles(samples.filter((s) => s.first !== null).map((s) => s.first! - s.start))
}

/** A level's fields from its samples (peak RSS and load average are measured apart). */
export function summarizeLevel (clients: number, samples: readonly LevelSample[], extra: Pick<LoadLevel, 'peakRssBytes' | 'loadAverage' | 'decoderBatch'>): LoadLevel {
  const ok = samples.filter(isOk)
  const wallMs = samples.length === 0 ? 0 : Math.max(...samples.map((s) => s.end)) - Math.min(...samples.map((s) => s.start))
  const completionTokens = ok.reduce((a, s) => a + s.completionTokens, 0)
  const decoding = ok.filter((s) => s.first !== null && s.completionTokens > 1)
  const decodeMs = unionMs(decoding.map((s) => [s.first!, s.end] as const))
  const compared = ok.filter((s) => s.sameAsSolo !== null)
  return {
    clients,
    requests: samples.length,
    ok: ok.length,
    errors: samples.filter((s) => isLoadError(s.status)).length,
    rateLimited: samples.filter((s) => s.status === 429).length,
    wallMs,
    completionTokens,
    tokensPerS: wallMs > 0 ? completionTokens / (wallMs / 1000) : 0,
    decodeTokensPerS: decodeMs > 0 ? decoding.reduce((a, s) => a + s.completionTokens - 1, 0) / (decodeMs / 1000) : null,
    ttftMs: ttfts(ok),
    latencyMs: percentiles(ok.map((s) => s.end - s.start)),
    routes: LOAD_ROUTES.map((route) => {
      const mine = samples.filter((s) => s.route === route)
      const mineOk = mine.filter(isOk)
      return { route, requests: mine.length, ok: mineOk.length, ttftMs: ttfts(mineOk), latencyMs: percentiles(mineOk.map((s) => s.end - s.start)), verdicts: verdictCounts(mineOk) }
    }),
    answersCompared: compared.length,
    answersDiffering: compared.filter((s) => s.sameAsSolo === false).length,
    ...extra,
  }
}

/** The latency probe's fields: idle and under-bridge short samples, the long prompts sent meanwhile. */
export function summarizeLatency (samples: number, idle: readonly LevelSample[], underBridge: readonly LevelSample[], outsideBridge: readonly LevelSample[], longs: readonly LevelSample[]): LatencyProbe {
  const all = [...idle, ...underBridge, ...outsideBridge, ...longs]
  const idleTtftMs = ttfts(idle.filter(isOk))
  const underBridgeTtftMs = ttfts(underBridge.filter(isOk))
  const compared = all.filter((s) => isOk(s) && s.sameAsSolo !== null)
  return {
    samples,
    idleTtftMs,
    underBridgeTtftMs,
    ratioP99: idleTtftMs === null || underBridgeTtftMs === null || idleTtftMs.p99 === 0 ? null : underBridgeTtftMs.p99 / idleTtftMs.p99,
    longPrompts: longs.length,
    longVerdicts: verdictCounts(longs.filter(isOk)),
    outsideBridge: outsideBridge.length,
    errors: all.filter((s) => isLoadError(s.status)).length,
    answersCompared: compared.length,
    answersDiffering: compared.filter((s) => s.sameAsSolo === false).length,
  }
}

/** Speed-up per level, the goals and the totals, from the levels and the latency probe. */
export function loadLevelsVerdict (levels: readonly LoadLevel[], latency: LatencyProbe | null): Pick<LoadLevelsRecord, 'speedup' | 'goals' | 'totals'> {
  const one = levels.find((l) => l.clients === 1)?.decodeTokensPerS ?? null
  const speedup = one === null || one === 0 ? null : Object.fromEntries(levels.map((l) => [String(l.clients), l.decodeTokensPerS === null ? null : l.decodeTokensPerS / one]))
  const at8 = speedup?.[String(LOAD_GOALS.throughputClients)] ?? null
  const sum = (k: 'requests' | 'ok' | 'errors' | 'rateLimited' | 'answersCompared' | 'answersDiffering'): number => levels.reduce((a, l) => a + l[k], 0)
  const differing = sum('answersDiffering') + (latency?.answersDiffering ?? 0)
  return {
    speedup,
    goals: {
      throughput: { target: LOAD_GOALS.throughputSpeedup, measured: at8, met: at8 === null ? null : at8 >= LOAD_GOALS.throughputSpeedup },
      ttftUnderBridge: { target: LOAD_GOALS.ttftRatio, measured: latency?.ratioP99 ?? null, met: latency?.ratioP99 == null ? null : latency.ratioP99 <= LOAD_GOALS.ttftRatio },
      answersDiffering: { target: 0, measured: differing, met: differing === 0 },
    },
    totals: {
      requests: sum('requests'),
      ok: sum('ok'),
      errors: sum('errors') + (latency?.errors ?? 0),
      rateLimited: sum('rateLimited'),
      answersCompared: sum('answersCompared') + (latency?.answersCompared ?? 0),
      answersDiffering: differing,
    },
  }
}
