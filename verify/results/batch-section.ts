// The batched-decode runs for the report (RESULTS.md and report.html say the same thing): one row
// per run of protocols/batch-decode.mjs, which stamps no environment id (the decoder alone, not
// the stack), so the section stands on its own after the environments.
import type { BatchRecord } from './batch-record.ts'
import { NOT_RUN, type Table } from './table.ts'

export const BATCH_HEADING = 'Batched decode (the embedded decoder alone)'

/** One row per run, oldest first. */
export function batchTable (records: readonly BatchRecord[]): Table {
  const mib = (b: number): string => `${(b / 2 ** 20).toFixed(0)}`
  return {
    title: 'Batched decode runs',
    headers: ['run', 'model', 'machine', 'prompt / answer tokens', 'clients', 'decode tok/s', 'widest vs 1', 'mean batch at widest', 'decoder peak RSS, MiB', 'load avg', 'differ from solo'],
    rows: records.map((r) => {
      const widest = r.levels[r.levels.length - 1]
      const speedup = r.speedup_vs_one?.[String(widest.clients)] ?? null
      return [
        r.at, r.model, `${r.machine.cpu}, ${r.machine.cpus} CPUs`, `${r.settings.prompt_tokens} / ${r.settings.max_tokens}`, r.levels.map((l) => l.clients).join(' / '),
        r.levels.map((l) => (l.decode_tokens_per_s === null ? NOT_RUN : l.decode_tokens_per_s.toFixed(1))).join(' / '),
        speedup === null ? NOT_RUN : `${speedup.toFixed(2)}x`, widest.batch.mean_rows === null ? NOT_RUN : widest.batch.mean_rows.toFixed(2),
        r.levels.map((l) => mib(l.decoder_peak_rss)).join(' / '), r.levels.map((l) => l.load_average_1m.toFixed(1)).join(' / '), String(r.answers_differing_from_solo),
      ]
    }),
  }
}

/** The paragraph above the table. */
export function batchIntro (records: readonly BatchRecord[]): string {
  const differ = records.reduce((a, r) => a + r.answers_differing_from_solo, 0)
  return `${records.length} run${records.length === 1 ? '' : 's'} of protocols/batch-decode.mjs (docs/BENCHMARK-PROTOCOL.md, "Batched decode"): the decoder alone, distinct short prompts streamed at once per level, greedy, ignore_eos; ${differ} answer${differ === 1 ? '' : 's'} differ from their solo runs. Decode tok/s is the tokens after each first one over the decode phase by the decoder's own clock; "widest vs 1" divides the widest level's by the 1-client level's. Labels: ${records.map((r) => `${r.model}: ${r.label === '' ? '(none)' : r.label}`).join('; ')}.`
}
