// One run of the two-host protocol (protocols/two-hosts.mjs, docs/two-hosts.md) as it is written
// under results/two-host/: the prefill side and the decode side in two network namespaces joined by
// one shaped veth link. The record names the link (rate, delay, loss, what tc really applied, that
// it ran across namespaces, a bulk TCP probe of what the link carried on this machine), then per
// cold prompt what crossed it and how long that took against bytes / rate, and per link fault what
// the client got (the fault protocol's own result shape and counting rule).
import { z } from 'zod'
import { faultResultSchema } from './fault-record.ts'
import { environmentSchema } from './record.ts'
import { parseRecordJson, readRecordDir } from './record-files.ts'

/** The record's schema tag; a new layout gets a new tag so old records are never misread. */
export const TWO_HOST_RECORD_SCHEMA = 'pd-bridge/two-host-run@1'

const count = z.int().nonnegative()
const ms = z.number().finite().nonnegative()

/** The link between the two hosts, as asked for and as applied. */
export const linkSchema = z.strictObject({
  /** Always `network namespaces`: the two halves had their own network stacks, joined by a veth pair. */
  across: z.literal('network namespaces'),
  profile: z.string().min(1),
  rateBitsPerSecond: z.number().positive(),
  /** What the profile asked netem to add; `netem` says whether it was applied. */
  delayMs: z.number().nonnegative(),
  lossPercent: z.number().nonnegative(),
  netem: z.boolean(),
  /** Why netem's delay and loss are not on the link (the kernel has no sch_netem), or null. */
  netemMissing: z.string().nullable(),
  /** `tc qdisc show` of both ends. */
  qdiscs: z.array(z.string()),
  /** A bulk TCP transfer across the link (one connection, prefill host to decode host): what the link carries on this machine, CPU included. */
  probe: z.strictObject({ bytes: count, ms, bitsPerSecond: z.number().nonnegative() }),
})

/** One cold prompt bridged across the link, and the decoder alone's answer to it. */
export const twoHostRunSchema = z.strictObject({
  targetTokens: z.int().positive(),
  promptTokens: z.int().positive(),
  seed: count,
  /** The front door's verdict as sent. */
  verdict: z.string(),
  bridgedTokens: count,
  /** Token ids and finish reason equal to the decoder alone's. */
  answersAgree: z.boolean(),
  /** End to end through the front door; the decoder alone on the same prompt. */
  bridgedMs: ms,
  nativeMs: ms,
  /** pd_bridge.bytes: the capture's payload, bytes fetched from the share, block file bytes. */
  captureBytes: count,
  fetchedBytes: count,
  blockBytes: count,
  /** What the prefill host's end of the veth sent during the bridge (tc's counter): payload plus HTTP, TCP and IP. */
  wireBytes: count,
  /** The share client's download time (pd_bridge.timings_ms.transfer) and fetched bytes / link rate. */
  transferMs: ms,
  idealTransferMs: ms,
  /** The front door's stage timings, as sent (timings_ms). */
  stagesMs: z.record(z.string(), ms),
})

/** One two-host protocol run over one link profile. */
export const twoHostRecordSchema = z.strictObject({
  schema: z.literal(TWO_HOST_RECORD_SCHEMA),
  runId: z.string().min(1),
  startedAt: z.iso.datetime(),
  finishedAt: z.iso.datetime(),
  environment: environmentSchema,
  link: linkSchema,
  settings: z.strictObject({
    preset: z.string().min(1),
    blockSize: z.int().positive(),
    maxTokens: z.int().positive(),
    stallMs: ms,
    faultPromptTokens: z.int().positive(),
    /** The load average when the run started: the machine is shared, and the record says how busy it was. */
    loadAverage: z.array(z.number().nonnegative()),
  }),
  runs: z.array(twoHostRunSchema),
  faults: z.array(faultResultSchema),
}).refine((r) => r.runs.length + r.faults.length > 0, { message: 'a run with neither cold prompts nor faults' })

/** One two-host protocol run. */
export type TwoHostRecord = z.infer<typeof twoHostRecordSchema>
/** One cold prompt of a run. */
export type TwoHostRun = z.infer<typeof twoHostRunSchema>

/** Check parsed JSON against the schema; the error names the file and the first bad field. */
export function parseTwoHostRecord (json: unknown, file: string): TwoHostRecord {
  return parseRecordJson(twoHostRecordSchema, json, file, 'two-host record')
}

/** Read every `*.json` record in `dir`, sorted by file name; a missing directory holds none. */
export async function readTwoHostRecords (dir: string): Promise<TwoHostRecord[]> {
  return (await readRecordDir(dir, { plural: 'two-host records', notJson: 'not JSON' }, parseTwoHostRecord)).map((r) => r.record)
}
