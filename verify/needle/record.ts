// One needle run as the protocol writes it under results/needle/runs/: where it ran, the document
// (seed, sizes, needles and their positions), the ledger's word on it, and both legs' answers with
// their scores. The schema also holds the scoring rule: a bridged pass needs a complete verdict.
import { z } from 'zod'
import { environmentSchema } from '../results/record.ts'
import { parseRecordJson, readRecordDir } from '../results/record-files.ts'

/** The record's schema tag; a new layout gets a new tag so old records are never misread. */
export const NEEDLE_RECORD_SCHEMA = 'pd-bridge/needle-run@1'

const count = z.int().nonnegative()
const ms = z.number().nonnegative()
const hex64 = z.string().regex(/^[0-9a-f]{64}$/, 'must be 64 lowercase hex digits')
const depth = z.number().min(0).max(1)

const bridgedSchema = z.strictObject({
  /** The verdict as sent (pd_bridge.verdict, else the X-PD-Bridge header, else `declined`). */
  verdict: z.string().min(1),
  verdictKind: z.enum(['complete', 'partial', 'declined']),
  /** pd_bridge.route (`bridge`, `native`), `unknown` without one. */
  route: z.string(),
  bridgedTokens: count,
  promptTokens: count.nullable(),
  completionTokens: count.nullable(),
  finishReason: z.string(),
  answer: z.string(),
  hit: z.boolean(),
  outcome: z.enum(['pass', 'miss', 'not-bridged']),
  totalMs: ms,
  ttftMs: ms.nullable(),
}).superRefine((b, ctx) => {
  const want = b.verdictKind !== 'complete' ? 'not-bridged' : b.hit ? 'pass' : 'miss'
  if (b.outcome !== want) ctx.addIssue({ code: 'custom', path: ['outcome'], message: `is ${b.outcome}, but verdict ${b.verdictKind} with hit ${String(b.hit)} scores ${want}` })
  if (b.verdictKind === 'complete' && b.verdict !== 'complete') ctx.addIssue({ code: 'custom', path: ['verdictKind'], message: `is complete, but the verdict is ${JSON.stringify(b.verdict)}` })
})

const nativeSchema = z.strictObject({
  promptTokens: count.nullable(),
  completionTokens: count.nullable(),
  finishReason: z.string(),
  answer: z.string(),
  hit: z.boolean(),
  outcome: z.enum(['pass', 'miss']),
  totalMs: ms,
  ttftMs: ms.nullable(),
}).superRefine((n, ctx) => {
  if (n.outcome !== (n.hit ? 'pass' : 'miss')) ctx.addIssue({ code: 'custom', path: ['outcome'], message: `is ${n.outcome}, but hit is ${String(n.hit)}` })
})

/** One needle run record. */
export const needleRecordSchema = z.strictObject({
  schema: z.literal(NEEDLE_RECORD_SCHEMA),
  runId: z.string().min(1),
  startedAt: z.iso.datetime(),
  environment: environmentSchema,
  /** The invocation's seed (--seed or fresh); `seed` was derived from it. */
  invocationSeed: count,
  seed: count,
  repeat: count,
  /** The grid cell: the length asked for and the asked needle's depth. */
  targetTokens: z.int().positive(),
  depth,
  document: z.strictObject({
    /** Prompt tokens as the protocol measured (exact) or estimated (approximate) them. */
    promptTokens: count,
    positions: z.enum(['exact', 'approximate']),
    charsPerToken: z.number().positive().nullable(),
    minDistance: z.int().positive(),
    questionPosition: count,
  }),
  needles: z.array(z.strictObject({
    key: count,
    marker: z.string().min(1),
    value: z.string().min(1),
    depth,
    position: count,
    distance: count,
  })).min(1),
  asked: z.strictObject({ key: count, question: z.string().min(1) }),
  /** The word a hit must hold. */
  expected: z.string().min(1),
  answerBudget: z.strictObject({
    maxTokens: z.int().positive(),
    /** True when the user insisted on a budget below the minimum. */
    belowMinimum: z.boolean(),
  }),
  geometry: z.strictObject({
    /** The ledger key (verify/needle/geometry.ts). */
    fingerprint: hex64,
    source: z.enum(['front-door', 'decoder', 'flag']),
    store: hex64.nullable(),
    sidecar: hex64.nullable(),
    label: z.string().nullable(),
    blockSize: z.int().positive(),
  }),
  ledger: z.strictObject({
    file: z.string().min(1),
    /** What the ledger hashed: token ids (exact) or the user content's UTF-8 bytes (approximate). */
    unit: z.enum(['tokens', 'bytes']),
    outcome: z.enum(['fresh', 'reused-same-geometry', 'reused-seed']),
    reuses: z.array(z.strictObject({ label: z.string(), geometry: hex64, sharedBlocks: z.int().positive(), sameGeometry: z.boolean() })),
    /** Whether the document was added to the ledger after the run. */
    recorded: z.boolean(),
  }),
  /** Why the run was not run (a reused seed), or null. */
  refused: z.string().min(1).nullable(),
  /** null: not run. */
  bridged: bridgedSchema.nullable(),
  native: nativeSchema.nullable(),
}).superRefine((r, ctx) => {
  if (r.refused !== null && (r.bridged !== null || r.native !== null)) ctx.addIssue({ code: 'custom', path: ['refused'], message: 'a refused run has no legs' })
  if (r.ledger.outcome === 'reused-seed' && r.refused === null) ctx.addIssue({ code: 'custom', path: ['refused'], message: 'a reused seed must be refused, never run as a scored pass' })
  if (!r.needles.some((n) => n.key === r.asked.key) && r.expected !== 'unknown') ctx.addIssue({ code: 'custom', path: ['expected'], message: 'the asked key has no needle, so the expected answer is unknown' })
})

/** One needle run record. */
export type NeedleRunRecord = z.infer<typeof needleRecordSchema>
/** The bridged leg of a needle run. */
export type NeedleBridgedLeg = z.infer<typeof bridgedSchema>
/** The native leg of a needle run. */
export type NeedleNativeLeg = z.infer<typeof nativeSchema>

/**
 * Whether the asked needle's value lies inside the blocks the bridge wrote (position < bridged
 * tokens): only then did the bridge, not the decoder, compute the cache entries that carry it.
 * null when the bridged leg did not run.
 */
export function askedNeedleBridged (record: NeedleRunRecord): boolean | null {
  if (record.bridged === null) return null
  const asked = record.needles.find((n) => n.key === record.asked.key)
  return asked !== undefined && asked.position < record.bridged.bridgedTokens
}

/** Check parsed JSON against the schema; the error names the file and the first bad field. */
export function parseNeedleRecord (json: unknown, file: string): NeedleRunRecord {
  return parseRecordJson(needleRecordSchema, json, file, 'needle record')
}

/** Read every `*.json` record in `dir`, sorted by file name; a missing directory holds none. */
export async function readNeedleRecords (dir: string): Promise<NeedleRunRecord[]> {
  return (await readRecordDir(dir, { plural: 'needle records', notJson: 'not a readable JSON needle record' }, parseNeedleRecord)).map((r) => r.record)
}
