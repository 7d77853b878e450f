// Turn run records into per-environment, per-size numbers. The protocol's counting rules live
// here: only a `complete` verdict is bridged, ratios are medians of paired runs, environments
// are never mixed. Needle runs are grouped the same way and counted by verify/needle/heatmap.ts.
import { needleGrids, type NeedleGrid } from '../needle/heatmap.ts'
import type { NeedleRunRecord } from '../needle/record.ts'
import type { FaultsRecord } from './fault-record.ts'
import { summarizeFaults, type FaultsSummary } from './faults-section.ts'
import type { LoadRecord } from './load-record.ts'
import { summarizeLoad, type LoadSummary } from './load-section.ts'
import type { LoadLevelsRecord } from './load-levels-record.ts'
import { summarizeLoadLevels, type LoadLevelsSummary } from './load-levels-section.ts'
import type { MicroRecord } from './micro-record.ts'
import { summarizeMicro, type MicroSummary } from './micro-summary.ts'
import type { BridgedLeg, RunEnvironment, RunRecord } from './record.ts'
import type { WarmRecord } from './warm-record.ts'
import { summarizeWarm, type WarmSummary } from './warm-section.ts'
import type { TwoHostRecord } from './two-host-record.ts'
import { summarizeTwoHost, type TwoHostSummary } from './two-host-section.ts'
import type { AdversaryRecord } from './adversary-record.ts'
import { summarizeAdversary, type AdversarySummary } from './adversary-section.ts'

/** The one verdict that counts a run as bridged. */
export const BRIDGED_VERDICT = 'complete'

/** Median of `values`; null when empty (a leg that was not run has no median). */
export function median (values: number[]): number | null {
  if (values.length === 0) return null
  const sorted = [...values].sort((a, b) => a - b)
  const mid = sorted.length >> 1
  return sorted.length % 2 === 1 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2
}

/**
 * Below this many ms a token after the first, the client's clock did not see the decode. It times
 * text, and a decoder holds back pieces that end in a partial character or could begin a stop
 * string. So an answer whose text arrives in one burst (a 130K record: 31 tokens in 0.63 ms) says
 * nothing about the rate. No decoder here comes near 1,000 tokens/s.
 */
const MIN_MS_PER_TOKEN = 1

/**
 * Decode rate after the first token, tokens/s; null when it cannot be told. By the decoder's own
 * clock where the record has it (decoderMs.decode), else by the client's (total - TTFT).
 */
export function decodeRate (leg: { totalMs: number, ttftMs: number | null, completionTokens: number, decoderMs?: { decode: number } }): number | null {
  if (leg.completionTokens < 2) return null
  if (leg.decoderMs === undefined && leg.ttftMs === null) return null
  const decodeMs = leg.decoderMs?.decode ?? leg.totalMs - leg.ttftMs!
  if (!(decodeMs >= MIN_MS_PER_TOKEN * (leg.completionTokens - 1))) return null
  return (leg.completionTokens - 1) / (decodeMs / 1000)
}

/** The verdict's kind, its first word: `partial 512/1029` is partial, `declined: <reason>` declined. */
export function verdictKind (verdict: string): string {
  return verdict.trim().split(/[\s:]/)[0]
}

/** A bridged leg that counts as bridged: its verdict is exactly `complete`. */
export function isBridged (leg: BridgedLeg | null): leg is BridgedLeg {
  return leg !== null && leg.verdict.trim() === BRIDGED_VERDICT
}

/** One run's end-to-end times, as recorded: what the time chart plots next to the medians. */
export interface RunPoint {
  runId: string
  /** Prompt tokens the run sent (the bridged leg's count, else the native leg's). */
  promptTokens: number
  /** The decoder-alone leg's end-to-end ms; null when it was not run. */
  nativeMs: number | null
  /** The bridged leg's end-to-end ms, whatever its verdict; null when it was not run. */
  bridgedMs: number | null
  /** The bridged leg's verdict as sent; null when it was not run. */
  verdict: string | null
  /** Whether the bridged leg counts as bridged (verdict exactly `complete`). */
  counted: boolean
}

