// One micro-benchmark run as protocols/bench-kernels.ts or protocols/bench-capture.ts writes it
// under results/micro/: the same environment block as a cold-prompt run, the machine's peaks
// measured in the same process, and one row per measured case, each next to its peak.
import { mkdir, writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import { z } from 'zod'
import { PdBridgeError } from '../../src/errors.ts'
import { environmentSchema } from './record.ts'
import { parseRecordJson, readRecordDir } from './record-files.ts'

/** The micro-benchmark record's schema tag. */
export const MICRO_RECORD_SCHEMA = 'pd-bridge/micro-bench@1'

/** What a micro benchmark measures: the native kernels, or the capture hook. */
export const MICRO_SUITES = ['kernels', 'hook'] as const
/** A micro-benchmark suite. */
export type MicroSuite = typeof MICRO_SUITES[number]

/**
 * How a row's time was taken: `tinybench-p50`, the median latency of tinybench's samples (short
 * calls); `timed-median`, the median of plain timed repeats (a call too long for many samples).
 */
export const MICRO_METHODS = ['tinybench-p50', 'timed-median'] as const

/** Relative slack allowed between `percentOfPeak` and 100 × rate / peak: the same arithmetic in another order, nothing more. */
const PERCENT_SLACK = 1e-9

const positive = z.number().finite().positive()
const nonnegative = z.number().finite().nonnegative()
const count = z.number().int().nonnegative()
const loadAverage = z.tuple([nonnegative, nonnegative, nonnegative])

/** The machine's peaks, measured in the same process as the rows (best of `bestOf` short runs). */
export const machinePeaksSchema = z.object({
  /** Kernel threads configured: the "all threads" peaks are on this many. */
  threads: z.number().int().positive(),
  bestOf: z.number().int().positive(),
  /** mul+add of the running kernel variant (8 lanes, no FMA: the lanes8 order's instruction mix) GFLOP/s on 1 thread and on `threads`. */
  gflops1Thread: positive,
  gflopsAllThreads: positive,
  /** Streaming copy (bytes read + written) of `copyBytes`, GB/s, on 1 thread and on `threads`. */
  copyBytes: z.number().int().positive(),
  copyGbps1Thread: positive,
  copyGbpsAllThreads: positive,
}).strict()

const rowBase = {
  name: z.string().min(1),
  /** The case, as text (`m=128 k=4096 n=1024`, `tiny T=1024`). */
  shape: z.string().min(1),
  /** Threads the call really used (kernel calls below the parallel threshold stay on one). */
  threads: z.number().int().positive(),
  rate: nonnegative,
  unit: z.enum(['GFLOP/s', 'GB/s']),
  /** The machine's peak this rate is compared to, in `unit`, measured in the same process run. */
  peak: positive,
  /** What the peak is, in words (`mul+add, 2 threads`, `copy of the same 4.0 MiB, 1 thread`). */
  peakOf: z.string().min(1),
  percentOfPeak: nonnegative,
  /** Samples (tinybench) or repeats (timed) behind the row's time. */
  samples: z.number().int().positive(),
  method: z.enum(MICRO_METHODS),
}

/** The name of the kernel rows that time OpenBLAS's sgemm (through numpy) at a matmul row's shape. */
export const OPENBLAS_ROW_NAME = 'openblas sgemm (numpy)'

/** A kernel row: one native (or reference) call at one shape, or OpenBLAS's sgemm at one shape. */
export const kernelRowSchema = z.object({
  suite: z.literal('kernels'),
  ...rowBase,
  kernel: z.object({
    p50Ms: nonnegative,
    meanMs: nonnegative,
    /** Floating-point operations of one call (0 for the memory-bound kernels). */
    flops: count,
    /** Bytes one call must read and write at least. */
    bytes: count,
    gflops: nonnegative,
    gbps: nonnegative,
  }).strict(),
}).strict()

/** A hook row: the capture hook over one prompt, next to the forward it rides on. */
export const hookRowSchema = z.object({
  suite: z.literal('hook'),
  ...rowBase,
  hook: z.object({
    preset: z.string().min(1),
    tokens: z.number().int().positive(),
    /** The prefill forward alone over the prompt, median of `forwardRepeats`, ms. */
    forwardMs: positive,
    /** The same forward with the capture session on its attention inputs, median, ms. */
    forwardWithCaptureMs: positive,
    forwardRepeats: z.number().int().positive(),
    /** The row's time for one pass of the hook over the prompt (pooling and layer-file writes), ms. */
    hookMs: positive,
    /** Of which: pooling (the session's own clock) and layer-file writes, each the median over the same samples, ms. */
    poolingMs: nonnegative,
    layerWriteMs: nonnegative,
    /** hookMs / tokens. */
    msPerToken: positive,
    /** hookMs / forwardMs. */
    fractionOfForward: nonnegative,
    /** The session's own time (pooling + writes) inside the real forward with capture, median, ms. */
    inForwardMs: nonnegative,
    payloadBytes: count,
    payloadBytesPerToken: nonnegative,
    /** The theoretical minimum per token (capture/payload.ts), and its pooled part. */
    minimumBytesPerToken: nonnegative,
    poolBytesPerToken: nonnegative,
    /** payloadBytes / minimum bytes. */
    overMinimum: nonnegative,
    /** What the layer files must hold per token: the minimum plus the block-boundary snapshots. */
    requiredBytesPerToken: nonnegative,
    /** payloadBytes / required bytes. */
    overRequired: nonnegative,
    peakHeldBytes: count,
    /** Multiply-adds × 2 of the kv-path projections over every layer's rows (the row's GFLOP/s counts these). */
    flops: count,
    /** The least traffic one pass makes: attention inputs read, sidecar weights read once, layer files written. */
    bytesMoved: z.object({ attentionInputs: count, weights: count, payload: count }).strict(),
    /** That traffic over hookMs, GB/s, and a copy moving the same bytes on the same threads, GB/s. */
    trafficGbps: nonnegative,
    copyPeakGbps: positive,
  }).strict(),
}).strict()

/** One measured row. */
export const microRowSchema = z.discriminatedUnion('suite', [kernelRowSchema, hookRowSchema])

/** One micro-benchmark record. */
export const microRecordSchema = z.object({
  schema: z.literal(MICRO_RECORD_SCHEMA),
  runId: z.string().min(1),
  startedAt: z.string().datetime(),
  suite: z.enum(MICRO_SUITES),
  environment: environmentSchema,
  /** os.loadavg() when the run started and when it ended: the machine may be shared. */
  load: z.object({ before: loadAverage, after: loadAverage }).strict(),
  note: z.string().nullable(),
  /** The native kernels as this process ran them. */
  native: z.object({
    threads: z.number().int().positive(),
    /** Work size (multiply-adds or elements) from which a call uses threads. */
    parallelThreshold: z.number().int().nonnegative(),
    /** The kernel variant that ran (absent in records made before the portable build). */
    isa: z.enum(['avx512', 'avx2', 'portable']).optional(),
    /** The effective compiler flags of the kernels that ran (empty when their makefile is not there). */
    flags: z.array(z.string()),
  }).strict(),
  /** The run's knobs (time per task, repeats, profiles), by name. */
  settings: z.record(z.string(), z.union([z.number(), z.string()])),
  peaks: machinePeaksSchema,
  rows: z.array(microRowSchema).min(1),
}).strict().superRefine((record, ctx) => {
  const seen = new Set<string>()
  record.rows.forEach((row, i) => {
    const at = (field: string, message: string) => ctx.addIssue({ code: 'custom', path: ['rows', i, field], message })
    if (row.suite !== record.suite) at('suite', `is ${row.suite} in a ${record.suite} record`)
    const key = microRowKey(row)
    if (seen.has(key)) at('name', `${row.name} ${row.shape} on ${row.threads} thread(s) appears twice`)
    seen.add(key)
    const expected = 100 * row.rate / row.peak
    if (Math.abs(row.percentOfPeak - expected) > PERCENT_SLACK * Math.max(1, expected)) {
      at('percentOfPeak', `is ${row.percentOfPeak} but 100 × rate / peak is ${expected}`)
    }
    // A compute rate is only ever compared to the mul+add peak this record measured for its threads.
    if (row.unit === 'GFLOP/s') {
      const own = row.threads === 1 ? record.peaks.gflops1Thread : row.threads === record.peaks.threads ? record.peaks.gflopsAllThreads : undefined
      if (own === undefined) at('threads', `${row.threads} has no measured GFLOP/s peak in this record (1 or ${record.peaks.threads})`)
      else if (row.peak !== own) at('peak', `is ${row.peak} but this record measured ${own} GFLOP/s on ${row.threads} thread(s)`)
    }
  })
})

/** One micro-benchmark record. */
export type MicroRecord = z.infer<typeof microRecordSchema>
/** One measured row. */
export type MicroRow = z.infer<typeof microRowSchema>
/** A kernel row. */
export type KernelRow = z.infer<typeof kernelRowSchema>
/** A hook row. */
export type HookRow = z.infer<typeof hookRowSchema>
/** The machine's peaks of one record. */
export type MachinePeaks = z.infer<typeof machinePeaksSchema>

/** What makes two rows the same measurement: suite, name, shape and threads. */
export function microRowKey (row: Pick<MicroRow, 'suite' | 'name' | 'shape' | 'threads'>): string {
  return JSON.stringify([row.suite, row.name, row.shape, row.threads])
}

/** Check parsed JSON against the schema; the error names the file and the first bad field. */
export function parseMicroRecord (json: unknown, file: string): MicroRecord {
  return parseRecordJson(microRecordSchema, json, file, 'micro-benchmark record')
}

/** Read every `*.json` record in `dir`, sorted by file name; a missing directory holds none. */
export async function readMicroRecords (dir: string): Promise<MicroRecord[]> {
  const read = await readRecordDir(dir, { plural: 'micro-benchmark records', notJson: 'not JSON' }, parseMicroRecord)
  // The report refers to a record by its run id, so two files must not share one.
  const fileOf = new Map<string, string>()
  for (const { file, record } of read) {
    const other = fileOf.get(record.runId)
    if (other !== undefined) throw new PdBridgeError(`${file}: micro-benchmark record field runId: ${record.runId} is also the run id of ${other}`)
    fileOf.set(record.runId, file)
  }
  return read.map((r) => r.record)
}

/** The record's file name: its start time and suite (and `tag`, e.g. the preset), so runs never overwrite each other. */
export function microRunId (startedAt: string, suite: MicroSuite, tag?: string): string {
  return [startedAt.replace(/[:.]/g, '-'), suite, ...(tag === undefined ? [] : [tag])].join('-')
}

/** Validate `record` and write it as `<dir>/<runId>.json`; returns the path. */
export async function writeMicroRecord (dir: string, record: MicroRecord): Promise<string> {
  const file = join(dir, `${record.runId}.json`)
  parseMicroRecord(record, file)
  await mkdir(dir, { recursive: true })
  await writeFile(file, JSON.stringify(record, null, 2) + '\n')
  return file
}
