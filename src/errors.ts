// One error family for the whole bridge: a user-facing message that names the thing at fault.

/**
 * Stable codes for the failures a caller branches on, in the manner of undici's `UND_ERR_*`: test
 * `errorCode(e)`, never the message text (messages are for people and may be reworded).
 */
export const PD_ERR = {
  // The capture, wherever it is read (the writer's open, the share client).
  /** A capture file's bytes are not what its manifest lists (size or SHA-256), on disk or over the share. */
  CAPTURE_INTEGRITY: 'PD_ERR_CAPTURE_INTEGRITY',
  /** A manifest that is invalid or not the request's (id, T, fingerprint, token digest). */
  CAPTURE_MANIFEST: 'PD_ERR_CAPTURE_MANIFEST',
  /** The capture's manifest says the prefill side failed it. */
  CAPTURE_FAILED: 'PD_ERR_CAPTURE_FAILED',
  // The share client.
  /** The share refused, or transient failures passed the retry bound. */
  SHARE_HTTP: 'PD_ERR_SHARE_HTTP',
  /** The capture was not complete on the share before the stream's deadline. */
  SHARE_DEADLINE: 'PD_ERR_SHARE_DEADLINE',
  /** Nothing came from the share for the stall deadline. */
  SHARE_STALL: 'PD_ERR_SHARE_STALL',
  /** The caller's signal stopped the stream. */
  SHARE_ABORTED: 'PD_ERR_SHARE_ABORTED',
  // A call to a link (decoder, prefill engine, share) from the front door.
  /** No answer within the call's deadline: the link may be there and busy. */
  LINK_NO_ANSWER: 'PD_ERR_LINK_NO_ANSWER',
  /** The caller's signal stopped the call. */
  LINK_ABORTED: 'PD_ERR_LINK_ABORTED',
  /** Refused, reset, a name that does not resolve, or another transport failure. */
  LINK_FAILED: 'PD_ERR_LINK_FAILED',
  // The bridge queue.
  /** No room behind the running bridge. */
  QUEUE_FULL: 'PD_ERR_QUEUE_FULL',
  /** A waiter left (its deadline, or its client) before its turn. */
  QUEUE_LEFT: 'PD_ERR_QUEUE_LEFT',
  // A bridge that did not happen (BridgeFailure), by what stopped it.
  /** The prefill engine is there but busy: its queue is full, or no answer to the submit. */
  ENGINE_BUSY: 'PD_ERR_ENGINE_BUSY',
  /** The prefill engine cannot be reached (at the submit, or its status polls failed). */
  ENGINE_UNREACHABLE: 'PD_ERR_ENGINE_UNREACHABLE',
  /** The prefill engine answered the submit with a refusal (not 202, not 429). */
  ENGINE_REFUSED: 'PD_ERR_ENGINE_REFUSED',
  /** The prefill engine failed the request, or no longer knows it. */
  ENGINE_FAILED: 'PD_ERR_ENGINE_FAILED',
  /** The prefill engine's status of the request stopped changing for the stall deadline. */
  ENGINE_STALL: 'PD_ERR_ENGINE_STALL',
  /** A bridge deadline passed (capture, write, the whole bridge). */
  BRIDGE_DEADLINE: 'PD_ERR_BRIDGE_DEADLINE',
  /** The bridge was abandoned without a reason of its own. */
  BRIDGE_ABANDONED: 'PD_ERR_BRIDGE_ABANDONED',
  /** The capture stream failed otherwise (the spool, an unexpected error). */
  CAPTURE_STREAM: 'PD_ERR_CAPTURE_STREAM',
  /** The block writer refused to open the capture for another reason (a layer file's metadata, the sidecar). */
  WRITER_REJECTED: 'PD_ERR_WRITER_REJECTED',
  /** A block write or its verification failed. */
  BLOCK_WRITE: 'PD_ERR_BLOCK_WRITE',
  /** The capture was sealed below one block (memory budget): nothing to write. */
  CAPTURE_SHORT: 'PD_ERR_CAPTURE_SHORT',
} as const

export type PdErrorCode = typeof PD_ERR[keyof typeof PD_ERR]

/** Base class of every error pd-bridge raises on purpose. */
export class PdBridgeError extends Error {
  override name = 'PdBridgeError'
  /** Set where a caller may need to tell this failure from others (PD_ERR). Not `code`: the OpenAI
   * error shape (src/http/openai-error.ts) already has a `code` of its own. */
  readonly pdCode?: PdErrorCode

  constructor (message?: string, options?: { code?: PdErrorCode, cause?: unknown }) {
    super(message, options?.cause === undefined ? undefined : { cause: options.cause })
    if (options?.code !== undefined) this.pdCode = options.code
  }
}

/** The PD_ERR code of `e`, if it has one. */
export function errorCode (e: unknown): PdErrorCode | undefined {
  return e instanceof PdBridgeError ? e.pdCode : undefined
}

/** A capture layer file whose size or SHA-256 is not what the capture's manifest lists. */
export class CaptureIntegrityError extends PdBridgeError {
  override name = 'CaptureIntegrityError'
  constructor (readonly file: string, readonly problem: string) {
    super(`${file}: ${problem}`, { code: PD_ERR.CAPTURE_INTEGRITY })
  }
}

/** A safetensors file (or shard index) that breaks the format rules. */
export class SafetensorsError extends PdBridgeError {
  override name = 'SafetensorsError'
  constructor (readonly file: string, readonly problem: string) {
    super(`${file}: ${problem}`)
  }
}

/** A config.json (or other settings file) with a missing, mistyped or inconsistent field. */
export class ConfigError extends PdBridgeError {
  override name = 'ConfigError'
  constructor (readonly field: string, readonly problem: string, readonly file?: string) {
    super(`${file ? file + ': ' : ''}${field}: ${problem}`)
  }
}

/** A checkpoint whose tensors do not match what its config implies. */
export class CheckpointError extends PdBridgeError {
  override name = 'CheckpointError'
  constructor (readonly tensor: string, readonly problem: string, readonly dir?: string) {
    super(`${dir ? dir + ': ' : ''}tensor ${tensor}: ${problem}`)
  }
}

/** A value that a number format cannot hold, or a packed buffer of the wrong size. */
/** A block, block directory or payload that breaks the block store's rules (every message names the block or file, then the problem). */
export class BlockStoreError extends PdBridgeError {
  override name = 'BlockStoreError'
  constructor (readonly block: string, readonly problem: string) {
    super(`${block}: ${problem}`)
  }
}

export class NumericsError extends PdBridgeError {
  override name = 'NumericsError'
}
