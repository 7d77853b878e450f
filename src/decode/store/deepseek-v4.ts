// DeepSeek-V4's per-layer cache classes as oMLX stores them, and the PoolingCache delta form:
//   sliding (ratio 0)  RotatingKVCache(max_size = sliding_window)
//   CSA (ratio 4)      CacheList(RotatingKVCache, PoolingCache(4), PoolingCache(4))   main pool, indexer pool
//   HCA (ratio 128)    CacheList(RotatingKVCache, PoolingCache(128))
// The pools per layer type are the engine's cache layout (src/model/engine/cache-layout.ts: layerPools).
// PoolingCache's state is (buf_kv|None, buf_gate|None, pooled, prev_win_kv|None, prev_win_gate|None).
// In a block its `pooled` is stored as a delta: class PoolingCacheDelta, the same five elements with
// only this block's pooled rows, plus an int64 [start, end] absolute row range as a sixth.
import type { Tensor } from '../../formats/safetensors/index.ts'
import type { DeepseekV4Config, LayerType } from '../../model/config.ts'
import { layerPools } from '../../model/engine/cache-layout.ts'
import { BlockStoreError } from './errors.ts'
import { DEFAULT_BLOCK_SIZE, DEFAULT_PAYLOAD_LAYOUT, type StoreLayout } from './metadata.ts'
import { cacheList, isTensor, plainState, PLACEHOLDER, type BlockPayload, type LayerPayload, type PlainState, type StateElement } from './payload.ts'
import type { JsonValue } from '../../wire/python-json.ts'
import { concatAlong, int64Vector, readInt64Vector, rowAxis, sliceAlong } from './tensor-ops.ts'

/** The window cache class, as oMLX stores its name. */
export const ROTATING = 'RotatingKVCache'
/** The pool cache class. */
export const POOLING = 'PoolingCache'
/** The storage-only class of a pool holding just one block's rows. */
export const POOLING_DELTA = 'PoolingCacheDelta'
/** The container class of CSA and HCA layers. */
export const CACHE_LIST = 'CacheList'

/** Elements of a PoolingCache state (0.5.4+ builds). */
export const POOLING_ARITY = 5
/** Elements of its delta form: the five plus the int64 [start, end] row range. */
export const POOLING_DELTA_ARITY = 6

/** The signature descriptor of a PoolingCache sub-cache: class and state arity. */
export const POOLING_DESCRIPTOR = `${POOLING}:${POOLING_ARITY}`

/** The cache structure of one DeepSeek-V4 layer. */
export interface LayerCacheSpec {
  layer: number
  layerType: LayerType
  /** RotatingKVCache for sliding layers, CacheList otherwise. */
  cacheType: typeof ROTATING | typeof CACHE_LIST
  /** Ratio of each PoolingCache sub-cache after the rotating one: [] sliding, [r, r] CSA, [r] HCA. */
  poolRatios: number[]
  /** RotatingKVCache max_size: the sliding window. */
  window: number
}

/** The per-layer cache structure of a DeepSeek-V4 model (oMLX's make_cache). */
export function deepseekV4CacheLayout (cfg: Pick<DeepseekV4Config, 'layerTypes' | 'compressRatios' | 'slidingWindow'>): LayerCacheSpec[] {
  return cfg.layerTypes.map((layerType, layer) => {
    const ratio = cfg.compressRatios[layer]
    if (layerType === 'sliding_attention') return { layer, layerType, cacheType: ROTATING, poolRatios: [], window: cfg.slidingWindow }
    if (!Number.isSafeInteger(ratio) || ratio <= 0) {
      throw new BlockStoreError(`layer ${layer}`, `${layerType} needs a positive compress ratio, got ${ratio}`)
    }
    // One PoolingCache per pool of the layer: CSA the main pool and the indexer's, HCA the main pool.
    const poolRatios = layerPools(layerType).map(() => ratio)
    return { layer, layerType, cacheType: CACHE_LIST, poolRatios, window: cfg.slidingWindow }
  })
}

/** `layer_cache_types` of a layout. */
export function layoutCacheTypes (specs: readonly LayerCacheSpec[]): string[] {
  return specs.map((s) => s.cacheType)
}

/** `cachelist_subtypes` of a layout: every CacheList layer, as ["RotatingKVCache", "PoolingCache:5", ...]. */
export function layoutCachelistSubtypes (specs: readonly LayerCacheSpec[]): Record<string, string[]> {
  const out: Record<string, string[]> = {}
  for (const s of specs) {
    if (s.cacheType === CACHE_LIST) out[String(s.layer)] = [ROTATING, ...s.poolRatios.map(() => POOLING_DESCRIPTOR)]
  }
  return out
}

