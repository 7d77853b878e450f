// One cold-prompt benchmark run as the protocol writes it under results/runs/: the environment it
// ran in, both legs' timings and what the bridge reported. The generator trusts nothing else.
import { z } from 'zod'
import { parseRecordJson, readRecordDir } from './record-files.ts'

/** The record's schema tag; a new layout gets a new tag so old records are never misread. */
export const RUN_RECORD_SCHEMA = 'pd-bridge/cold-run@1'

const ms = z.number().finite().nonnegative()
const bytes = z.number().int().nonnegative()

/** Where a run ran: records with different `id`s are never compared. */
export const environmentSchema = z.object({
  /** Short fingerprint of everything below except `commit` (same machine, same config). */
  id: z.string().min(1),
  cpu: z.string(),
  cores: z.number().int().positive(),
  memoryBytes: bytes,
  node: z.string(),
  os: z.string(),
  commit: z.string(),
  configFingerprint: z.string(),
  /** The model the stack served (e.g. the embedded tiny preset). */
  model: z.string(),
  /** The prefill engine's GPU, when it ran on one (the CUDA rung); the CPU fields are the decoder's machine. */
  gpu: z.string().optional(),
}).strict()

/** A leg's answer and its decode timing. */
const answerSchema = z.object({
  /** Request wall time, end to end, ms. */
  totalMs: ms,
  /** Time to the first answer token as the client saw it, ms (stream); null when the leg could not tell. */
  ttftMs: ms.nullable(),
  promptTokens: z.number().int().nonnegative(),
  completionTokens: z.number().int().nonnegative(),
  finishReason: z.string(),
  /** SHA-256 of the answer's text (UTF-8, hex): two runs of one seed can be compared bit for bit. Absent in older records. */
  answerSha256: z.string().regex(/^[0-9a-f]{64}$/).optional(),
  /**
   * The decoder's own clock (its usage chunk's pd_decoder): prefill to the first token's logits,
   * decode from there to the last token, ms. Absent in older records and from other deployments.
   */
  decoderMs: z.object({ prefill: ms, decode: ms }).strict().optional(),
}).strict()

/**
 * The decoder alone: the same prompt to a decoder whose store is empty. `apart`: the leg ran in an
 * earlier invocation than the bridged leg, on the same environment and commit (cold-bench
 * --alone-only, then --pair-apart; verify/results/apart-leg.ts), and started then.
 */
export const nativeLegSchema = answerSchema.extend({
  apart: z.object({ startedAt: z.string().datetime() }).strict().optional(),
}).strict()

/** The bridged leg through the front door, with what its `pd_bridge` field said. */
export const bridgedLegSchema = answerSchema.extend({
  /** The front door's verdict: complete, partial, declined (or anything else it may say). */
  verdict: z.string().min(1),
  route: z.string(),
  bridgedTokens: z.number().int().nonnegative(),
  stagesMs: z.object({
    enginePrefill: ms.nullable(),
    transfer: ms.nullable(),
    assembly: ms.nullable(),
    blockWrite: ms.nullable(),
    /** The decoder's own time to first token once the blocks were in (pd_bridge decoder_ttft). */
    decoderTtft: ms.nullable(),
    bridgeTotal: ms.nullable(),
  }).strict(),
  bytes: z.object({ capture: bytes, fetched: bytes, blocks: bytes }).strict(),
  /**
   * The most cache bytes the capture held in memory at once, from the embedded prefill engine's
   * `prefill-end` log line (absent where the protocol cannot read the engine's log).
   */
  capturePeakHeldBytes: bytes.optional(),
  /** Whether the prefill engine streamed its captures (--spill-capture / PD_CAPTURE_SPILL), where known. */
  captureSpill: z.boolean().optional(),
  /**
   * Blocks written while the engine ran (cold-bench --stream-blocks, pd_bridge.stream): how many of
   * the blocks were put before the capture was sealed, the whole capture stage (engine and writes
   * overlapped), when the first block was put in it, and what was left after the seal. With an
   * engine that stamps its clock (torch): from the POST to its clock starting, and from its clock
   * stopping to the front seeing the seal (two processes' wall clocks, so not held to >= 0).
   */
  stream: z.object({
    blocksBeforeSeal: z.number().int().nonnegative(),
    blocks: z.number().int().nonnegative(),
    captureMs: ms.nullable(),
    firstBlockMs: ms.nullable(),
    afterSealMs: ms.nullable(),
    engineStartMs: z.number().finite().nullable().optional(),
    sealSeenMs: z.number().finite().nullable().optional(),
    engineSegmentWriteMs: z.number().finite().nullable().optional(),
    segmentWriterMs: z.number().finite().nullable().optional(),
  }).strict().optional(),
  /** Bridged end to end over the engine's prefill, and its floor (bridgedOverEngine); absent where a stage is missing. */
  overEngine: z.object({ endToEnd: z.number().finite().positive(), floor: z.number().finite().positive() }).strict().optional(),
}).strict()

