// A decoder-alone leg that ran on its own (cold-bench --alone-only), waiting for its bridged leg.
// Where a lender ends every process when a call ends and the decoder alone needs most of a call
// (64K tokens on the H200 machine's CPU), the two legs of one pair run in two invocations on one
// machine: the alone leg first, written here, then cold-bench --pair-apart runs the bridged leg on
// the same prompt and writes one run record with both. Pairing refuses a leg from another
// environment, another prompt or another answer budget: the ratio stays a ratio of one machine.
import { createHash } from 'node:crypto'
import { z } from 'zod'
import { PdBridgeError } from '../../src/errors.ts'
import { parseRecordJson, readRecordDir } from './record-files.ts'
import { nativeLegSchema, RUN_RECORD_SCHEMA, runRecordSchema, type BridgedLeg, type NativeLeg, type RunEnvironment, type RunRecord } from './record.ts'

/** The leg file's schema tag. */
export const APART_LEG_SCHEMA = 'pd-bridge/alone-leg@1'

// The run record's fields that the leg already knows, as the run record has them.
const apartLegSchema = runRecordSchema.pick({ startedAt: true, environment: true, targetTokens: true, seed: true, repeat: true, answerBudget: true, peakMemoryBytes: true }).extend({
  schema: z.literal(APART_LEG_SCHEMA),
  /** SHA-256 of the prompt's token ids (promptDigest): the bridged leg must send the same prompt. */
  promptSha256: z.string().regex(/^[0-9a-f]{64}$/),
  native: nativeLegSchema,
}).strict()

/** One decoder-alone leg waiting for its bridged leg. */
export type ApartLeg = z.infer<typeof apartLegSchema>

/** SHA-256 (hex) of a prompt's token ids: equal digests, equal prompts. */
export function promptDigest (tokens: ArrayLike<number>): string {
  return createHash('sha256').update(Array.from(tokens).join(','), 'utf8').digest('hex')
}

/** Check parsed JSON against the leg file's schema; the error names the file and the first bad field. */
export function parseApartLeg (json: unknown, file: string): ApartLeg {
  return parseRecordJson(apartLegSchema, json, file, 'decoder-alone leg')
}

/** Every leg file in `dir` (`*.json`, sorted by name), with its path; a missing directory holds none. */
export async function readApartLegs (dir: string): Promise<Array<{ file: string, record: ApartLeg }>> {
  return await readRecordDir(dir, { plural: 'decoder-alone legs', notJson: 'not JSON' }, parseApartLeg)
}

/** The run id both the leg and its record carry: when the pair started, its size, repeat and seed. */
export function runIdOf (startedAt: string, targetTokens: number, repeat: number, seed: number): string {
  return `${startedAt.replace(/[:.]/g, '-')}-${targetTokens}-r${repeat}-${seed}`
}

/** What the bridged invocation knows of its own leg. */
export interface BridgedHalf {
  environment: RunEnvironment
  promptSha256: string
  answerBudget: number
  bridged: BridgedLeg
  peakMemoryBytes: Record<string, number>
}

/**
 * The run record of `leg` and the bridged leg run later on the same prompt. Refused (PdBridgeError)
 * when the environments' ids or commits, the prompts or the answer budgets differ. The record starts when the
 * alone leg started; its native leg says when it ran (`apart`); peak memory is the larger of the two
 * invocations' per process.
 */
export function pairApartLeg (leg: ApartLeg, half: BridgedHalf): RunRecord {
  const id = runIdOf(leg.startedAt, leg.targetTokens, leg.repeat, leg.seed)
  if (half.environment.id !== leg.environment.id) {
    throw new PdBridgeError(`decoder-alone leg ${id}: it ran in environment ${leg.environment.id}, this bridged leg in ${half.environment.id}; a pair must come from one environment`)
  }
  if (half.environment.commit !== leg.environment.commit) {
    throw new PdBridgeError(`decoder-alone leg ${id}: it ran at commit ${leg.environment.commit}, this bridged leg at ${half.environment.commit}; a pair must come from one commit`)
  }
  if (half.promptSha256 !== leg.promptSha256) {
    throw new PdBridgeError(`decoder-alone leg ${id}: the bridged leg's prompt (sha256 ${half.promptSha256.slice(0, 12)}) is not the alone leg's (${leg.promptSha256.slice(0, 12)})`)
  }
  if (half.answerBudget !== leg.answerBudget) {
    throw new PdBridgeError(`decoder-alone leg ${id}: answer budget ${leg.answerBudget}, but the bridged leg's is ${half.answerBudget}`)
  }
  const peaks: Record<string, number> = { ...leg.peakMemoryBytes }
  for (const [name, b] of Object.entries(half.peakMemoryBytes)) peaks[name] = Math.max(peaks[name] ?? 0, b)
  const native: NativeLeg = { ...leg.native, apart: { startedAt: leg.startedAt } }
  const b = half.bridged
  const agree = native.answerSha256 !== undefined && b.answerSha256 !== undefined
    ? native.answerSha256 === b.answerSha256 && native.finishReason === b.finishReason && native.completionTokens === b.completionTokens
    : null
  return {
    schema: RUN_RECORD_SCHEMA,
    runId: id,
    startedAt: leg.startedAt,
    environment: half.environment,
    targetTokens: leg.targetTokens,
    seed: leg.seed,
    repeat: leg.repeat,
    answerBudget: leg.answerBudget,
    native,
    bridged: b,
    peakMemoryBytes: Object.fromEntries(Object.entries(peaks).sort(([x], [y]) => x.localeCompare(y))),
    answersAgree: agree,
  }
}
