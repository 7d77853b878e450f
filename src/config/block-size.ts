// The decoder's tokens per block: the one rule every entry point uses (the decoder's prefix cache,
// the block writer, the embedded stack, the CLI flags, the front door's config, export-weights).
// The capture side records it in the sidecar; the store keys blocks by it. The decoder's own store
// takes any positive size (a boundary inside a pooling window stores the buffered rows, restored
// exactly); a bridged block must end on a pooled entry's boundary in every compressed layer (the
// capture holds no buffered rows), so a store the bridge writes has a multiple of every pool ratio.
import { ConfigError } from '../errors.ts'

/** DeepSeek-V4's block size in oMLX (window 128 plus pooling caches). */
export const DEFAULT_BLOCK_SIZE = 2048

/** A block size given as text (a flag, a variable): decimal digits, a safe integer >= 1; else a ConfigError naming `flag`. */
export function parseBlockSize (text: string, flag = '--block-size'): number {
  if (!/^\d{1,16}$/.test(text) || !Number.isSafeInteger(Number(text)) || Number(text) < 1) {
    throw new ConfigError(flag, `${JSON.stringify(text)} is not a positive integer (tokens per block)`)
  }
  return Number(text)
}

/** Throw a ConfigError naming `field` unless `blockSize` is a positive safe integer (the decoder's own store). Returns it. */
export function checkPositiveBlockSize (blockSize: number, field = 'blockSize'): number {
  if (!Number.isSafeInteger(blockSize) || blockSize < 1) throw new ConfigError(field, `must be a positive integer, got ${String(blockSize)}`)
  return blockSize
}

/**
 * Throw a ConfigError naming `field` unless `blockSize` is a positive safe integer and a multiple of
 * every pool ratio in `compressRatios` (0 and 1 pool nothing); `model` names whose ratios they are.
 * Returns the block size.
 */
export function checkBlockSize (blockSize: number, compressRatios: readonly number[], field = 'blockSize', model = 'the model'): number {
  checkPositiveBlockSize(blockSize, field)
  const ratios = [...new Set(compressRatios.filter((r) => r > 1))].sort((a, b) => a - b)
  const bad = ratios.find((r) => blockSize % r !== 0)
  if (bad !== undefined) {
    throw new ConfigError(field, `${blockSize} must be a multiple of every pool ratio of ${model} (${ratios.join(', ')}); ${bad} does not divide it`)
  }
  return blockSize
}