/** The store layout of a DeepSeek-V4 model: what its blocks must say to be served. */
export function deepseekV4StoreLayout (cfg: Pick<DeepseekV4Config, 'layerTypes' | 'compressRatios' | 'slidingWindow'>,
  options: { modelName: string, geometryFingerprint: string, blockSize?: number, payloadLayout?: string }): StoreLayout {
  const specs = deepseekV4CacheLayout(cfg)
  return {
    modelName: options.modelName,
    blockSize: options.blockSize ?? DEFAULT_BLOCK_SIZE,
    layerCacheTypes: layoutCacheTypes(specs),
    cachelistSubtypes: layoutCachelistSubtypes(specs),
    payloadLayout: options.payloadLayout ?? DEFAULT_PAYLOAD_LAYOUT,
    geometryFingerprint: options.geometryFingerprint,
  }
}

/** A RotatingKVCache at a block boundary: keys/values hold the last rows in temporal order. */
export interface RotatingSnapshot {
  keys: Tensor
  values: Tensor
  /** Tokens seen so far (the absolute position of the boundary). */
  offset: number
  /** max_size: the window. */
  maxSize: number
  /** Rows kept at the front forever; 0 for DeepSeek-V4. */
  keep?: number
}

/** A RotatingKVCache state and its meta state [keep, max_size, offset, _idx] (strings, as mlx-lm writes them). */
export function rotatingState (s: RotatingSnapshot): { state: PlainState, meta: JsonValue } {
  const rows = s.keys.shape[rowAxis(s.keys, ROTATING)]
  // oMLX clamps _idx to the stored buffer length so the restored cache is in temporal order.
  const idx = Math.min(rows, s.maxSize)
  const meta = [s.keep ?? 0, s.maxSize, s.offset, idx].map(String)
  // A two-element state is oMLX's legacy (keys, values) form: it stamps no class name on it (the
  // layer's type, or its CacheList meta state, names the class).
  return { state: plainState([s.keys, s.values]), meta }
}

/** A PoolingCache's state. `pooled` may hold only rows [pooledStart, ...) of the cumulative pool. */
export interface PoolingSnapshot {
  bufKv: Tensor | null
  bufGate: Tensor | null
  pooled: Tensor
  /** Absolute index of `pooled`'s first row (0 when it is the whole pool). */
  pooledStart?: number
  prevWinKv: Tensor | null
  prevWinGate: Tensor | null
}

/** The pooled rows a block at boundary `tokenCount` adds: [previous boundary / ratio, tokenCount / ratio). */
export function poolingDeltaRange (tokenCount: number, blockSize: number, ratio: number): { start: number, end: number } {
  if (!Number.isSafeInteger(tokenCount) || tokenCount <= 0 || !Number.isSafeInteger(blockSize) || blockSize <= 0 || !Number.isSafeInteger(ratio) || ratio <= 0) {
    throw new BlockStoreError(POOLING_DELTA, `token count ${tokenCount}, block size ${blockSize} and ratio ${ratio} must be positive integers`)
  }
  const previousBoundary = Math.floor((tokenCount - 1) / blockSize) * blockSize
  return { start: Math.floor(previousBoundary / ratio), end: Math.floor(tokenCount / ratio) }
}

/** The full (cumulative) PoolingCache state; `pooled` must start at row 0. */
export function poolingFullState (p: PoolingSnapshot): PlainState {
  if ((p.pooledStart ?? 0) !== 0) throw new BlockStoreError(POOLING, `the full form needs every pooled row; these start at row ${p.pooledStart}`)
  return plainState([p.bufKv, p.bufGate, p.pooled, p.prevWinKv, p.prevWinGate], POOLING)
}

/** The delta form holding pooled rows [start, end) (taken from `p.pooled`, which may hold more). */
export function poolingDeltaState (p: PoolingSnapshot, start: number, end: number): PlainState {
  const axis = rowAxis(p.pooled, POOLING_DELTA)
  const first = p.pooledStart ?? 0
  const held = p.pooled.shape[axis]
  if (start < first || end > first + held || end < start) {
    throw new BlockStoreError(POOLING_DELTA, `rows [${start}, ${end}) are not all within the ${held} pooled rows held from row ${first}`)
  }
  const rows = start === first && end === first + held ? p.pooled : sliceAlong(p.pooled, axis, start - first, end - first, POOLING_DELTA)
  return plainState([p.bufKv, p.bufGate, rows, p.prevWinKv, p.prevWinGate, int64Vector([start, end])], POOLING_DELTA)
}

/** One DeepSeek-V4 layer at a block boundary: its window and, for CSA/HCA, one PoolingCache per pool. */
export interface LayerSnapshot {
  rotating: RotatingSnapshot
  pools: PoolingSnapshot[]
}

/**
 * A block's payload from per-layer snapshots at boundary `tokenCount`. A null snapshot makes that
 * layer a placeholder (no state in this block). With `pooling: 'delta'` (oMLX's default) each pool
 * stores only this block's rows; a pool whose rows do not end at tokenCount / ratio falls back to
 * the full form, as oMLX's compaction does.
 */
