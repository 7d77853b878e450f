// Capture retention: once a bridge's blocks are written and verified, its capture on the prefill
// side has served its purpose. The front door asks the engine to delete it (DELETE
// /v1/prefill/{id}); it never removes files under another process's capture root itself. Only a
// verified capture is ever offered for deletion: a failed bridge's capture stays as the record of
// what went wrong. A delete that fails changes nothing but this outcome (the answer and verdict
// do not depend on it).
import type { FrontConfig } from '../config/index.ts'
import { callJson, errorMessageOf, joinUrl, LinkError } from './http.ts'

/** What became of a verified capture, as `pd_bridge.capture.retention` and the log show it. */
export type Retention = 'deleted' | 'already gone' | `kept: ${string}`

const DELETE_FAILED = 'kept: the delete failed: '

/**
 * True when `retention` is a delete that never reached the engine (refused, reset, no answer): the
 * capture is still to be retired, which the front door does later (FrontState.retireLater).
 */
export function deleteFailed (retention: Retention): boolean {
  return retention.startsWith(DELETE_FAILED)
}

/** Why a verified capture is kept under `retain`, or undefined when it goes. */
export function keepReason (retain: FrontConfig['capture']['retain'], state: 'done' | 'partial'): string | undefined {
  if (retain === 'all') return 'capture.retain is all'
  if (retain === 'failed' && state === 'partial') return 'a partial capture, and capture.retain is failed'
  return undefined
}

/** Options of `retireCapture`. */
export interface RetireOptions {
  prefillUrl: string
  requestId: string
  state: 'done' | 'partial'
  retain: FrontConfig['capture']['retain']
  timeoutMs: number
  headers: Record<string, string>
}

/** Delete a verified capture through the engine, unless `retain` keeps it; never throws. */
export async function retireCapture (o: RetireOptions): Promise<Retention> {
  const keep = keepReason(o.retain, o.state)
  if (keep !== undefined) return `kept: ${keep}`
  try {
    const a = await callJson('prefill engine', joinUrl(o.prefillUrl, `/v1/prefill/${encodeURIComponent(o.requestId)}`), { method: 'DELETE', timeoutMs: o.timeoutMs, headers: o.headers })
    if (a.status === 200 || a.status === 204) return 'deleted'
    // Nothing of it is left on the engine (someone else deleted it): not kept, and not ours either.
    if (a.status === 404) return 'already gone'
    return `kept: the prefill engine refused the delete (${a.status}): ${errorMessageOf(a.body)}`
  } catch (e) {
    return `${DELETE_FAILED}${e instanceof LinkError ? e.problem : String(e)}`
  }
}
