// The micro-benchmark tables of one environment as plain data (RESULTS.md and report.html show
// the same cells). Every rate sits next to the peak its own record measured; nothing is compared
// across records or environments.
import type { MicroEntry, MicroSummary } from './micro-summary.ts'
import { OPENBLAS_ROW_NAME, type HookRow, type KernelRow, type MicroRecord } from './micro-record.ts'
import { formatBytes, NOT_RUN, type Table } from './tables.ts'

/** Table kinds, so the HTML can tell them apart. */
export type MicroTableKind = 'peaks' | 'kernels' | 'hook'

/** A micro-benchmark table and its kind. */
export interface MicroTable extends Table {
  kind: MicroTableKind
}

function rateCell (v: number, unit: string): string {
  return `${v.toFixed(2)} ${unit}`
}

function percent (v: number): string {
  return `${v.toFixed(1)}%`
}

function methodCell (row: { method: string, samples: number }): string {
  return row.method === 'tinybench-p50' ? `tinybench p50 of ${row.samples}` : `median of ${row.samples} timed`
}

function started (r: MicroRecord): string {
  return `${r.startedAt.slice(0, 10)} ${r.startedAt.slice(11, 16)}`
}

function load (l: [number, number, number]): string {
  return l.map((v) => v.toFixed(2)).join('/')
}

/** The columns every row has: rate, the peak, % of peak, what the peak is, method, record, older. */
function measured (e: MicroEntry<KernelRow | HookRow>): string[] {
  const r = e.row
  return [rateCell(r.rate, r.unit), rateCell(r.peak, r.unit), percent(r.percentOfPeak), r.peakOf, methodCell(r), e.record.runId, String(e.older)]
}

const MEASURED = ['rate', 'peak', '% of peak', 'peak is', 'method', 'record', 'older records']

/** A matmul row's rate over OpenBLAS's at the same shape in the SAME record (measured side by side), else blank. */
function vsOpenBlas (e: MicroEntry<KernelRow>): string {
  if (!e.row.name.startsWith('matmul')) return NOT_RUN
  const blas = e.record.rows.find((r) => r.name === OPENBLAS_ROW_NAME && r.shape === e.row.shape)
  return blas === undefined ? NOT_RUN : `${(e.row.rate / blas.rate).toFixed(2)}×`
}

/** The micro tables of one environment, in report order: peaks, kernels, hook (each only when it has rows). */
export function microTables (micro: MicroSummary): MicroTable[] {
  const tables: MicroTable[] = []
  if (micro.shown.length > 0) {
    tables.push({
      kind: 'peaks',
      title: 'Measured peaks (of the records shown)',
      headers: ['record', 'suite', 'started (UTC)', 'threads', 'mul+add, 1 thread', 'mul+add, all threads', 'copy, 1 thread', 'copy, all threads', 'copy size', 'best of', 'load 1/5/15 min (start → end)', 'note'],
      rows: micro.shown.map((r) => [
        r.runId, r.suite, started(r), String(r.peaks.threads),
        rateCell(r.peaks.gflops1Thread, 'GFLOP/s'), rateCell(r.peaks.gflopsAllThreads, 'GFLOP/s'),
        rateCell(r.peaks.copyGbps1Thread, 'GB/s'), rateCell(r.peaks.copyGbpsAllThreads, 'GB/s'), formatBytes(r.peaks.copyBytes),
        String(r.peaks.bestOf), `${load(r.load.before)} → ${load(r.load.after)}`, r.note ?? NOT_RUN,
      ]),
    })
  }
  if (micro.kernels.length > 0) {
    tables.push({
      kind: 'kernels',
      title: 'Kernels',
      headers: ['kernel', 'shape', 'threads', ...MEASURED.slice(0, 3), 'vs OpenBLAS (same record)', ...MEASURED.slice(3)],
      rows: micro.kernels.map((e) => {
        const m = measured(e)
        return [e.row.name, e.row.shape, String(e.row.threads), ...m.slice(0, 3), vsOpenBlas(e), ...m.slice(3)]
      }),
    })
  }
  if (micro.hook.length > 0) {
    tables.push({
      kind: 'hook',
      title: 'Capture hook',
      headers: [
        'hook', 'case', 'threads', 'hook per token', 'hook / forward', 'in forward / forward', 'payload per token', 'minimum per token',
        'minimum + block snapshots per token', 'payload / minimum', 'bytes moved vs copy', ...MEASURED,
      ],
      rows: micro.hook.map((e) => {
        const h = e.row.hook
        return [
          e.row.name, e.row.shape, String(e.row.threads), `${(h.msPerToken * 1000).toFixed(1)} µs`, percent(100 * h.fractionOfForward),
          percent(100 * h.inForwardMs / h.forwardMs), `${h.payloadBytesPerToken.toFixed(1)} B`, `${h.minimumBytesPerToken.toFixed(1)} B`,
          `${h.requiredBytesPerToken.toFixed(1)} B`, `${h.overMinimum.toFixed(3)}×`,
          `${rateCell(h.trafficGbps, 'GB/s')} of ${rateCell(h.copyPeakGbps, 'GB/s')} (${percent(100 * h.trafficGbps / h.copyPeakGbps)})`,
          ...measured(e),
        ]
      }),
    })
  }
  return tables
}
