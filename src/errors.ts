// One error family for the whole bridge: a user-facing message that names the thing at fault.

/**
 * Stable codes for the failures a caller branches on, in the manner of undici's `UND_ERR_*`: test
 * `errorCode(e)`, never the message text (messages are for people and may be reworded).
 */
export const PD_ERR = {
  /** A capture file's bytes are not what its manifest lists (size or SHA-256), on disk or over the share. */
  CAPTURE_INTEGRITY: 'PD_ERR_CAPTURE_INTEGRITY',
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
