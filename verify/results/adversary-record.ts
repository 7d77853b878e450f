// One run of the adversary protocol (protocols/adversary.mjs, docs/BENCHMARK-PROTOCOL.md,
// "Adversary") as it is written under results/adversary/: where it ran, what it sent, and per case
// what was tried, how many answers were compared with the decoder alone, how many wrong answers were
// served, internal routes reached, absolute paths leaked and bytes left behind; then, after the stack
// was stopped, the processes and bytes still there. The schema holds the counting rule: a case is
// correct only when none of those counts is above 0.
import { z } from 'zod'
import { environmentSchema } from './record.ts'
import { parseRecordJson, readRecordDir } from './record-files.ts'
import { plural } from './table.ts'

/** The record's schema tag; a new layout gets a new tag so old records are never misread. */
export const ADVERSARY_RECORD_SCHEMA = 'pd-bridge/adversary-run@1'

const count = z.int().nonnegative()
const ms = z.number().finite().nonnegative()

/** One case and what the stack did about it. */
export const adversaryCaseSchema = z.strictObject({
  /** Short name (`route-spellings`, `tampered-block`, ...). */
  name: z.string().min(1),
  /** What was tried, in one sentence. */
  tried_what: z.string().min(1),
  /** What a correct outcome is, in one sentence. */
  expected: z.string().min(1),
  /** Requests (or answers scanned) the case sent. */
  tried: count,
  /** Answers compared with the decoder alone's (or with the rule the case states). */
  answers_compared: count,
  /** A 200 whose tokens differ from the decoder alone's: must be 0. */
  wrong_answers_served: count,
  /** Spellings that reached an internal route through a public port: must be 0. */
  internal_routes_reached: count,
  /** Answers to a caller without the key that carried an absolute path of the deployment: must be 0. */
  paths_leaked: count,
  /** Bytes of captures, spool and staged files left after a restart, beyond what retention keeps: must be 0. */
  bytes_left: count,
  /** The counting rule, applied by the protocol and checked here. */
  correct: z.boolean(),
  details: z.record(z.string(), z.unknown()),
}).superRefine((c, ctx) => {
  if (c.correct && (c.wrong_answers_served > 0 || c.internal_routes_reached > 0 || c.paths_leaked > 0 || c.bytes_left > 0)) {
    ctx.addIssue({ code: 'custom', path: ['correct'], message: 'is true, but a wrong answer was served, a route reached, a path leaked or bytes left' })
  }
})

/** One adversary protocol run. */
export const adversaryRecordSchema = z.strictObject({
  schema: z.literal(ADVERSARY_RECORD_SCHEMA),
  runId: z.string().min(1),
  startedAt: z.iso.datetime(),
  finishedAt: z.iso.datetime(),
  environment: environmentSchema,
  settings: z.strictObject({
    promptTokens: z.int().positive(),
    maxTokens: z.int().positive(),
    clients: z.int().positive(),
    requestsPerClient: z.int().positive(),
    spellings: count,
    timeoutMs: ms,
    /** Whether the stack ran with a deployment key (keyed block digests, the key on every port). */
    keyed: z.boolean(),
  }),
  cases: z.array(adversaryCaseSchema).min(1),
  /** After the stack was stopped: its processes still alive, and what it left on disk beyond retention. */
  after_stop: z.strictObject({
    processes_left: count,
    bytes_left: count,
    captures_left: count,
    spool_files: count,
    temp_block_files: count,
  }),
})

export type AdversaryRecord = z.infer<typeof adversaryRecordSchema>
export type AdversaryCase = z.infer<typeof adversaryCaseSchema>

/** Check parsed JSON against the schema; the error names the file and the first bad field. */
export function parseAdversaryRecord (json: unknown, file: string): AdversaryRecord {
  return parseRecordJson(adversaryRecordSchema, json, file, 'adversary record')
}

/** Read every `*.json` record in `dir`, sorted by file name; a missing directory holds none. */
export async function readAdversaryRecords (dir: string): Promise<AdversaryRecord[]> {
  return (await readRecordDir(dir, { plural: 'adversary records', notJson: 'not JSON' }, parseAdversaryRecord)).map((r) => r.record)
}

/** A run's totals over its cases. */
export interface AdversaryTally {
  cases: number
  correct: number
  tried: number
  compared: number
  wrong: number
  reached: number
  leaked: number
  bytesLeft: number
}

export function adversaryTally (r: AdversaryRecord): AdversaryTally {
  const sum = (f: (c: AdversaryCase) => number): number => r.cases.reduce((a, c) => a + f(c), 0)
  return {
    cases: r.cases.length,
    correct: r.cases.filter((c) => c.correct).length,
    tried: sum((c) => c.tried),
    compared: sum((c) => c.answers_compared),
    wrong: sum((c) => c.wrong_answers_served),
    reached: sum((c) => c.internal_routes_reached),
    leaked: sum((c) => c.paths_leaked),
    bytesLeft: sum((c) => c.bytes_left) + r.after_stop.bytes_left,
  }
}

/** The headline of one run: `adversary: 7/7 cases correct, 1,234 tried, 96 answers compared, 0 wrong answers served, ...`. */
export function adversaryHeadline (r: AdversaryRecord): string {
  const t = adversaryTally(r)
  const words = [
    `adversary: ${t.correct}/${t.cases} cases correct`, `${t.tried} requests tried`, `${plural(t.compared, 'answer')} compared`,
    `${plural(t.wrong, 'wrong answer')} served`, `${plural(t.reached, 'internal route')} reached`, `${plural(t.leaked, 'path')} leaked`,
    `${plural(r.after_stop.processes_left, 'process', 'processes')} and ${plural(t.bytesLeft, 'byte')} left`,
  ]
  const wrong = r.cases.filter((c) => !c.correct).map((c) => c.name)
  if (wrong.length > 0) words.push(`not correct: ${wrong.join(', ')}`)
  return words.join(', ')
}