/** One size's numbers in one environment. */
export interface SizeSummary {
  targetTokens: number
  runs: number
  /** Median prompt tokens actually sent. */
  promptTokens: number | null
  /** Median end-to-end ms of the decoder alone, over runs with a native leg. */
  nativeMs: number | null
  /** Median end-to-end ms bridged, over `complete` runs only. */
  bridgedMs: number | null
  /** Median of native/bridged over paired runs (both legs, verdict complete). */
  ratio: number | null
  /** Medians of the two legs over those paired runs only: the times a ratio is read beside. */
  pairedNativeMs: number | null
  pairedBridgedMs: number | null
  pairs: number
  /** Of `pairs`, those whose decoder-alone leg ran in an earlier invocation (native.apart). */
  pairsApart: number
  /** How many runs ended with each verdict (`not run` when the bridged leg was missing). */
  verdicts: Record<string, number>
  /** Runs whose answers differed from the native leg's. */
  disagreements: number
  /** Runs where a leg's answer stopped at the answer budget (finish reason `length`). */
  truncated: number
  stagesMs: { enginePrefill: number | null, transfer: number | null, assembly: number | null, blockWrite: number | null, decoderTtft: number | null, endToEnd: number | null }
  /** Median fetched bytes per bridged token, and the minimum: the blocks' own bytes per token. */
  bytesPerToken: number | null
  minBytesPerToken: number | null
  nativeDecodeRate: number | null
  bridgedDecodeRate: number | null
  /** Every run of the size, in record order (the medians above are taken over these). */
  points: RunPoint[]
  /** The bridged legs of the size's runs as recorded, whatever their verdict, in record order (runs without one left out): the cost chart reads these. */
  bridgedLegs: BridgedLeg[]
}

/** One environment's summary. */
export interface EnvironmentSummary {
  environment: RunEnvironment
  /** Commits its records came from. */
  commits: string[]
  sizes: SizeSummary[]
  /** Highest peak RSS per process over all its runs, bytes. */
  peakMemoryBytes: Record<string, number>
  /** Its micro benchmarks (none when no micro record has its id). */
  micro: MicroSummary
  /** Its needle runs as a depth x length grid; null when no needle record has its id. */
  needle: NeedleGrid | null
  /** Its fault protocol runs; null when no faults record has its id. */
  faults: FaultsSummary | null
  /** Its load protocol runs; null when no load record has its id. */
  load: LoadSummary | null
  /** Its load-levels runs (protocols/load.mjs, concurrency levels); null when no load-levels record has its id. */
  loadLevels: LoadLevelsSummary | null
  /** Its warm-extend protocol runs; null when no warm record has its id. */
  warm: WarmSummary | null
  /** Its two-host protocol runs; null when no two-host record has its id. */
  twoHost: TwoHostSummary | null
  /** Its adversary protocol runs; null when no adversary record has its id. */
  adversary: AdversarySummary | null
}

function medianOf<T> (items: T[], pick: (item: T) => number | null): number | null {
  return median(items.map(pick).filter((v): v is number => v !== null))
}

function summarizeSize (targetTokens: number, runs: RunRecord[]): SizeSummary {
  const bridged = runs.map((r) => r.bridged).filter(isBridged)
  const natives = runs.map((r) => r.native).filter((n) => n !== null)
  const pairs = runs.filter((r) => r.native !== null && isBridged(r.bridged))
  const verdicts: Record<string, number> = {}
  for (const r of runs) {
    const v = r.bridged === null ? 'not run' : verdictKind(r.bridged.verdict)
    verdicts[v] = (verdicts[v] ?? 0) + 1
  }
  const perToken = (pick: (b: BridgedLeg) => number) => medianOf(bridged, (b) => b.bridgedTokens > 0 ? pick(b) / b.bridgedTokens : null)
  return {
    targetTokens,
    runs: runs.length,
    promptTokens: median(runs.map((r) => r.bridged?.promptTokens ?? r.native?.promptTokens).filter((v): v is number => v !== undefined)),
    nativeMs: medianOf(natives, (n) => n.totalMs),
    bridgedMs: medianOf(bridged, (b) => b.totalMs),
    ratio: medianOf(pairs, (r) => r.bridged!.totalMs > 0 ? r.native!.totalMs / r.bridged!.totalMs : null),
    pairedNativeMs: medianOf(pairs, (r) => r.native!.totalMs),
    pairedBridgedMs: medianOf(pairs, (r) => r.bridged!.totalMs),
    pairs: pairs.length,
    pairsApart: pairs.filter((r) => r.native!.apart !== undefined).length,
    verdicts,
    disagreements: runs.filter((r) => r.answersAgree === false).length,
    truncated: runs.filter((r) => r.native?.finishReason === 'length' || r.bridged?.finishReason === 'length').length,
    stagesMs: {
      enginePrefill: medianOf(bridged, (b) => b.stagesMs.enginePrefill),
      transfer: medianOf(bridged, (b) => b.stagesMs.transfer),
      assembly: medianOf(bridged, (b) => b.stagesMs.assembly),
      blockWrite: medianOf(bridged, (b) => b.stagesMs.blockWrite),
      decoderTtft: medianOf(bridged, (b) => b.stagesMs.decoderTtft),
      endToEnd: medianOf(bridged, (b) => b.totalMs),
    },
    bytesPerToken: perToken((b) => b.bytes.fetched),
    minBytesPerToken: perToken((b) => b.bytes.blocks),
    nativeDecodeRate: medianOf(natives, decodeRate),
    bridgedDecodeRate: medianOf(bridged, decodeRate),
    points: runs.map((r) => ({
      runId: r.runId,
      promptTokens: r.bridged?.promptTokens ?? r.native?.promptTokens ?? targetTokens,
      nativeMs: r.native?.totalMs ?? null,
      bridgedMs: r.bridged?.totalMs ?? null,
      verdict: r.bridged?.verdict ?? null,
      counted: isBridged(r.bridged),
    })),
    bridgedLegs: runs.map((r) => r.bridged).filter((b) => b !== null),
  }
}

