// The state of one block, read from a capture: for block k (boundary b = (k+1)*bs) each layer's
// window, buffers and carries at b come from its boundary snapshot, and each pool's pooled rows
// [k*bs/r, (k+1)*bs/r) from the final pool (append-only, so those rows are final). Nothing else of
// the layer file is read. The payload is then built by the decoder's own mapping
// (prefix-cache/mapping.ts, the one its native prefillAndStore uses) on a block-local cache.
import { PdBridgeError } from '../../errors.ts'
import type { DeepseekV4Config } from '../../model/config.ts'
import { ModelCache, type CompressorState } from '../../model/engine/index.ts'
import { boundaryPrefix } from '../../wire/boundary.ts'
import { deepseekV4BlockPayload, deepseekV4CacheLayout, type BlockPayload } from '../store/index.ts'
import { boundarySnapshots, type StorageRule } from '../prefix-cache/index.ts'
import type { LayerFileReader } from './capture-files.ts'
import type { HeldBytes } from './held-bytes.ts'

/**
 * Bytes a block-local cache holds: its fixed arrays (window, buffers) as allocated, its pooled rows
 * and its carries (a RowStore's spare capacity, at most as much again as its rows, is not counted).
 */
export function blockCacheBytes (cache: ModelCache): number {
  let bytes = 0
  for (const layer of cache.layers) {
    bytes += layer.window.byteLength
    for (const s of [layer.compressor, layer.indexer]) {
      if (s === null) continue
      bytes += s.entries.view().byteLength + s.bufferKv.byteLength + s.bufferGate.byteLength
      bytes += (s.overlapKv?.byteLength ?? 0) + (s.overlapGate?.byteLength ?? 0)
      bytes += (s.prevWindowKv?.byteLength ?? 0) + (s.prevWindowGate?.byteLength ?? 0)
    }
  }
  return bytes
}

// Read rows and place them while the read is counted as held (cache part updated after placing).
async function place (file: LayerFileReader, name: string, from: number, to: number, expect: { rows: number, width: number },
  held: HeldBytes, cache: ModelCache, use: (values: Float32Array) => void): Promise<void> {
  const { values, peakBytes } = await file.readRows(name, from, to, expect)
  held.set('read', peakBytes)
  use(values)
  held.set('cache', blockCacheBytes(cache))
  held.set('read', 0)
}

async function readPool (file: LayerFileReader, layer: number, name: 'compressor' | 'indexer', state: CompressorState,
  k: number, bs: number, held: HeldBytes, cache: ModelCache): Promise<void> {
  const b = (k + 1) * bs
  const { ratio, dim, width } = state
  const at = `${boundaryPrefix(layer, b)}.${name}`
  const count = await file.readCount(`${at}.entry_count`)
  if (count !== b / ratio) throw new PdBridgeError(`${file.path}: ${at}.entry_count is ${count}, a boundary at ${b} with ratio ${ratio} has ${b / ratio}`)
  // A continued capture's file holds the pooled rows from P / ratio on (its start_token P).
  const first = Math.floor((file.meta.startToken ?? 0) / ratio)
  const entries = { rows: Math.floor(file.meta.tokens / ratio) - first, width: dim }
  await place(file, `layers.${layer}.${name}.compressed_kv`, k * bs / ratio - first, b / ratio - first, entries, held, cache, (v) => {
    for (let r = 0; r < v.length / dim; r++) state.entries.append(v.subarray(r * dim, (r + 1) * dim))
  })
  const buffered = b % ratio
  state.bufferLength = buffered
  await place(file, `${at}.buffer_kv`, 0, buffered, { rows: buffered, width }, held, cache, (v) => state.bufferKv.set(v))
  await place(file, `${at}.buffer_gate`, 0, buffered, { rows: buffered, width }, held, cache, (v) => state.bufferGate.set(v))
  const carry = state.overlap && b >= ratio
  for (const part of ['overlap_kv', 'overlap_gate', 'prev_window_kv', 'prev_window_gate']) {
    if (carry !== file.has(`${at}.${part}`)) {
      throw new PdBridgeError(`${file.path}: ${at} ${carry ? 'lacks' : 'holds'} ${part}; a boundary at ${b} with ratio ${ratio} ${carry ? 'has one' : 'has none'}`)
    }
  }
  if (carry) {
    await place(file, `${at}.overlap_kv`, 0, ratio, { rows: ratio, width: dim }, held, cache, (v) => { state.overlapKv = v.slice() })
    await place(file, `${at}.overlap_gate`, 0, ratio, { rows: ratio, width: dim }, held, cache, (v) => { state.overlapGate = v.slice() })
    await place(file, `${at}.prev_window_kv`, 0, ratio, { rows: ratio, width }, held, cache, (v) => { state.prevWindowKv = v.slice() })
    await place(file, `${at}.prev_window_gate`, 0, ratio, { rows: ratio, width }, held, cache, (v) => { state.prevWindowGate = v.slice() })
  }
}

/**
 * Block k's state as a block-local cache: every layer's window, buffers and carries at boundary
 * b = (k+1)*bs and only this block's pooled rows. Its tokenCount is bs: it stands for block k as
 * if it were block 0 (see blockPayloadFromState). `held` follows the bytes read and placed.
 */
export async function readBlockState (cfg: DeepseekV4Config, files: readonly LayerFileReader[], k: number, bs: number, held: HeldBytes): Promise<ModelCache> {
  const b = (k + 1) * bs
  const cache = ModelCache.empty(cfg)
  cache.tokenCount = bs
  for (const [i, layer] of cache.layers.entries()) {
    const file = files[i]
    if (b > file.meta.tokens) throw new PdBridgeError(`${file.path}: covers ${file.meta.tokens} tokens, block ${k} ends at ${b}`)
    const rows = Math.min(b, layer.windowRowsMax)
    layer.windowLength = rows
    await place(file, `${boundaryPrefix(i, b)}.window`, 0, rows, { rows, width: layer.headDim }, held, cache, (v) => layer.window.set(v))
    if (layer.compressor !== null) await readPool(file, i, 'compressor', layer.compressor, k, bs, held, cache)
    if (layer.indexer !== null) await readPool(file, i, 'indexer', layer.indexer, k, bs, held, cache)
  }
  return cache
}

/**
 * The payload of block k from its block-local state, through the decoder's mapping
 * (boundarySnapshots, then the store's deepseekV4BlockPayload, exactly what cacheToBlockPayload
 * does). The mapping reads a pool's rows [k*bs/r, (k+1)*bs/r) out of a cache holding every row
 * from 0; the block-local cache holds only this block's rows, so it is mapped as block 0 and the
 * snapshots are then placed at block k: the window's offset becomes b and each pool's first row
 * k*bs/r. Every array is the same; only those two positions move.
 */
export function blockPayloadFromState (cfg: DeepseekV4Config, state: ModelCache, k: number, bs: number, rule: StorageRule): BlockPayload {
  const b = (k + 1) * bs
  const snapshots = boundarySnapshots(cfg, state, 0, bs, rule)
  const specs = deepseekV4CacheLayout(cfg)
  for (const [i, snap] of snapshots.entries()) {
    snap.rotating.offset = b
    snap.pools.forEach((pool, j) => { pool.pooledStart = k * bs / specs[i].poolRatios[j] })
  }
  return deepseekV4BlockPayload(specs, snapshots, { tokenCount: b, blockSize: bs, pooling: 'delta' })
}
