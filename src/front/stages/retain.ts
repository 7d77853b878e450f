// Stage 5, retention: every block is written and verified (finalize re-read them), so the capture
// has served its purpose; the engine deletes it unless capture.retain keeps it (retention.ts).
import { retireCapture, type Retention } from '../retention.ts'
import type { BridgeRun } from './run.ts'
import { stopwatch, type BridgeTimings } from './timings.ts'

/** Retire the verified capture of a `state` bridge; never throws. */
export async function retainStage (run: BridgeRun, state: 'done' | 'partial'): Promise<{ retention: Retention, timings: Pick<BridgeTimings, 'capture_delete'> }> {
  const { config, auth } = run
  const time = stopwatch()
  const retention = await retireCapture({ prefillUrl: config.prefill.url as string, requestId: run.requestId, state, retain: config.capture.retain, timeoutMs: config.deadlines.deleteMs, headers: auth })
  return { retention, timings: { capture_delete: time.ms() } }
}
