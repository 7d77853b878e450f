// How many values a layer's cache holds after n tokens, and the payload minimum that follows.
// A layer's cache is exactly the decoder's resume state (src/model/engine/cache-layout.ts):
//   window      min(n, window - 1) rows of head_dim
//   per pool    floor(n / r) entries of d; (n mod r) buffered tokens of kv and gate, width w each
//               (w = 2d with overlap, else d); CSA's carry, kv and gate [r, d], once n >= r
// Nothing in it can be dropped, so the sum over layers at the decoder's element size is the
// theoretical minimum a capture must move; a capture file adds only its header.
import { cacheLayout, type LayerCacheLayout, type PoolLayout } from '../model/engine/cache-layout.ts'
import type { SidecarJson } from '../wire/sidecar-format.ts'

/** One pool of a layer: ratio, entry width, overlap (CSA and its indexer) or not (HCA). */
export type PoolGeometry = Pick<PoolLayout, 'ratio' | 'dim' | 'overlap'>

/** The cache geometry of one layer (windowRows: sliding_window - 1). */
export interface LayerGeometry extends Pick<LayerCacheLayout, 'headDim' | 'windowRows'> {
  pools: PoolGeometry[]
}

/** The cache geometry of every layer of a sidecar's decoder: the engine's cache layout (src/model/engine/cache-layout.ts). */
export function layerGeometries (json: Pick<SidecarJson, 'layers' | 'headDim' | 'indexHeadDim' | 'slidingWindow' | 'compressRates'>): LayerGeometry[] {
  return cacheLayout(json.layers.map((l) => l.layerType), json)
}

/** Float values one layer's cache holds after n tokens (entry counts, one int64 each, not included). */
export function layerStateValues (g: LayerGeometry, n: number): number {
  let values = Math.min(n, g.windowRows) * g.headDim
  for (const p of g.pools) {
    const width = p.overlap ? 2 * p.dim : p.dim
    values += Math.floor(n / p.ratio) * p.dim + (n % p.ratio) * width * 2
    if (p.overlap && n >= p.ratio) values += 2 * p.ratio * p.dim
  }
  return values
}

/** Float values of a layer's cache after n tokens without its pooled rows: what a streaming capture keeps in memory. */
export function layerResidentValues (g: LayerGeometry, n: number): number {
  return layerStateValues(g, n) - layerPooledValues(g, n)
}

/** Float values of a layer's pooled rows after n tokens (floor(n / r) entries of d per pool). */
export function layerPooledValues (g: LayerGeometry, n: number): number {
  return g.pools.reduce((a, p) => a + Math.floor(n / p.ratio) * p.dim, 0)
}

/** The payload minimum for T tokens at `bytesPerValue` (2 for bf16 activations, 4 for f32). */
export interface PayloadMinimum {
  tokens: number
  bytesPerValue: number
  /** Sum over layers of every cache value at T, times bytesPerValue. */
  bytes: number
  bytesPerToken: number
  /** The pools' share alone: sum over pools of d / r values per token (what grows with T). */
  poolBytesPerToken: number
  /** What does not grow with T: the windows (at most window - 1 rows) and the carries. */
  fixedBytes: number
}

/** The element size a decoder under `profile` holds its cache in. */
export function decoderBytesPerValue (json: Pick<SidecarJson, 'profile'>): number {
  return json.profile.activations === 'bf16' ? 2 : 4
}

/** The theoretical payload minimum of a T-token capture for a sidecar's decoder. */
export function payloadMinimum (json: Pick<SidecarJson, 'layers' | 'headDim' | 'indexHeadDim' | 'slidingWindow' | 'compressRates' | 'profile'>, tokens: number): PayloadMinimum {
  const e = decoderBytesPerValue(json)
  const geometries = layerGeometries(json)
  const bytes = geometries.reduce((a, g) => a + layerStateValues(g, tokens), 0) * e
  const poolValuesPerToken = geometries.reduce((a, g) => a + g.pools.reduce((b, p) => b + p.dim / p.ratio, 0), 0)
  return {
    tokens,
    bytesPerValue: e,
    bytes,
    bytesPerToken: tokens > 0 ? bytes / tokens : 0,
    poolBytesPerToken: poolValuesPerToken * e,
    fixedBytes: bytes - geometries.reduce((a, g) => a + g.pools.reduce((b, p) => b + Math.floor(tokens / p.ratio) * p.dim, 0), 0) * e,
  }
}