export function deepseekV4BlockPayload (specs: readonly LayerCacheSpec[], snapshots: readonly (LayerSnapshot | null)[],
  options: { tokenCount: number, blockSize: number, pooling?: 'delta' | 'full' }): BlockPayload {
  if (snapshots.length !== specs.length) throw new BlockStoreError('block payload', `${snapshots.length} layer snapshots for ${specs.length} layers`)
  const layers: LayerPayload[] = []
  const metas: JsonValue[] = []
  specs.forEach((spec, i) => {
    const snap = snapshots[i]
    if (snap === null) {
      layers.push(PLACEHOLDER)
      metas.push([])
      return
    }
    const rotating = rotatingState(snap.rotating)
    if (spec.cacheType === ROTATING) {
      if (snap.pools.length !== 0) throw new BlockStoreError(`layer ${i}`, 'a sliding layer has no pooling caches')
      layers.push(rotating.state)
      metas.push(rotating.meta)
      return
    }
    if (snap.pools.length !== spec.poolRatios.length) {
      throw new BlockStoreError(`layer ${i}`, `${spec.layerType} has ${spec.poolRatios.length} pooling caches, got ${snap.pools.length}`)
    }
    const subs = snap.pools.map((pool, j) => {
      const ratio = spec.poolRatios[j]
      if (options.pooling === 'full') return poolingFullState(pool)
      const { start, end } = poolingDeltaRange(options.tokenCount, options.blockSize, ratio)
      const held = (pool.pooledStart ?? 0) + pool.pooled.shape[rowAxis(pool.pooled, POOLING)]
      if (held !== end) {
        if ((pool.pooledStart ?? 0) === 0) return poolingFullState(pool)
        throw new BlockStoreError(`layer ${i} pool ${j}`, `pooled rows end at ${held}, a block at token ${options.tokenCount} with ratio ${ratio} needs ${end}`)
      }
      return poolingDeltaState(pool, start, end)
    })
    layers.push(cacheList([rotating.state, ...subs]))
    metas.push([[ROTATING, ...spec.poolRatios.map(() => POOLING)], [rotating.meta, ...spec.poolRatios]])
  })
  return { layers, layerCacheTypes: layoutCacheTypes(specs), layerMetaStates: metas }
}

/** A restore that must not happen: the blocks do not make a valid cache. */
export class RestoreRejected extends BlockStoreError {
  override name = 'RestoreRejected'
}

function elementTensor (e: StateElement, what: string): Tensor {
  if (e === null || !isTensor(e)) throw new RestoreRejected(what, 'pooled rows must be a tensor')
  return e
}

/**
 * Rebuild one PoolingCache from its sub-state in each block of a chain (oldest first; null where the
 * block has no state for the layer). A full-form state resets the pool; each delta's start must equal
 * the rows gathered so far, otherwise there is a gap and the restore is rejected. The result is the
 * full five-element state, with the buffer, gate and window carries of the last block.
 */
export function restorePoolingChain (chain: readonly (PlainState | null)[], what = POOLING): PlainState {
  // Before the first block the pool is known and empty: a chain may start with the rows [0, n).
  let parts: Tensor[] | null = []
  let rows = 0
  let last: PlainState | null = null
  for (const [k, s] of chain.entries()) {
    const where = `${what}, block ${k}`
    if (s === null) {
      // No state here: a later delta cannot know where its rows start unless a full form resets.
      parts = null
      last = null
      continue
    }
    if (s.className === POOLING) {
      if (s.elements.length !== 3 && s.elements.length !== POOLING_ARITY) throw new RestoreRejected(where, `a PoolingCache state has 3 or 5 elements, got ${s.elements.length}`)
      const pooled = elementTensor(s.elements[2], where)
      parts = [pooled]
      rows = pooled.shape[rowAxis(pooled, where)]
    } else if (s.className === POOLING_DELTA) {
      if (s.elements.length !== POOLING_DELTA_ARITY) throw new RestoreRejected(where, `a PoolingCacheDelta has ${POOLING_DELTA_ARITY} elements, got ${s.elements.length}`)
      const range = s.elements[5]
      if (range === null || !isTensor(range)) throw new RestoreRejected(where, 'the row range must be an I64 tensor')
      const [start, end] = readInt64Vector(range, where)
      const pooled = elementTensor(s.elements[2], where)
      const held = pooled.shape[rowAxis(pooled, where)]
      if (end - start !== held) throw new RestoreRejected(where, `range [${start}, ${end}) does not match its ${held} rows`)
      if (parts === null) throw new RestoreRejected(where, `delta rows [${start}, ${end}) follow a block with no pooling state`)
      if (start !== rows) throw new RestoreRejected(where, `delta rows start at ${start} but ${rows} rows precede them (a gap or an overlap)`)
      parts.push(pooled)
      rows = end
    } else {
      throw new RestoreRejected(where, `expected ${POOLING} or ${POOLING_DELTA}, got ${s.className ?? 'a state with no class name'}`)
    }
    last = s
  }
  if (last === null || parts === null) throw new RestoreRejected(what, 'the last block holds no pooling state')
  const pooled = parts.length === 1 ? parts[0] : concatAlong(parts, rowAxis(parts[0], what), what)
  const e = last.elements
  return plainState([e[0], e[1], pooled, e[3] ?? null, e[4] ?? null], POOLING)
}
