// One error family for the whole bridge: a user-facing message that names the thing at fault.

/** Base class of every error pd-bridge raises on purpose. */
export class PdBridgeError extends Error {
  override name = 'PdBridgeError'
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
