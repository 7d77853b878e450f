// Stage 4, rescan: make the decoder see the new blocks. A decoder without a rescan still finds
// them on its next miss, so a failed rescan does not fail the bridge; the verdict depends on the
// decoder's cached_tokens, not on this.
import { callJson, errorMessageOf, joinUrl } from '../http.ts'
import type { BridgeRun } from './run.ts'
import { stopwatch, type BridgeTimings } from './timings.ts'

/** Whether the decoder's rescan answered, and its report. */
export interface RescanOutcome {
  ok: boolean
  error?: string
  report?: unknown
}

/** POST /v1/cache/rescan on the decoder; never throws. */
export async function rescanDecoder (run: BridgeRun): Promise<{ rescan: RescanOutcome, timings: Pick<BridgeTimings, 'rescan'> }> {
  const { config, auth } = run
  const time = stopwatch()
  let rescan: RescanOutcome
  try {
    const a = await callJson('decoder', joinUrl(config.decoder.url, '/v1/cache/rescan'), { method: 'POST', timeoutMs: config.deadlines.rescanMs, headers: auth })
    rescan = a.status === 200 ? { ok: true, report: (a.body as { report?: unknown }).report } : { ok: false, error: `rescan answered ${a.status}: ${errorMessageOf(a.body)}` }
  } catch (e) {
    rescan = { ok: false, error: e instanceof Error ? e.message : String(e) }
  }
  return { rescan, timings: { rescan: time.ms() } }
}
