// Which values of llama.cpp's state a future step can still read, position by position. Our
// cache (src/model/engine/cache.ts) holds exactly those; llama.cpp's rings and window also keep a
// few that no later step reads (it overwrites them first). The builder writes zeros there and the
// comparison leaves them out, counted.
import { poolOverlap, poolRatio, ringSize } from './geometry.ts'
import type { Pool } from './format.ts'

/**
 * A ring row after T tokens: the position it holds (row = position mod ring size) and its role:
 *   unwritten  no position yet (T < ring size): zeros in llama.cpp too; left out of comparisons
 *   live       a token of the current partial window: both halves are read when it completes
 *   carry      a token of the last complete window (overlap pools): only its first half (Ca) is read
 *   dead       read by nothing again
 */
export type RingRole = 'unwritten' | 'live' | 'carry' | 'dead'

export function ringRow (pool: Pool, tokens: number, row: number): { pos: number, role: RingRole } {
  const size = ringSize(pool)
  const ratio = poolRatio(pool)
  const pos = tokens - 1 - ((tokens - 1 - row) % size + size) % size
  if (pos < 0) return { pos, role: 'unwritten' }
  const windowStart = Math.floor(tokens / ratio) * ratio
  if (pos >= windowStart) return { pos, role: 'live' }
  if (poolOverlap(pool) && pos >= windowStart - ratio) return { pos, role: 'carry' }
  return { pos, role: 'dead' }
}

/** The positions of the window cells llama.cpp keeps after T tokens (the last `window`), and the first one a next query still sees. */
export function windowPositions (tokens: number, window: number): { first: number, firstVisible: number } {
  return { first: Math.max(0, tokens - window), firstVisible: Math.max(0, tokens - window + 1) }
}
