// What a model's decoder cache and a bridge capture cost, from the config alone: pooled bytes per
// token and per block, the fixed part (windows and carries), and the capture's memory per token.
// Counts come from the engine's cache layout and payload.ts (the decoder's resume state), and
// boundary.ts (block snapshots).
import type { DeepseekV4Config } from '../model/config.ts'
import { cacheLayout } from '../model/engine/cache-layout.ts'
import { layerSnapshotValues } from './boundary.ts'
import { HELD_BYTES_PER_VALUE } from './budget.ts'
import { layerStateValues, type LayerGeometry } from './payload.ts'

/** The cost figures `inspect` prints. */
export interface CacheGeometry {
  /** Bytes per cache value in the decoder (2 for bf16, 4 for f32). */
  bytesPerValue: number
  /** Decoder block size in tokens. */
  blockSize: number
  layers: { sliding: number, csa: number, hca: number }
  /** Pooled cache per token: sum over pools of dim / ratio values (the part that grows with the prompt). */
  pooledBytesPerToken: number
  pooledBytesPerBlock: number
  /** Windows (window - 1 rows per layer) and the ratio-4 overlap carries, at a block boundary: fixed, whatever the length. */
  fixedBytes: number
  /** Capture memory (float32 while held, plus one boundary snapshot per layer and block) per token, and its fixed part. */
  captureBytesPerToken: number
  captureFixedBytes: number
}

function geometries (cfg: DeepseekV4Config): LayerGeometry[] {
  return cacheLayout(cfg.layerTypes, cfg)
}

/** The cost figures for `cfg` with the decoder's cache in `bytesPerValue`-byte values and blocks of `blockSize`. */
export function cacheGeometry (cfg: DeepseekV4Config, opts: { bytesPerValue?: number, blockSize?: number } = {}): CacheGeometry {
  const bytesPerValue = opts.bytesPerValue ?? 2
  const blockSize = opts.blockSize ?? 2048
  const gs = geometries(cfg)
  const poolValues = gs.reduce((a, g) => a + g.pools.reduce((b, p) => b + p.dim / p.ratio, 0), 0)
  // At a block boundary that is a multiple of every ratio, no token is buffered: what is left over
  // the pools is the windows and the carries.
  const boundary = blockSize * Math.max(1, ...gs.flatMap((g) => g.pools.map((p) => p.ratio)))
  const state = gs.reduce((a, g) => a + layerStateValues(g, boundary), 0)
  const pooledAtBoundary = gs.reduce((a, g) => a + g.pools.reduce((b, p) => b + Math.floor(boundary / p.ratio) * p.dim, 0), 0)
  // The capture's held bytes are linear in T between block boundaries: slope and intercept from two of them.
  const held = (t: number) => gs.reduce((a, g) => a + layerStateValues(g, t) + layerSnapshotValues(g, t, blockSize), 0) * HELD_BYTES_PER_VALUE
  const t1 = 2 * boundary
  const t2 = 4 * boundary
  const slope = (held(t2) - held(t1)) / (t2 - t1)
  const count = (type: string) => cfg.layerTypes.filter((t) => t === type).length
  return {
    bytesPerValue,
    blockSize,
    layers: { sliding: count('sliding_attention'), csa: count('compressed_sparse_attention'), hca: count('heavily_compressed_attention') },
    pooledBytesPerToken: poolValues * bytesPerValue,
    pooledBytesPerBlock: poolValues * bytesPerValue * blockSize,
    fixedBytes: (state - pooledAtBoundary) * bytesPerValue,
    captureBytesPerToken: slope,
    captureFixedBytes: held(t1) - slope * t1,
  }
}