/**
 * Group cold-prompt runs, micro-benchmark records and needle run records by environment id
 * (sorted), runs then by target size (ascending). An environment with only micro or needle
 * records has no sizes.
 */
export function summarize (records: RunRecord[], micro: MicroRecord[] = [], needle: NeedleRunRecord[] = [], faults: FaultsRecord[] = [], load: LoadRecord[] = [], warm: WarmRecord[] = [],
  twoHost: TwoHostRecord[] = [], adversary: AdversaryRecord[] = [], loadLevels: LoadLevelsRecord[] = []): EnvironmentSummary[] {
  const byEnv = new Map<string, {
    runs: RunRecord[], micro: MicroRecord[], needle: NeedleRunRecord[], faults: FaultsRecord[], load: LoadRecord[], warm: WarmRecord[], twoHost: TwoHostRecord[], adversary: AdversaryRecord[],
    loadLevels: LoadLevelsRecord[]
  }>()
  const group = (id: string) => {
    let g = byEnv.get(id)
    if (g === undefined) byEnv.set(id, g = { runs: [], micro: [], needle: [], faults: [], load: [], warm: [], twoHost: [], adversary: [], loadLevels: [] })
    return g
  }
  for (const r of records) group(r.environment.id).runs.push(r)
  for (const m of micro) group(m.environment.id).micro.push(m)
  for (const n of needle) group(n.environment.id).needle.push(n)
  for (const f of faults) group(f.environment.id).faults.push(f)
  for (const l of load) group(l.environment.id).load.push(l)
  for (const w of warm) group(w.environment.id).warm.push(w)
  for (const t of twoHost) group(t.environment.id).twoHost.push(t)
  for (const a of adversary) group(a.environment.id).adversary.push(a)
  for (const l of loadLevels) group(l.environment.id).loadLevels.push(l)
  return [...byEnv.keys()].sort().map((id) => {
    const { runs, micro: benches, needle: needles, faults: faultRuns, load: loadRuns, warm: warmRuns, twoHost: twoHostRuns, adversary: adversaryRuns, loadLevels: levelRuns } = byEnv.get(id)!
    const sizes = [...new Set(runs.map((r) => r.targetTokens))].sort((a, b) => a - b)
    const peak: Record<string, number> = {}
    for (const r of runs) {
      for (const [proc, b] of Object.entries(r.peakMemoryBytes)) peak[proc] = Math.max(peak[proc] ?? 0, b)
    }
    const all = [...runs, ...benches, ...needles, ...faultRuns, ...loadRuns, ...warmRuns, ...twoHostRuns, ...adversaryRuns, ...levelRuns]
    // The latest record's description of the environment (they share the id, so they agree).
    const described = [...all].sort((a, b) => a.startedAt.localeCompare(b.startedAt)).at(-1)!
    return {
      environment: described.environment,
      commits: [...new Set(all.map((r) => r.environment.commit))].sort(),
      sizes: sizes.map((t) => summarizeSize(t, runs.filter((r) => r.targetTokens === t))),
      peakMemoryBytes: Object.fromEntries(Object.entries(peak).sort(([a], [b]) => a.localeCompare(b))),
      micro: summarizeMicro(benches),
      // Only this environment's records go in, so needleGrids makes exactly one grid.
      needle: needles.length === 0 ? null : needleGrids(needles)[0],
      faults: summarizeFaults(faultRuns),
      load: summarizeLoad(loadRuns),
      loadLevels: summarizeLoadLevels(levelRuns),
      warm: summarizeWarm(warmRuns),
      twoHost: summarizeTwoHost(twoHostRuns),
      adversary: summarizeAdversary(adversaryRuns),
    }
  })
}
