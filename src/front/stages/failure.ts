// A bridge that did not happen, and what stopped it. Every failure the bridge meets is classified
// by its code (PD_ERR, src/errors.ts), never by its message; the message only goes into the reason,
// which becomes the `declined: <reason>` verdict.
import { errorCode, PD_ERR, PdBridgeError, type PdErrorCode } from '../../errors.ts'
import type { BridgeTimings } from './timings.ts'

/**
 * A bridge that did not happen; `reason` is the verdict's, `stage` where it stopped, `pdCode` what
 * kind of failure it was. `requestId` names the capture the engine accepted, which is then kept
 * (never deleted after a failure).
 */
export class BridgeFailure extends PdBridgeError {
  override name = 'BridgeFailure'
  constructor (readonly reason: string, readonly stage: string, code: PdErrorCode, readonly timings: Partial<BridgeTimings> = {}, readonly requestId?: string) {
    super(`${stage}: ${reason}`, { code })
  }
}

/** A reason and its code, before it is a BridgeFailure of some stage. */
export interface Cause {
  reason: string
  code: PdErrorCode
}

function messageOf (e: unknown): string {
  return e instanceof Error ? e.message : String(e)
}

/**
 * Why the capture stream failed. `abandoned` is why the bridge was stopped (its deadline, the
 * engine watch), which wins over what the stream saw once it was stopped.
 */
export function captureCause (e: unknown, abandoned: Cause | undefined, deadlineMs: number): Cause {
  const code = errorCode(e)
  if (code === PD_ERR.SHARE_ABORTED) return abandoned ?? { reason: 'the bridge deadline passed while the capture streamed', code: PD_ERR.BRIDGE_DEADLINE }
  if (abandoned !== undefined) return abandoned
  const m = messageOf(e)
  switch (code) {
    case PD_ERR.CAPTURE_INTEGRITY: return { reason: `capture checksum mismatch: ${m}`, code }
    case PD_ERR.CAPTURE_MANIFEST: return { reason: `capture manifest mismatch: ${m}`, code }
    case PD_ERR.CAPTURE_FAILED: return { reason: `prefill engine failed the capture: ${m}`, code }
    case PD_ERR.SHARE_STALL: return { reason: `share stalled: ${m}`, code }
    case PD_ERR.SHARE_DEADLINE: return { reason: `timeout: the capture did not arrive within ${deadlineMs} ms (${m})`, code }
    case PD_ERR.SHARE_HTTP: return { reason: `share unreachable or refusing: ${m}`, code }
    default: return { reason: `capture stream failed: ${m}`, code: PD_ERR.CAPTURE_STREAM }
  }
}

/** Why the writer would not open the capture (its manifest, a layer file's bytes, anything else). */
export function openCause (e: unknown): Cause {
  const m = messageOf(e)
  switch (errorCode(e)) {
    case PD_ERR.CAPTURE_MANIFEST: return { reason: `capture manifest mismatch: ${m}`, code: PD_ERR.CAPTURE_MANIFEST }
    case PD_ERR.CAPTURE_INTEGRITY: return { reason: `capture checksum mismatch: ${m}`, code: PD_ERR.CAPTURE_INTEGRITY }
    default: return { reason: `capture rejected by the block writer: ${m}`, code: PD_ERR.WRITER_REJECTED }
  }
}

/** Why a block write (or finalize's verification) failed. */
export function writeCause (e: unknown): Cause {
  return { reason: `block write failed: ${messageOf(e)}`, code: PD_ERR.BLOCK_WRITE }
}
