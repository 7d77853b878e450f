// The per-layer cache layout of DeepSeek-V4, described once. Every form of the cache derives from it:
// our LayerCache (cache.ts, built by Attention.makeCache), its dump tensor names (cacheTensorNames),
// the capture's payload geometry (src/capture/payload.ts), oMLX's block classes
// (src/decode/store/deepseek-v4.ts) and the names llama.cpp's state builder reads.
//   window     the last sliding_window - 1 shared K=V rows, head_dim wide
//   pools      CSA: the main pool, then the indexer's (ratio csa, overlapping: projections 2*dim wide,
//              a carry of the last complete window); HCA: the main pool (ratio hca, no overlap)
import type { LayerType } from '../config.ts'

/** Which compressor a pool belongs to: the layer's main one or a CSA layer's indexer. */
export type PoolName = 'compressor' | 'indexer'

/** One pool of a layer's cache. */
export interface PoolLayout {
  name: PoolName
  /** Tokens per pooled entry. */
  ratio: number
  /** Entry width: head_dim for the main pool, index_head_dim for the indexer. */
  dim: number
  /** Whether entries pool two windows (CSA's ratio-4 compressors): projections are 2*dim wide and a carry is kept. */
  overlap: boolean
  /** Projection width per buffered token: 2*dim with overlap, else dim. */
  width: number
}

/** One decoder layer's cache layout. */
export interface LayerCacheLayout {
  layerType: LayerType
  headDim: number
  /** Rows the window holds at most: sliding_window - 1 (a query at t reads t-window+1..t; row t is its own). */
  windowRows: number
  pools: PoolLayout[]
}

/** The sizes the layout follows from (a config's or a sidecar's). */
export interface CacheDims {
  headDim: number
  indexHeadDim: number
  slidingWindow: number
  compressRates: { csa: number, hca: number }
}

/** The pools of a layer type, in cache order, without sizes: what oMLX's class structure needs. */
export function layerPools (type: LayerType): Array<{ name: PoolName, overlap: boolean }> {
  if (type === 'compressed_sparse_attention') return [{ name: 'compressor', overlap: true }, { name: 'indexer', overlap: true }]
  if (type === 'heavily_compressed_attention') return [{ name: 'compressor', overlap: false }]
  return []
}

/** The cache layout of one layer of type `type`. */
export function layerCacheLayout (type: LayerType, dims: CacheDims): LayerCacheLayout {
  const ratio = type === 'compressed_sparse_attention' ? dims.compressRates.csa : dims.compressRates.hca
  const pools = layerPools(type).map(({ name, overlap }): PoolLayout => {
    const dim = name === 'indexer' ? dims.indexHeadDim : dims.headDim
    return { name, ratio, dim, overlap, width: overlap ? 2 * dim : dim }
  })
  return { layerType: type, headDim: dims.headDim, windowRows: dims.slidingWindow - 1, pools }
}

/** The cache layout of every layer. */
export function cacheLayout (layerTypes: readonly LayerType[], dims: CacheDims): LayerCacheLayout[] {
  return layerTypes.map((type) => layerCacheLayout(type, dims))
}

/** The dump tensor names of one pool under `base` (e.g. `layers.1.compressor`). */
export interface PoolTensorNames {
  compressedKv: string
  entryCount: string
  bufferKv: string
  bufferGate: string
  /** Only in overlapping pools, once a window completed. */
  overlapKv: string
  overlapGate: string
}

/** The dump tensor names of layer `layer` under `prefix` (none: `layers.{i}...`, as a capture's layer files name them). */
export function cacheTensorNames (layer: number, prefix?: string): { window: string, pool: (name: PoolName) => PoolTensorNames } {
  const base = prefix === undefined ? `layers.${layer}` : `${prefix}.layers.${layer}`
  return { window: `${base}.window`, pool: (name) => poolTensorNames(`${base}.${name}`) }
}

/** The dump tensor names of a pool under `base`. */
export function poolTensorNames (base: string): PoolTensorNames {
  return {
    compressedKv: `${base}.compressed_kv`,
    entryCount: `${base}.entry_count`,
    bufferKv: `${base}.buffer_kv`,
    bufferGate: `${base}.buffer_gate`,
    overlapKv: `${base}.overlap_kv`,
    overlapGate: `${base}.overlap_gate`,
  }
}
