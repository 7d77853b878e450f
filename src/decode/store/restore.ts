// oMLX's restore rules over a chain of loaded blocks (oldest first):
//  - walk back to the newest block in which every non-sliceable layer holds real state; none -> reject;
//  - sliceable (KVCache) layers: join every block's rows;
//  - other plain layers (RotatingKVCache): that block's state; its offset must be the chain's length;
//  - CacheList layers: that block's sub-states, except PoolingCache pools, rebuilt from their deltas
//    without gaps (see restorePoolingChain), whose row count must be tokens / ratio.
import { BlockStoreError } from './errors.ts'
import { canonicalCacheTypes } from './metadata.ts'
import { CACHE_LIST, POOLING, POOLING_DELTA, ROTATING, RestoreRejected, restorePoolingChain } from './deepseek-v4.ts'
import { isTensor, plainState, type BlockPayload, type CacheListState, type LayerPayload, type PlainState } from './payload.ts'
import type { JsonValue } from '../../wire/python-json.ts'
import { concatAlong, rowAxis } from './tensor-ops.ts'
import type { Tensor } from '../../formats/safetensors/index.ts'

/** Cache types whose blocks hold only their own tokens (restore joins them). */
export const SLICEABLE_CACHE_TYPES: ReadonlySet<string> = new Set(['KVCache'])

/** One block of a chain. */
export interface ChainBlock {
  hash: string
  payload: BlockPayload
}

/** A cache rebuilt from blocks: every layer real (no placeholders), pools in full form. */
export interface RestoredCache {
  /** Tokens the cache covers: blocks used x block size. */
  tokenCount: number
  /** The blocks used (a prefix of the chain; shorter than it after a walk-back). */
  hashes: string[]
  /** Blocks dropped from the end by the walk-back. */
  walkedBack: number
  layers: LayerPayload[]
  layerCacheTypes: string[]
  layerMetaStates: JsonValue[]
}

function isSliceable (cacheType: string): boolean {
  return SLICEABLE_CACHE_TYPES.has(cacheType)
}

/** mlx-lm's rotating meta [keep, max_size, offset, _idx] -> offset, or undefined if it is not one. */
function rotatingOffset (meta: JsonValue | undefined): number | undefined {
  if (!Array.isArray(meta) || meta.length < 4) return undefined
  const offset = Number(meta[2])
  return Number.isSafeInteger(offset) ? offset : undefined
}

function checkRotating (meta: JsonValue | undefined, tokenCount: number, where: string): void {
  const offset = rotatingOffset(meta)
  if (offset === undefined) throw new RestoreRejected(where, `rotating meta state ${JSON.stringify(meta)} is not [keep, max_size, offset, _idx]`)
  if (offset !== tokenCount) throw new RestoreRejected(where, `rotating state is at offset ${offset}, the chain ends at token ${tokenCount}`)
}

function joinSliceable (blocks: readonly ChainBlock[], layer: number, where: string): PlainState {
  const states = blocks.map((b, k) => {
    const l = b.payload.layers[layer]
    if (l.kind !== 'state') throw new RestoreRejected(`${where}, block ${k}`, `a sliceable layer needs its rows in every block, found a ${l.kind}`)
    return l
  })
  const n = states[0].elements.length
  const elements = Array.from({ length: n }, (_, e) => {
    const parts = states.map((s, k) => {
      const t = s.elements[e]
      if (s.elements.length !== n || t === null || t === undefined || !isTensor(t)) throw new RestoreRejected(`${where}, block ${k}`, `element ${e} is not a tensor in every block`)
      return t
    })
    return concatAlong(parts, rowAxis(parts[0], where), where) as Tensor
  })
  return plainState(elements, states[states.length - 1].className)
}

