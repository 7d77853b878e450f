// Errors of the capture share's client. Each names the request or file at fault and what went wrong.
import { PD_ERR, PdBridgeError } from '../errors.ts'

/** A layer file whose bytes (size or SHA-256) differ from its manifest entry; it is never delivered. */
export class ChecksumError extends PdBridgeError {
  override name = 'ChecksumError'
  constructor (readonly file: string, readonly problem: string) {
    super(`${file}: ${problem}`, { code: PD_ERR.CAPTURE_INTEGRITY })
  }
}

/** An HTTP answer the client cannot go on from (a refusal, or transient failures past the retry bound). */
export class ShareHttpError extends PdBridgeError {
  override name = 'ShareHttpError'
  constructor (readonly url: string, readonly status: number | undefined, readonly problem: string) {
    super(`${url}: ${status === undefined ? '' : `HTTP ${status}: `}${problem}`, { code: PD_ERR.SHARE_HTTP })
  }
}

/** The capture did not reach done or partial, with every layer delivered, before the deadline. */
export class ShareDeadlineError extends PdBridgeError {
  override name = 'ShareDeadlineError'
  constructor (readonly requestId: string, readonly deadlineMs: number, readonly progress: string) {
    super(`capture ${requestId}: deadline of ${deadlineMs} ms passed (${progress})`, { code: PD_ERR.SHARE_DEADLINE })
  }
}

/** Nothing came from the share (no answer, no body bytes) for `stallMs`: a stopped or wedged share. */
export class ShareStallError extends PdBridgeError {
  override name = 'ShareStallError'
  constructor (readonly requestId: string, readonly stallMs: number, readonly progress: string) {
    super(`capture ${requestId}: nothing from the share for ${stallMs} ms (${progress})`, { code: PD_ERR.SHARE_STALL })
  }
}

/** The capture's manifest says it failed; the recorded error is carried along. */
export class CaptureFailedError extends PdBridgeError {
  override name = 'CaptureFailedError'
  constructor (readonly requestId: string, readonly recordedError: string) {
    super(`capture ${requestId} failed on the prefill side: ${recordedError}`, { code: PD_ERR.CAPTURE_FAILED })
  }
}

/** The caller's AbortSignal stopped the stream. */
export class ShareAbortedError extends PdBridgeError {
  override name = 'ShareAbortedError'
  constructor (readonly requestId: string, readonly progress: string) {
    super(`capture ${requestId}: stream aborted by the caller (${progress})`, { code: PD_ERR.SHARE_ABORTED })
  }
}
