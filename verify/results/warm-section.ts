// One environment's warm-extend protocol runs for the report, as plain data so RESULTS.md and
// report.html say the same thing: the headline ("warm-extended: N runs, M bit-exact against the
// decoder alone") and one table with a row per run: the prompts, where the warm leg resumed, its
// verdict and times next to a bridge from token 0 and the decoder alone, and the proof (blocks
// identical, answers equal).
import { seconds, plural, groupDigits, NOT_RUN, type Table } from './table.ts'
import { warmBitExact, type WarmRecord } from './warm-record.ts'

/** One environment's warm-extend runs, in start order. */
export interface WarmSummary {
  runs: WarmRecord[]
}

/** The environment's warm-extend runs sorted by startedAt then runId (null when there are none). */
export function summarizeWarm (records: readonly WarmRecord[]): WarmSummary | null {
  if (records.length === 0) return null
  return { runs: [...records].sort((a, b) => a.startedAt.localeCompare(b.startedAt) || a.runId.localeCompare(b.runId)) }
}

/** The section's headline: `warm-extended: 3 runs, 3 bit-exact against the decoder alone`. */
export function warmHeadline (summary: WarmSummary): string {
  const exact = summary.runs.filter(warmBitExact).length
  return `warm-extended: ${plural(summary.runs.length, 'run')}, ${exact} bit-exact against the decoder alone`
}

/** One row per run: the prompts, the warm leg against a bridge from token 0 and the decoder alone, and the proof. */
export function warmTable (summary: WarmSummary): Table {
  return {
    title: 'Warm-extended prompts: bridged from the last stored boundary',
    headers: ['run', 'prompt A', 'prompt B', 'resumed from', 'bridged', 'verdict', 'warm end to end', 'warm engine prefill', 'carry',
      'from 0 end to end', 'from 0 engine prefill', 'decoder alone', 'blocks identical', 'answers'],
    rows: summary.runs.map((r) => [
      r.runId, groupDigits(r.prefixTokens), groupDigits(r.promptTokens),
      r.warm.resumedFrom === null ? NOT_RUN : groupDigits(r.warm.resumedFrom), groupDigits(r.warm.bridgedTokens), r.warm.verdict,
      seconds(r.warm.totalMs), seconds(r.warm.stagesMs.enginePrefill), seconds(r.warm.stagesMs.carry),
      seconds(r.cold.totalMs), seconds(r.cold.stagesMs.enginePrefill), seconds(r.native.totalMs),
      `${r.blocks.identical}/${r.blocks.keys}`, r.answersAgree ? 'equal' : 'differ',
    ]),
  }
}

/** The section's tables in report order. */
export function warmTables (summary: WarmSummary): Table[] {
  return [warmTable(summary)]
}

/** The rule under the report's counting rules. */
export const WARM_RULE = 'Warm-extended prompts (protocols/warm-extend.mjs, docs/warm-extend.md): prompt A is bridged cold, which puts its blocks into the store; prompt B = A + a tail is then bridged warm, the prefill engine continuing from the decoder\'s cache at the last stored boundary P ("resumed from") and prefilling only the tail ("bridged" tokens past P, "carry" the time to restore, encode and send the cache at P). "From 0" is a prompt of B\'s length from another seed, bridged with nothing stored: the cost of the alternative. The decoder alone has A\'s blocks in its own store and prefills B\'s tail natively. B\'s chain of blocks is compared tensor by tensor with the decoder alone\'s, and the answers compared; a run is bit-exact when its warm verdict is complete and resumed, every block is identical and the answers are equal.'