function restoreCacheList (blocks: readonly ChainBlock[], layer: number, tokenCount: number, meta: JsonValue | undefined, where: string): CacheListState {
  const last = blocks[blocks.length - 1].payload.layers[layer] as CacheListState
  const subMetas = Array.isArray(meta) && Array.isArray(meta[1]) ? meta[1] : []
  const subs = last.subs.map((sub, j) => {
    const subWhere = `${where}, sub-cache ${j}`
    if (sub.className === POOLING || sub.className === POOLING_DELTA) {
      const chain = blocks.map((b, k) => {
        const l = b.payload.layers[layer]
        if (l.kind === 'placeholder') return null
        if (l.kind !== 'cache-list' || l.subs.length !== last.subs.length) {
          throw new RestoreRejected(`${subWhere}, block ${k}`, 'the layer is not the same CacheList in every block')
        }
        return l.subs[j]
      })
      const pool = restorePoolingChain(chain, subWhere)
      const ratio = Number(subMetas[j])
      if (Number.isSafeInteger(ratio) && ratio > 0) {
        const pooled = pool.elements[2] as Tensor
        const rows = pooled.shape[rowAxis(pooled, subWhere)]
        if (rows !== Math.floor(tokenCount / ratio)) {
          throw new RestoreRejected(subWhere, `${rows} pooled rows, but ${tokenCount} tokens at ratio ${ratio} make ${Math.floor(tokenCount / ratio)}`)
        }
      }
      return pool
    }
    // oMLX stamps no class name on a (keys, values) sub-state; the CacheList meta state names it.
    const subClass = sub.className ?? (Array.isArray(meta) && Array.isArray(meta[0]) ? meta[0][j] : undefined)
    if (subClass === ROTATING) checkRotating(subMetas[j], tokenCount, subWhere)
    return sub
  })
  return { kind: 'cache-list', subs }
}

/**
 * Rebuild a cache from a chain of blocks by oMLX's rules (see the file comment), or throw
 * RestoreRejected saying which layer and block make the chain unusable.
 */
export function restoreChain (chain: readonly ChainBlock[], blockSize: number): RestoredCache {
  if (chain.length === 0) throw new RestoreRejected('restore', 'no blocks to restore from')
  const types = canonicalCacheTypes(chain[0].payload.layerCacheTypes)
  for (const [k, b] of chain.entries()) {
    const theirs = canonicalCacheTypes(b.payload.layerCacheTypes)
    if (b.payload.layers.length !== types.length || theirs.length !== types.length || theirs.some((t, i) => t !== types[i])) {
      throw new RestoreRejected(`block ${k} (${b.hash})`, 'its layer types differ from the first block of the chain')
    }
  }
  // Walk back to the newest block in which every non-sliceable layer holds state.
  let end = chain.length - 1
  while (end >= 0 && chain[end].payload.layers.some((l, i) => !isSliceable(types[i]) && l.kind === 'placeholder')) end--
  if (end < 0) {
    const layer = chain[chain.length - 1].payload.layers.findIndex((l, i) => !isSliceable(types[i]) && l.kind === 'placeholder')
    throw new RestoreRejected('restore', `no block of the ${chain.length}-block chain holds the state of every non-sliceable layer (layer ${layer}, ${types[layer]}, has none in the last block)`)
  }
  const used = chain.slice(0, end + 1)
  const tokenCount = used.length * blockSize
  const lastPayload = used[used.length - 1].payload
  const layers = lastPayload.layers.map((layer, i): LayerPayload => {
    const where = `layer ${i} (${types[i]})`
    const meta = lastPayload.layerMetaStates[i]
    if (isSliceable(types[i])) return joinSliceable(used, i, where)
    if (types[i] === CACHE_LIST) {
      if (layer.kind !== 'cache-list') throw new RestoreRejected(where, `a CacheList layer holds a ${layer.kind}`)
      return restoreCacheList(used, i, tokenCount, meta, where)
    }
    if (layer.kind !== 'state') throw new RestoreRejected(where, `expected a plain state, found a ${layer.kind}`)
    if (types[i] === ROTATING) checkRotating(meta, tokenCount, where)
    return layer
  })
  if (layers.some((l) => l.kind === 'placeholder')) throw new BlockStoreError('restore', 'a placeholder survived the walk-back')
  return {
    tokenCount,
    hashes: used.map((b) => b.hash),
    walkedBack: chain.length - used.length,
    layers,
    layerCacheTypes: types,
    layerMetaStates: lastPayload.layerMetaStates,
  }
}