/** What bridgedOverEngine reads from a bridged leg. */
export interface OverEngineInput {
  totalMs: number
  ttftMs: number | null
  stagesMs: { enginePrefill: number | null, decoderTtft: number | null }
}

/**
 * Bridged end to end / engine prefill, and the floor beside it (docs/torch-rung.md, *The floor*):
 * (engine + the decoder's own TTFT after its restore + the answer) / engine, the ratio a bridge
 * whose own stages took no time would show with this answer. Null where a stage is missing.
 */
export function bridgedOverEngine (leg: OverEngineInput): { endToEnd: number, floor: number } | null {
  const engine = leg.stagesMs.enginePrefill
  const decoder = leg.stagesMs.decoderTtft
  if (engine === null || engine <= 0 || decoder === null || leg.ttftMs === null) return null
  const answer = Math.max(0, leg.totalMs - leg.ttftMs)
  const round = (x: number): number => Math.round(x * 1000) / 1000
  return { endToEnd: round(leg.totalMs / engine), floor: round((engine + decoder + answer) / engine) }
}

/** One run record. */
export const runRecordSchema = z.object({
  schema: z.literal(RUN_RECORD_SCHEMA),
  runId: z.string().min(1),
  startedAt: z.string().datetime(),
  environment: environmentSchema,
  /** The size asked for (the table's row); `promptTokens` of the legs is what was sent. */
  targetTokens: z.number().int().positive(),
  seed: z.number().int().nonnegative(),
  repeat: z.number().int().nonnegative(),
  /** max_tokens of both legs: an answer that stops at it is not truncated by accident, it is the budget. */
  answerBudget: z.number().int().positive(),
  /** null: the leg was not run. */
  native: nativeLegSchema.nullable(),
  bridged: bridgedLegSchema.nullable(),
  /** Peak resident memory per process, bytes (e.g. decoder, prefill-engine, front, native-decoder). */
  peakMemoryBytes: z.record(z.string(), bytes),
  /** Whether the bridged answer equals the native one; null when a leg is missing. */
  answersAgree: z.boolean().nullable(),
}).strict()

/** One run record. */
export type RunRecord = z.infer<typeof runRecordSchema>
/** Where a run ran. */
export type RunEnvironment = z.infer<typeof environmentSchema>
/** The bridged leg of a run. */
export type BridgedLeg = z.infer<typeof bridgedLegSchema>
/** The native leg of a run. */
export type NativeLeg = z.infer<typeof nativeLegSchema>

/** Check parsed JSON against the schema; the error names the file and the first bad field. */
export function parseRunRecord (json: unknown, file: string): RunRecord {
  return parseRecordJson(runRecordSchema, json, file, 'run record')
}

/** Read every `*.json` record in `dir`, sorted by file name; a missing directory holds none. */
export async function readRunRecords (dir: string): Promise<RunRecord[]> {
  return (await readRecordDir(dir, { plural: 'run records', notJson: 'not JSON' }, parseRunRecord)).map((r) => r.record)
}
