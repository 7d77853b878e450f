// One run of the warm-extend protocol (protocols/warm-extend.mjs, docs/warm-extend.md) as it is
// written under results/warm/: a prompt A bridged cold (the decoder's store then holds its blocks),
// the prompt B = A + a long tail bridged warm (the prefill engine continues from the decoder's cache
// at the last stored boundary P and prefills only the tail), the alternative a bridge from token 0
// costs (another prompt of B's length, nothing stored), and the decoder alone on B with A's blocks
// in its own store. The proof of the warm leg is against the decoder alone: its answer and every
// block of B's chain, compared tensor by tensor with the decoder alone's.
import { z } from 'zod'
import { environmentSchema } from './record.ts'
import { parseRecordJson, readRecordDir } from './record-files.ts'

/** The record's schema tag; a new layout gets a new tag so old records are never misread. */
export const WARM_RECORD_SCHEMA = 'pd-bridge/warm-run@1'

const count = z.int().nonnegative()
const ms = z.number().finite().nonnegative()
const bytes = z.int().nonnegative()
const sha = z.string().regex(/^[0-9a-f]{64}$/)

/** A leg's answer as the client saw it. */
const answerSchema = z.strictObject({
  /** Request wall time, end to end, ms. */
  totalMs: ms,
  /** Time to the first answer token (stream), ms; null when none came. */
  ttftMs: ms.nullable(),
  promptTokens: count,
  completionTokens: count,
  finishReason: z.string(),
  /** SHA-256 of the answer's text (UTF-8, hex). */
  answerSha256: sha,
})

/** A leg through the front door, with what pd_bridge said. */
const bridgedSchema = answerSchema.extend({
  /** X-PD-Bridge as sent (pd_bridge.verdict). */
  verdict: z.string().min(1),
  /** The stored boundary P the engine continued from; null for a bridge from token 0. */
  resumedFrom: count.nullable(),
  /** Tokens in the blocks the bridge wrote (past P for a warm leg). */
  bridgedTokens: count,
  /** The decoder's cached_tokens for the request. */
  cachedTokens: count.nullable(),
  /** Why a bridge over stored blocks ran from token 0 (pd_bridge.warm_extend_declined), else null. */
  warmDeclined: z.string().nullable(),
  stagesMs: z.strictObject({
    /** Restoring the decoder's cache at P, encoding it and sending it (warm legs only). */
    carry: ms.nullable(),
    enginePrefill: ms.nullable(),
    transfer: ms.nullable(),
    assembly: ms.nullable(),
    blockWrite: ms.nullable(),
    decoderTtft: ms.nullable(),
    bridgeTotal: ms.nullable(),
  }),
  bytes: z.strictObject({ carry: bytes, capture: bytes, blocks: bytes }),
})

/** One warm-extend protocol run. */
export const warmRecordSchema = z.strictObject({
  schema: z.literal(WARM_RECORD_SCHEMA),
  runId: z.string().min(1),
  startedAt: z.iso.datetime(),
  environment: environmentSchema,
  seed: count,
  /** max_tokens of every leg, greedy. */
  answerBudget: z.int().positive(),
  /** Tokens of prompt A (the stored prefix's prompt) and of prompt B (A + the tail). */
  prefixTokens: z.int().positive(),
  promptTokens: z.int().positive(),
  /** A, bridged cold: what put the prefix's blocks into the store. */
  first: bridgedSchema,
  /** B, bridged warm from the last stored boundary. */
  warm: bridgedSchema,
  /** The alternative: a prompt of B's length (another seed, nothing stored) bridged from token 0. */
  cold: bridgedSchema,
  /** B on the decoder alone, whose own store holds A's blocks (it prefills only the tail, natively). */
  native: answerSchema,
  /** The warm leg's answer is the decoder alone's (text, finish reason, token count). */
  answersAgree: z.boolean(),
  /** B's chain of full blocks in the bridged store against the decoder alone's store (tensor by tensor, verify-blocks). */
  blocks: z.strictObject({
    keys: z.int().positive(),
    identical: count,
    /** The first differences found (at most 20), empty when every block is identical. */
    differences: z.array(z.string()).max(20),
  }),
  /** Peak resident memory per process (Linux VmHWM), bytes. */
  peakMemoryBytes: z.record(z.string(), bytes),
}).superRefine((r, ctx) => {
  if (r.prefixTokens >= r.promptTokens) ctx.addIssue({ code: 'custom', path: ['prefixTokens'], message: `must be below promptTokens ${r.promptTokens}` })
  if (r.blocks.identical > r.blocks.keys) ctx.addIssue({ code: 'custom', path: ['blocks', 'identical'], message: `is more than the ${r.blocks.keys} keys` })
  if ((r.blocks.identical === r.blocks.keys) !== (r.blocks.differences.length === 0)) ctx.addIssue({ code: 'custom', path: ['blocks', 'differences'], message: 'must be empty exactly when every block is identical' })
})

/** One warm-extend protocol run. */
export type WarmRecord = z.infer<typeof warmRecordSchema>

/** Whether a run proved the warm leg bit-exact: its verdict complete and warm, its answer and every block the decoder alone's. */
export function warmBitExact (r: WarmRecord): boolean {
  return r.warm.verdict.startsWith('complete') && r.warm.resumedFrom !== null && r.answersAgree && r.blocks.identical === r.blocks.keys
}

/** Check parsed JSON against the schema; the error names the file and the first bad field. */
export function parseWarmRecord (json: unknown, file: string): WarmRecord {
  return parseRecordJson(warmRecordSchema, json, file, 'warm record')
}

/** Every warm record in `dir` (sorted by file name); a missing directory holds none. */
export async function readWarmRecords (dir: string): Promise<WarmRecord[]> {
  return (await readRecordDir(dir, { plural: 'warm records', notJson: 'not JSON' }, parseWarmRecord)).map((x) => x.record)
}
