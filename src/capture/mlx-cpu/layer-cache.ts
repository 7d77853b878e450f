// One layer's cache as oMLX's DeepSeek-V4 model leaves it after a one-shot prefill on MLX's CPU,
// computed from that layer's attention input with MLX's own arithmetic (src/numerics/mlx-cpu):
//   window: kv_norm(wkv(x)) roped at positions 0…T-1 (the RotatingKVCache's last `window` rows);
//   per Compressor (the attention's, and a CSA layer's indexer's), PoolingCache's five parts.
// A plain reference: every loop is scalar TypeScript. Real model widths would want the two
// quantized matmuls (and the pooling) in a native kernel; the rounding rules stay the same.
import { affineMatmul, mxfp8Matmul } from '../../numerics/mlx-cpu/quantized-matmul.ts'
import { overlapCompress, simpleCompress } from '../../numerics/mlx-cpu/pooling.ts'
import { mlxRmsNormRows } from '../../numerics/mlx-cpu/rms-norm.ts'
import { deepseekV4RopeFreqs, mlxRopeRow, ropeInvFreqs } from '../../numerics/mlx-cpu/rope.ts'
import type { RoundingPoints } from '../../numerics/mlx-cpu/rounding-points.ts'
import type { MlxCpuCacheConfig } from './config.ts'
import type { MlxCompressorWeights, MlxCpuCacheWeights } from './weights.ts'

/** PoolingCache.state: (buf_kv, buf_gate, pooled, prev_win_kv, prev_win_gate); null where MLX holds None. */
export interface MlxCpuPoolState {
  ratio: number
  /** Pooled entry width (the compressor's head dim). */
  dim: number
  /** Projection width (2·dim for the overlap). */
  width: number
  /** [remainder, width] raw kv rows not yet in a window; null when the remainder is 0. */
  bufKv: Float32Array | null
  bufGate: Float32Array | null
  /** [windows, dim] normalised, roped pooled entries; null before the first full window. */
  pooled: Float32Array | null
  /** The last full window's raw rows [ratio, width] (ratio 4 only; gate without ape). */
  prevWinKv: Float32Array | null
  prevWinGate: Float32Array | null
}

export interface MlxCpuLayerCache {
  layer: number
  /** [windowRows, headDim] bf16 values, temporal order. */
  window: Float32Array
  windowRows: number
  /** pools[0]: the attention's compressor; pools[1]: a CSA layer's indexer compressor. */
  pools: MlxCpuPoolState[]
}

/** The compressor's projections of the attention input: [T, width] each, bf16. */
export interface CompressorProjection {
  kv: Float32Array
  gate: Float32Array
}

export function compressorProject (w: MlxCompressorWeights, attnInput: Float32Array, T: number, cfg: Pick<MlxCpuCacheConfig, 'rounding'>): CompressorProjection {
  return { kv: affineMatmul(attnInput, T, w.wkv, cfg.rounding), gate: affineMatmul(attnInput, T, w.wgate, cfg.rounding) }
}

function rows (a: Float32Array, from: number, to: number, width: number): Float32Array | null {
  return to > from ? a.slice(from * width, to * width) : null
}

/**
 * Compressor.consume on an empty PoolingCache (a one-shot prefill): the full windows are pooled,
 * normalised and roped at window positions 0, 1, … (rope offset pool_base // ratio = 0, freqs
 * divided by the ratio); the remainder waits in the buffer; the ratio-4 overlap keeps its last
 * window raw (PoolingCache.store_prev).
 */
export function compressorPool (w: MlxCompressorWeights, cfg: MlxCpuCacheConfig, p: CompressorProjection, T: number): MlxCpuPoolState {
  const { ratio, width, dim } = w
  const windows = Math.floor(T / ratio)
  const usable = windows * ratio
  const overlap = ratio === 4
  const state: MlxCpuPoolState = {
    ratio, dim, width,
    bufKv: rows(p.kv, usable, T, width),
    bufGate: rows(p.gate, usable, T, width),
    pooled: null,
    prevWinKv: overlap && windows > 0 ? rows(p.kv, usable - ratio, usable, width) : null,
    prevWinGate: overlap && windows > 0 ? rows(p.gate, usable - ratio, usable, width) : null,
  }
  if (windows === 0) return state
  state.pooled = poolWindows(w, cfg, p.kv, p.gate, windows, 0, false)
  return state
}

/** The compressed layers' rope of a pool's entries (freqs divided by the ratio). */
export function poolInvFreqs (cfg: MlxCpuCacheConfig, ratio: number, dim: number): Float32Array {
  return ropeInvFreqs(deepseekV4RopeFreqs(cfg.ropeDim, cfg.compressRopeTheta, cfg.compressYarn, ratio, dim))
}

