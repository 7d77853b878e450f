// The kv path's shape as the capture uses it, apart from how it is built (kv-path.ts for the
// profile's arithmetic, mlx-cpu/kv-path.ts for MLX's), so the two builders share it without a cycle.
import type { LayerCache } from '../model/engine/cache.ts'
import type { NumericsProfile } from '../model/profiles/index.ts'

/** One layer's kv path: an empty cache, and the cache update from attention input rows (Attention's, or MLX's arithmetic). */
export interface KvPathLayer {
  makeCache: () => LayerCache
  updateCache: (x: Float32Array, n: number, start: number, cache: LayerCache) => unknown
}

/** The sidecar's decoder as the capture computes with it: one kv path per layer, of which only the cache update runs. */
export interface KvPathModel {
  profile: NumericsProfile
  layers: KvPathLayer[]
  hiddenSize: number
  maxPositionEmbeddings: number
}
