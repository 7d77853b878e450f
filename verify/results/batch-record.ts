// One run of the batched-decode protocol (protocols/batch-decode.mjs, docs/BENCHMARK-PROTOCOL.md,
// "Batched decode") as it writes it under results/batch/: the embedded decoder alone, 1, 2, 4, 8
// concurrent streamed clients, per level throughput, latency, the batch the decoder ran, its peak
// RSS and the answers that differ from their solo runs. The protocol writes plain JSON (snake_case,
// no environment stamp); this schema reads it as it is so the report can show it.
import { z } from 'zod'
import { parseRecordJson, readRecordDir } from './record-files.ts'

const count = z.int().nonnegative()
const num = z.number().finite().nonnegative()
const p50p99 = z.strictObject({ p50: num.nullable(), p99: num.nullable() })

export const batchLevelSchema = z.strictObject({
  clients: z.int().positive(),
  requests: count,
  completion_tokens: count,
  wall_s: num,
  tokens_per_s: num,
  decode_tokens_per_s: num.nullable(),
  ttft_ms: p50p99,
  decoder_prefill_ms: p50p99,
  e2e_ms: p50p99,
  batch: z.strictObject({ steps: count, mean_rows: num.nullable(), widest_so_far: count }),
  decoder_peak_rss: count,
  load_average_1m: num,
  answers_differing_from_solo: count,
})

export const batchRecordSchema = z.strictObject({
  kind: z.literal('batch-decode'),
  version: z.literal(1),
  at: z.iso.datetime(),
  label: z.string(),
  model: z.string().min(1),
  config: z.strictObject({ hidden_size: z.int().positive(), num_hidden_layers: z.int().positive(), vocab_size: z.int().positive(), n_routed_experts: z.int().nonnegative() }),
  machine: z.strictObject({ cpus: z.int().positive(), cpu: z.string(), total_memory: count, node: z.string() }),
  settings: z.strictObject({ levels: z.array(z.int().positive()).min(1), max_tokens: z.int().positive(), prompt_tokens: z.int().positive(), max_batch: z.int().positive(), seed: z.int(), profile: z.string() }),
  decoder_rss_at_ready: count,
  levels: z.array(batchLevelSchema).min(1),
  speedup_vs_one: z.record(z.string(), num.nullable()).nullable(),
  answers_differing_from_solo: count,
  decoder_peak_rss_hwm: count,
}).superRefine((r, ctx) => {
  const sum = r.levels.reduce((a, l) => a + l.answers_differing_from_solo, 0)
  if (sum !== r.answers_differing_from_solo) ctx.addIssue({ code: 'custom', path: ['answers_differing_from_solo'], message: `is ${r.answers_differing_from_solo}, but the levels sum to ${sum}` })
})

export type BatchRecord = z.infer<typeof batchRecordSchema>

export function parseBatchRecord (json: unknown, file: string): BatchRecord {
  return parseRecordJson(batchRecordSchema, json, file, 'batch-decode record')
}

/** Every `*.json` record in `dir`, in start order; a missing directory holds none. */
export async function readBatchRecords (dir: string): Promise<BatchRecord[]> {
  // protocols/batch-step.ts writes its records into the same folder; the report does not read those.
  const parse = (json: unknown, file: string): BatchRecord | undefined => (json as { kind?: unknown } | null)?.kind === 'batch-step' ? undefined : parseBatchRecord(json, file)
  const records = (await readRecordDir(dir, { plural: 'batch-decode records', notJson: 'not JSON' }, parse)).flatMap((r) => r.record === undefined ? [] : [r.record])
  return records.sort((a, b) => a.at.localeCompare(b.at))
}