/**
 * The two per-window steps of poolWindows: the pooling of `windows` windows (overlapCompress for
 * ratio 4, `overlap`, else simpleCompress) and the rope of `rows` rows at positions first, first+1, …
 * The references below, or functions giving the same bits (the product's native kernels,
 * src/kernels/mlx-cpu.ts).
 */
export interface PoolKernels {
  pool: (kv: Float32Array, gate: Float32Array, ape: Float32Array, windows: number, ratio: number, dim: number,
    overlap: boolean, points: RoundingPoints) => Float32Array
  ropeRows: (x: Float32Array, rows: number, d: number, inv: Float32Array, first: number, points: RoundingPoints) => void
}

/** The TypeScript references (pooling.ts, rope.ts). */
export const REFERENCE_POOL_KERNELS: PoolKernels = {
  pool: (kv, gate, ape, windows, ratio, dim, overlap, points) => overlap
    ? overlapCompress(kv, gate, ape, windows, ratio, dim, points)
    : simpleCompress(kv, gate, ape, windows, ratio, dim, points),
  ropeRows: (x, rows, d, inv, first, points) => {
    for (let i = 0; i < rows; i++) mlxRopeRow(x, i * d, inv, first + i, points)
  },
}

/**
 * Pool `windows` full windows of raw projections (kv, gate: [rows, width] bf16), normalise and rope
 * them at entry positions first, first+1, … With `withPrevious`, the rows start with the window
 * before them (ratio 4: its lane A feeds the first pooled window) and that one is not returned.
 */
export function poolWindows (w: MlxCompressorWeights, cfg: MlxCpuCacheConfig, kv: Float32Array, gate: Float32Array,
  windows: number, first: number, withPrevious: boolean, inv = poolInvFreqs(cfg, w.ratio, w.dim), kernels: PoolKernels = REFERENCE_POOL_KERNELS): Float32Array {
  const { ratio, dim } = w
  const overlap = ratio === 4
  if (withPrevious && !overlap) throw new Error('mlx-cpu cache path: only the ratio-4 overlap pools with the previous window')
  const all = withPrevious ? windows + 1 : windows
  const pooledAll = kernels.pool(kv, gate, w.ape, all, ratio, dim, overlap, cfg.rounding)
  const pooled = withPrevious ? pooledAll.subarray(dim) : pooledAll
  const normed = mlxRmsNormRows(pooled, dim, w.norm, cfg.rmsNormEps, cfg.rounding)
  kernels.ropeRows(normed, windows, dim, inv, first, cfg.rounding)
  return normed
}

/** The window's rope: the sliding layers' plain one, the compressed layers' YaRN one. */
export function windowInvFreqs (cfg: MlxCpuCacheConfig, ratio: number): Float32Array {
  return ropeInvFreqs(ratio === 0
    ? deepseekV4RopeFreqs(cfg.ropeDim, cfg.ropeTheta, null, 1, cfg.headDim)
    : deepseekV4RopeFreqs(cfg.ropeDim, cfg.compressRopeTheta, cfg.compressYarn, 1, cfg.headDim))
}

/**
 * oMLX's cache state of `layer` after a one-shot prefill of T tokens whose attention input (the
 * attn_norm output, [T, hidden] bf16 values) is `attnInput`.
 */
export function mlxCpuLayerCache (weights: MlxCpuCacheWeights, cfg: MlxCpuCacheConfig, layer: number,
  attnInput: Float32Array, T: number): MlxCpuLayerCache {
  const lw = weights.layers[layer]
  if (lw === undefined) throw new Error(`mlx-cpu cache path: the weights hold no layer ${layer}`)
  if (attnInput.length !== T * cfg.hiddenSize) throw new Error(`mlx-cpu cache path: attention input of ${attnInput.length} values, expected ${T} x ${cfg.hiddenSize}`)
  const ratio = cfg.compressRatios[layer]
  const d = cfg.headDim
  const kv = mlxRmsNormRows(mxfp8Matmul(attnInput, T, lw.wkv, cfg.rounding), d, lw.kvNorm, cfg.rmsNormEps, cfg.rounding)
  const inv = windowInvFreqs(cfg, ratio)
  const windowRows = Math.min(T, cfg.slidingWindow)
  const window = kv.slice((T - windowRows) * d)
  // Rope is per row, so only the rows the window keeps need it.
  for (let r = 0; r < windowRows; r++) mlxRopeRow(window, r * d, inv, T - windowRows + r, cfg.rounding)
  const pools: MlxCpuPoolState[] = []
  for (const cw of [lw.compressor, lw.indexerCompressor]) {
    if (cw === null) continue
    if (cw.ratio !== ratio) throw new Error(`mlx-cpu cache path: layer ${layer} compressor of ratio ${cw.ratio}, the config says ${ratio}`)
    pools.push(compressorPool(cw, cfg, compressorProject(cw, attnInput, T, cfg), T))
  }
  return { layer, window, windowRows, pools }
}
