// One environment's micro benchmarks for the report: the newest row of every measurement
// (suite, name, shape, threads), with the record it came from (and so the peaks measured with it),
// and how many older records measured the same thing.
import { microRowKey, type HookRow, type KernelRow, type MicroRecord } from './micro-record.ts'

/** A shown row, its record, and how many older records hold the same measurement. */
export interface MicroEntry<R> {
  row: R
  record: MicroRecord
  older: number
}

/** One environment's micro benchmarks. */
export interface MicroSummary {
  /** Every micro record of the environment. */
  records: number
  kernels: Array<MicroEntry<KernelRow>>
  hook: Array<MicroEntry<HookRow>>
  /** The records that hold a shown row, newest first: their peaks and load go next to the rows. */
  shown: MicroRecord[]
}

/** Newest first: by start time, then by run id so equal times still give one order. */
function newestFirst (a: MicroRecord, b: MicroRecord): number {
  return b.startedAt.localeCompare(a.startedAt) || b.runId.localeCompare(a.runId)
}

/**
 * Summarize one environment's records. Rows appear in the order of the newest record that has
 * them, so a re-run keeps the benchmark's own order; a row only older records have comes after.
 */
export function summarizeMicro (records: MicroRecord[]): MicroSummary {
  const entries = new Map<string, MicroEntry<KernelRow | HookRow>>()
  for (const record of [...records].sort(newestFirst)) {
    for (const row of record.rows) {
      const key = microRowKey(row)
      const seen = entries.get(key)
      if (seen === undefined) entries.set(key, { row, record, older: 0 })
      else seen.older++
    }
  }
  const all = [...entries.values()]
  const shownIds = new Set(all.map((e) => e.record.runId))
  return {
    records: records.length,
    kernels: all.filter((e): e is MicroEntry<KernelRow> => e.row.suite === 'kernels'),
    hook: all.filter((e): e is MicroEntry<HookRow> => e.row.suite === 'hook'),
    shown: [...records].sort(newestFirst).filter((r) => shownIds.has(r.runId)),
  }
}
