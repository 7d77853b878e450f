// One run of the fault protocol (protocols/faults.mjs, docs/BENCHMARK-PROTOCOL.md) as it is written
// under results/faults/: where it ran, what it sent, and per fault what the client got, whether that
// equals the decoder alone's greedy answer, whether anything corrupt sat in the block store or was
// served, and how long the stack took to bridge again. The schema also holds the counting rule: a
// fault is answered correctly only when its answer equals the native one and no corrupt block was
// indexed or served.
import { z } from 'zod'
import { environmentSchema } from './record.ts'
import { parseRecordJson, readRecordDir } from './record-files.ts'

/** The record's schema tag; a new layout gets a new tag so old records are never misread. */
export const FAULTS_RECORD_SCHEMA = 'pd-bridge/faults-run@1'

const count = z.int().nonnegative()
const ms = z.number().finite().nonnegative()

/** One injected fault and what the stack did about it. */
export const faultResultSchema = z.strictObject({
  /** Short name (`bit-flip`, `enospc`, `prefill-sigkill`, ...). */
  name: z.string().min(1),
  /** What was done to the stack, in one sentence. */
  injected: z.string().min(1),
  /** What a correct outcome is, in one sentence. */
  expected: z.string().min(1),
  /** Why the fault was not injected (no tmpfs, ...), or null. A skipped fault counts neither way. */
  skipped: z.string().min(1).nullable(),
  /** The front door's verdict (pd_bridge.verdict, else X-PD-Bridge), or what the client got instead (`no answer: ...`). */
  verdict: z.string(),
  /** HTTP status of the faulted request; null when no response came. */
  status: z.int().nullable(),
  /** Whether the answer (greedy token ids and finish reason, or a refusal's status and error) equals the decoder alone's; null when skipped. */
  answer_equals_native: z.boolean().nullable(),
  /** Block files in the bridged store whose content does not match their digest (or that cannot be read) after the fault. */
  corrupt_blocks_indexed: count,
  /** Corrupt blocks the decoder used for an answer (bit-flip: a cached_tokens covering the flipped block). */
  corrupt_blocks_served: count,
  /** From the end of the fault to a fresh cold prompt bridged complete with the native tokens; null when it never did (or skipped). */
  recovery_ms: ms.nullable(),
  /** The faulted request's wall time, ms; null when it was not sent. */
  answer_ms: ms.nullable(),
  /** The counting rule, applied by the protocol and checked here. */
  correct: z.boolean(),
  /** Fault-specific observations (quarantined files, captures made, verdicts of concurrent prompts, ...). */
  details: z.record(z.string(), z.unknown()),
}).superRefine((f, ctx) => {
  if (f.skipped !== null && f.correct) ctx.addIssue({ code: 'custom', path: ['correct'], message: 'a skipped fault cannot count as answered correctly' })
  if (f.correct && (f.answer_equals_native !== true || f.corrupt_blocks_indexed > 0 || f.corrupt_blocks_served > 0)) {
    ctx.addIssue({ code: 'custom', path: ['correct'], message: 'is true, but the answer differs from the native one or a corrupt block was indexed or served' })
  }
})

/** One fault protocol run. */
export const faultsRecordSchema = z.strictObject({
  schema: z.literal(FAULTS_RECORD_SCHEMA),
  runId: z.string().min(1),
  startedAt: z.iso.datetime(),
  finishedAt: z.iso.datetime(),
  environment: environmentSchema,
  settings: z.strictObject({
    /** Size of each fresh cold prompt (the writer kill uses a longer one). */
    promptTokens: z.int().positive(),
    maxTokens: z.int().positive(),
    concurrency: z.int().positive(),
    faultTimeoutMs: ms,
    recoveryTimeoutMs: ms,
    /** Whether the bridged store was a tmpfs (needed for ENOSPC and read-only). */
    tmpfsStore: z.boolean(),
  }),
  faults: z.array(faultResultSchema).min(1),
})

/** One fault protocol run. */
export type FaultsRecord = z.infer<typeof faultsRecordSchema>
/** One fault of a run. */
export type FaultResult = z.infer<typeof faultResultSchema>

/** The counting rule: the answer equals the native one and no corrupt block was indexed or served. */
export function faultCorrect (f: Pick<FaultResult, 'skipped' | 'answer_equals_native' | 'corrupt_blocks_indexed' | 'corrupt_blocks_served'>): boolean {
  return f.skipped === null && f.answer_equals_native === true && f.corrupt_blocks_indexed === 0 && f.corrupt_blocks_served === 0
}

/** Check parsed JSON against the schema; the error names the file and the first bad field. */
export function parseFaultsRecord (json: unknown, file: string): FaultsRecord {
  return parseRecordJson(faultsRecordSchema, json, file, 'faults record')
}

/** Read every `*.json` record in `dir`, sorted by file name; a missing directory holds none. */
export async function readFaultsRecords (dir: string): Promise<FaultsRecord[]> {
  return (await readRecordDir(dir, { plural: 'faults records', notJson: 'not JSON' }, parseFaultsRecord)).map((r) => r.record)
}
