// The block size oMLX's scheduler gives a model whose caches include a RotatingKVCache
// (Scheduler._align_block_size_with_rotating_window, jundot/omlx v0.5.0 d5fcb22a): blocks must end on
// rotation boundaries, so the size is a multiple of the window; a window under 512 is multiplied up
// to the smallest multiple of at least 512 (no larger than 1024), a window of 512 or more is used
// as it is. DeepSeek-V4's window of 128 gives 512. The scheduler overrides any configured size with
// this when the paged SSD cache is on, so a bridge writing any other size writes blocks oMLX's
// scheduler never asks for (its log line "Aligning paged cache block_size=… to N" names N).
import { ConfigError } from '../../errors.ts'

const ALIGN_MIN = 512
const ALIGN_MAX = 1024

/** oMLX's aligned block size for a model whose only RotatingKVCache window is `window` tokens. */
export function omlxAlignedBlockSize (window: number): number {
  if (!Number.isSafeInteger(window) || window < 1) throw new ConfigError('sliding_window', `expected a positive integer window, found ${String(window)}`)
  if (window >= ALIGN_MIN) return window
  const up = Math.ceil(ALIGN_MIN / window) * window
  if (up <= ALIGN_MAX) return up
  return Math.max(window, Math.floor(ALIGN_MAX / window) * window)
}

/**
 * Refuse a block size no oMLX store of this model can hold: it must be a positive multiple of the
 * window (oMLX's rotation boundaries) and of every pool ratio (each block adds whole pooled rows).
 */
export function checkOmlxBlockSize (blockSize: number, window: number, poolRatios: readonly number[]): void {
  if (!Number.isSafeInteger(blockSize) || blockSize < 1) throw new ConfigError('decoder.blockSize', `expected a positive integer, found ${String(blockSize)}`)
  for (const [what, n] of [['the sliding window', window] as const, ...poolRatios.filter((r) => r > 0).map((r) => [`pool ratio ${r}`, r] as const)]) {
    if (blockSize % n !== 0) throw new ConfigError('decoder.blockSize', `${blockSize} is not a multiple of ${what} (${n}); oMLX aligns this model's blocks to ${omlxAlignedBlockSize(window)} tokens`)
  }
}
