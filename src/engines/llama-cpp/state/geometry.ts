// What a state file for one model under one context configuration must look like: which layers
// each cache holds, widths, ratios, ring sizes, the K cache type, the rotation. Derived from the
// model config and the context options only, so the builder and the guard agree by construction.
import type { DeepseekV4Config } from '../../../model/config.ts'
import { cacheLayout } from '../../../model/engine/cache-layout.ts'
import { LlamaCppStateError } from './errors.ts'
import type { CacheType, Pool } from './format.ts'

/** llama.cpp's DeepSeek-V4 hard-codes these ratios (DSV4_CSA_RATIO, DSV4_HCA_RATIO). */
export const CSA_RATIO = 4
export const HCA_RATIO = 128

export interface LlamaCppStateGeometry {
  vocabSize: number
  /** Per layer: 0 (sliding), 4 (CSA) or 128 (HCA). */
  layerRatios: number[]
  headDim: number
  indexHeadDim: number
  /** Cells a query sees: itself and the window - 1 before it. */
  slidingWindow: number
  /** The context's K cache type (node-llama-cpp's experimentalKvCacheKeyType). */
  cacheType: CacheType
  /** llama.cpp's V-transposed flag: 1 without flash attention. */
  vTrans: number
}

/** The geometry of `cfg` in a context with these settings (the runner's defaults: F32, no flash attention). */
export function stateGeometry (cfg: DeepseekV4Config, ctx: { kvCacheType?: CacheType, flashAttention?: boolean } = {}): LlamaCppStateGeometry {
  if (cfg.compressRates.csa !== CSA_RATIO || cfg.compressRates.hca !== HCA_RATIO) {
    throw new LlamaCppStateError('geometry', `compress rates ${cfg.compressRates.csa} / ${cfg.compressRates.hca}; llama.cpp's deepseek4 has ${CSA_RATIO} / ${HCA_RATIO} only`)
  }
  // Our cache layout's ratio per layer (its main pool's; 0 without pools): 4 for CSA, 128 for HCA, checked above.
  const layerRatios = cacheLayout(cfg.layerTypes, cfg).map((l) => l.pools[0]?.ratio ?? 0)
  return {
    vocabSize: cfg.vocabSize,
    layerRatios,
    headDim: cfg.headDim,
    indexHeadDim: cfg.indexHeadDim,
    slidingWindow: cfg.slidingWindow,
    cacheType: ctx.kvCacheType ?? 'F32',
    vTrans: ctx.flashAttention === true ? 0 : 1,
  }
}

/** The layers a pool's K cache and ring hold, in llama.cpp's order (ascending). */
export function poolLayers (g: LlamaCppStateGeometry, pool: Pool): number[] {
  const ratio = pool === 'hca' ? HCA_RATIO : CSA_RATIO
  return g.layerRatios.flatMap((r, i) => r === ratio ? [i] : [])
}

export const poolRatio = (pool: Pool): number => pool === 'hca' ? HCA_RATIO : CSA_RATIO
/** Entry width of a pool: the head dim, or the indexer head dim for the indexer. */
export const poolWidth = (g: LlamaCppStateGeometry, pool: Pool): number => pool === 'lid' ? g.indexHeadDim : g.headDim
/** Overlapping pools (ratio 4) keep two windows of full-width projections in their ring. */
export const poolOverlap = (pool: Pool): boolean => pool !== 'hca'
/** Ring rows: two windows with overlap, else one. */
export const ringSize = (pool: Pool): number => poolOverlap(pool) ? 2 * poolRatio(pool) : poolRatio(pool)
/** Ring row width: 2 * entry width with overlap (both halves of the projection), else the width. */
export const ringWidth = (g: LlamaCppStateGeometry, pool: Pool): number => (poolOverlap(pool) ? 2 : 1) * poolWidth(g, pool)

/**
 * Whether llama.cpp multiplies the K rows of a cache by a Walsh-Hadamard matrix (llama-kv-cache.cpp):
 * for an F32/F16 cache only where the cache's head size equals the indexer head size, which always
 * holds for the indexer pool. `'window'` and the main pools share the head dim.
 */
export function rotates (g: LlamaCppStateGeometry, cache: 'window' | Pool): boolean {
  return cache === 'lid' || g.headDim === g.indexHeadDim
}

/**
 * The rotation size llama.cpp picks (build_input_k_rot): the largest power of two from 64 up that
 * divides the head size; the row is rotated in blocks of it.
 */
export function rotationSize (headSize: number): number {
  let n = 64
  do n *= 2
  while (headSize % n === 0)
  return n / 2
}
