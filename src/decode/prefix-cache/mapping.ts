// The decoder's cache objects <-> oMLX-layout block payloads, for DeepSeek-V4. Every block holds
// the full boundary state of what cannot be sliced (window rows, pooling buffers, overlap carries)
// and only its own rows of each pool (PoolingCacheDelta). Thin: the block layout and the restore
// rules are the store's (src/decode/store); this file only says which cache array goes where.
import type { Tensor } from '../../formats/safetensors/index.ts'
import { PdBridgeError } from '../../errors.ts'
import type { DeepseekV4Config } from '../../model/config.ts'
import { DeepseekV4Engine, ModelCache, type CompressorState, type LayerCache } from '../../model/engine/index.ts'
import {
  CACHE_LIST, POOLING, POOLING_DELTA, ROTATING, RestoreRejected, deepseekV4BlockPayload, deepseekV4CacheLayout, isTensor, restoreChain,
  type BlockPayload, type ChainBlock, type LayerCacheSpec, type LayerPayload, type LayerSnapshot, type PlainState, type PoolingSnapshot,
  type RestoredCache, type StateElement,
} from '../store/index.ts'
import { loadF32, storeF32, type StorageRule } from './tensors.ts'

/** Options of `cacheToBlockPayload`. */
export interface BlockPayloadOptions {
  /** How float32 arrays are stored (default 'f32'; a DecoderPrefixCache passes its profile's rule). */
  storage?: StorageRule
}

function checkBlockPosition (blockIndex: number, blockSize: number): void {
  if (!Number.isSafeInteger(blockSize) || blockSize < 1) throw new PdBridgeError(`block payload: block size must be a positive integer, got ${String(blockSize)}`)
  if (!Number.isSafeInteger(blockIndex) || blockIndex < 0) throw new PdBridgeError(`block payload: block index must be a non-negative integer, got ${String(blockIndex)}`)
}

function checkCacheShape (cfg: DeepseekV4Config, cache: ModelCache, what: string): void {
  if (!(cache instanceof ModelCache)) throw new PdBridgeError(`${what}: expected a ModelCache, got ${cache === null ? 'null' : typeof cache}`)
  if (cache.layers.length !== cfg.numHiddenLayers) throw new PdBridgeError(`${what}: the cache has ${cache.layers.length} layers, the config ${cfg.numHiddenLayers}`)
  cache.layers.forEach((l, i) => {
    if (l.type !== cfg.layerTypes[i]) throw new PdBridgeError(`${what}: cache layer ${i} is ${l.type}, the config says ${cfg.layerTypes[i]}`)
  })
}

// A window as mlx-lm's DeepSeek-V4 RotatingKVCache holds it: keys [1, 1, rows, head_dim]; the
// values are a zero-width [1, 1, rows, 0] because K = V (attention reads the keys twice). Past the
// window mlx-lm holds at least max_size = window rows (it cannot resume a decode from fewer: its
// in-place update would grow the buffer by max_size - offset < 0), while a query reads only the last
// window-1 of them: the oldest slot is overwritten by the next decode step before attention and
// trimmed away by the next prefill chunk (harness/mlx/omlx_restore.py checks this on oMLX's model).
// We keep window-1 rows, so that slot is written as zeros.
function windowSnapshot (cfg: DeepseekV4Config, layer: LayerCache, tokenCount: number, rule: StorageRule): LayerSnapshot['rotating'] {
  const held = layer.windowLength
  const rows = tokenCount >= cfg.slidingWindow ? cfg.slidingWindow : held
  const keys = new Float32Array(rows * layer.headDim)
  keys.set(layer.windowRows(), (rows - held) * layer.headDim)
  return {
    keys: storeF32(keys, [1, 1, rows, layer.headDim], rule),
    values: { dtype: 'F32', shape: [1, 1, rows, 0], data: new Uint8Array(0) },
    offset: tokenCount,
    maxSize: cfg.slidingWindow,
  }
}

// One pool at boundary (k+1)*bs with only this block's rows [k*bs/r, (k+1)*bs/r).
function poolSnapshot (state: CompressorState, blockIndex: number, blockSize: number, rule: StorageRule, where: string): PoolingSnapshot {
  const { ratio, dim, width } = state
  const start = Math.floor(blockIndex * blockSize / ratio)
  const end = Math.floor((blockIndex + 1) * blockSize / ratio)
  if (state.entryCount !== end) throw new PdBridgeError(`${where}: ${state.entryCount} pooled entries, a boundary at token ${(blockIndex + 1) * blockSize} with ratio ${ratio} has ${end}`)
  const n = state.bufferLength
  const buffer = (data: Float32Array) => n === 0 ? null : storeF32(data.subarray(0, n * width), [1, n, width], rule)
  // oMLX's carry: the last complete window as buffered, both halves, gate without the bias.
  if (state.overlap && state.entryCount > 0 && (state.prevWindowKv === null || state.prevWindowGate === null)) {
    throw new PdBridgeError(`${where}: ${state.entryCount} complete windows but no previous window to store (a cache from before prev_window was kept?)`)
  }
  const carry = (data: Float32Array | null) => data === null ? null : storeF32(data, [1, 1, ratio, width], rule)
  return {
    bufKv: buffer(state.bufferKv),
    bufGate: buffer(state.bufferGate),
    pooled: storeF32(state.entries.view().subarray(start * dim, end * dim), [1, end - start, dim], rule),
    pooledStart: start,
    prevWinKv: carry(state.overlap ? state.prevWindowKv : null),
    prevWinGate: carry(state.overlap ? state.prevWindowGate : null),
  }
}

/**
 * Per-layer snapshots of a cache standing at the end of block `blockIndex` (tokenCount must be
 * (blockIndex + 1) * blockSize), pools holding only that block's rows: what a streaming writer
 * hands to `deepseekV4BlockPayload`.
 */
export function boundarySnapshots (cfg: DeepseekV4Config, cache: ModelCache, blockIndex: number, blockSize: number, rule: StorageRule = 'f32'): LayerSnapshot[] {
  checkBlockPosition(blockIndex, blockSize)
  checkCacheShape(cfg, cache, 'block payload')
  const boundary = (blockIndex + 1) * blockSize
  if (cache.tokenCount !== boundary) {
    throw new PdBridgeError(`block payload: block ${blockIndex} of size ${blockSize} ends at token ${boundary}, but the cache holds ${cache.tokenCount} tokens`)
  }
  return cache.layers.map((layer, i) => {
    const pools: PoolingSnapshot[] = []
    for (const [name, state] of [['compressor', layer.compressor], ['indexer', layer.indexer]] as const) {
      if (state !== null) pools.push(poolSnapshot(state, blockIndex, blockSize, rule, `layer ${i} ${name}`))
    }
    return { rotating: windowSnapshot(cfg, layer, boundary, rule), pools }
  })
}

/**
 * The block payload of block `blockIndex` (tokens [k*bs, (k+1)*bs)) from the decoder's cache at
 * its boundary: window rows, pooling buffers and overlap carries at the boundary, pooled rows as
 * this block's delta. Blocks written by the decoder and by the bridge both come from here.
 */
export function cacheToBlockPayload (cfg: DeepseekV4Config, cacheAtBoundary: ModelCache, blockIndex: number, blockSize: number, options: BlockPayloadOptions = {}): BlockPayload {
  const snapshots = boundarySnapshots(cfg, cacheAtBoundary, blockIndex, blockSize, options.storage ?? 'f32')
  return deepseekV4BlockPayload(deepseekV4CacheLayout(cfg), snapshots, { tokenCount: (blockIndex + 1) * blockSize, blockSize, pooling: 'delta' })
}

function tensorAt (s: PlainState, k: number, where: string): Tensor {
  const e: StateElement | undefined = s.elements[k]
  if (e === undefined || e === null || !isTensor(e)) throw new RestoreRejected(where, `element ${k} must be a tensor, found ${e === null ? 'None' : e === undefined ? 'nothing' : 'a nested group'}`)
  return e
}

function optionalAt (s: PlainState, k: number, where: string): Tensor | null {
  const e = s.elements[k]
  if (e === null || e === undefined) return null
  if (!isTensor(e)) throw new RestoreRejected(where, `element ${k} must be a tensor or None, found a nested group`)
  return e
}

function requireShape (t: Tensor, shape: number[], what: string): void {
  if (t.shape.length !== shape.length || t.shape.some((d, i) => d !== shape[i])) {
    throw new RestoreRejected(what, `expected shape [${shape.join(',')}], found ${t.dtype} [${t.shape.join(',')}]`)
  }
}

function sameBytes (a: Tensor, b: Tensor): boolean {
  return a.dtype === b.dtype && a.shape.join(',') === b.shape.join(',') && Buffer.from(a.data.buffer, a.data.byteOffset, a.data.byteLength).equals(Buffer.from(b.data.buffer, b.data.byteOffset, b.data.byteLength))
}

// The window: keys [1, 1, rows, head_dim] in temporal order. We keep window-1 rows; a block from a
// writer that keeps more (mlx-lm keeps max_size = window) gives its last window-1.
function restoreWindow (layer: LayerCache, s: PlainState, tokenCount: number, where: string): void {
  if (s.className !== undefined && s.className !== ROTATING) throw new RestoreRejected(where, `expected a ${ROTATING} state, found ${s.className}`)
  if (s.elements.length !== 2) throw new RestoreRejected(where, `a ${ROTATING} state has 2 elements (keys, values), found ${s.elements.length}`)
  const keys = tensorAt(s, 0, `${where} keys`)
  const values = tensorAt(s, 1, `${where} values`)
  const rows = keys.shape[2]
  requireShape(keys, [1, 1, rows, layer.headDim], `${where} keys`)
  const widthless = values.shape.length === 4 && values.shape[0] === 1 && values.shape[1] === 1 && values.shape[2] === rows && values.shape[3] === 0
  if (!widthless && !sameBytes(values, keys)) throw new RestoreRejected(`${where} values`, `DeepSeek-V4 shares one K=V row: values must be zero-width [1,1,${rows},0] or equal to the keys, found ${values.dtype} [${values.shape.join(',')}]`)
  const need = Math.min(tokenCount, layer.windowRowsMax)
  if (rows < need || rows > tokenCount) throw new RestoreRejected(`${where} keys`, `${rows} window rows, but ${tokenCount} tokens need the last ${need}`)
  const all = loadF32(keys, `${where} keys`)
  layer.window.set(all.subarray((rows - need) * layer.headDim))
  layer.windowLength = need
}

// A full-form PoolingCache (buf_kv, buf_gate, pooled, prev_win_kv, prev_win_gate) into a compressor.
function restorePool (state: CompressorState, s: PlainState, tokenCount: number, where: string): void {
  if (s.className !== POOLING) throw new RestoreRejected(where, `expected a ${POOLING} state, found ${s.className ?? 'no class name'}`)
  if (s.elements.length !== 5) throw new RestoreRejected(where, `a ${POOLING} state has 5 elements, found ${s.elements.length}`)
  const { ratio, dim, width } = state
  const entries = Math.floor(tokenCount / ratio)
  const pooled = tensorAt(s, 2, `${where} pooled`)
  requireShape(pooled, [1, entries, dim], `${where} pooled`)
  const rows = loadF32(pooled, `${where} pooled`)
  for (let r = 0; r < entries; r++) state.entries.append(rows.subarray(r * dim, (r + 1) * dim))
  const rem = tokenCount % ratio
  const bufKv = optionalAt(s, 0, `${where} buf_kv`)
  const bufGate = optionalAt(s, 1, `${where} buf_gate`)
  if (rem === 0) {
    if ((bufKv !== null && bufKv.shape[1] !== 0) || (bufGate !== null && bufGate.shape[1] !== 0)) throw new RestoreRejected(where, `${tokenCount} tokens at ratio ${ratio} leave no buffered tokens, but the block holds some`)
  } else {
    if (bufKv === null || bufGate === null) throw new RestoreRejected(where, `${tokenCount} tokens at ratio ${ratio} leave ${rem} buffered tokens, but buf_kv or buf_gate is None`)
    requireShape(bufKv, [1, rem, width], `${where} buf_kv`)
    requireShape(bufGate, [1, rem, width], `${where} buf_gate`)
    state.bufferKv.set(loadF32(bufKv, `${where} buf_kv`))
    state.bufferGate.set(loadF32(bufGate, `${where} buf_gate`))
  }
  state.bufferLength = rem
  const prevKv = optionalAt(s, 3, `${where} prev_win_kv`)
  const prevGate = optionalAt(s, 4, `${where} prev_win_gate`)
  const wantCarry = state.overlap && entries > 0
  if (!wantCarry) {
    if (prevKv !== null || prevGate !== null) throw new RestoreRejected(where, state.overlap ? 'no window is complete yet, but the block holds an overlap carry' : `a ratio-${ratio} pool has no overlap carry, but the block holds one`)
    return
  }
  if (prevKv === null || prevGate === null) throw new RestoreRejected(where, `${entries} complete windows need the overlap carry, but prev_win_kv or prev_win_gate is None`)
  // oMLX's layout: the raw previous window, both halves [1, 1, ratio, 2 dim]; the engine derives the
  // overlap carry from it (deriveOverlapCarry). Blocks this project wrote before 2026-12-01 hold the
  // carry itself, Ca half with the bias [1, 1, ratio, dim]: still read.
  const legacy = prevKv.shape[3] === dim && width !== dim
  requireShape(prevKv, [1, 1, ratio, legacy ? dim : width], `${where} prev_win_kv`)
  requireShape(prevGate, [1, 1, ratio, legacy ? dim : width], `${where} prev_win_gate`)
  if (legacy) {
    state.overlapKv = loadF32(prevKv, `${where} prev_win_kv`)
    state.overlapGate = loadF32(prevGate, `${where} prev_win_gate`)
  } else {
    state.prevWindowKv = loadF32(prevKv, `${where} prev_win_kv`)
    state.prevWindowGate = loadF32(prevGate, `${where} prev_win_gate`)
  }
}

function restoreLayer (spec: LayerCacheSpec, layer: LayerCache, restored: RestoredCache, i: number): void {
  const payload = restored.layers[i]
  const where = `layer ${i} (${spec.layerType})`
  const T = restored.tokenCount
  if (spec.cacheType === ROTATING) {
    if (payload.kind !== 'state') throw new RestoreRejected(where, `expected a ${ROTATING} state, found a ${payload.kind}`)
    restoreWindow(layer, payload, T, where)
    return
  }
  if (payload.kind !== 'cache-list' || payload.subs.length !== 1 + spec.poolRatios.length) {
    throw new RestoreRejected(where, `expected a ${CACHE_LIST} of ${1 + spec.poolRatios.length} sub-caches, found ${payload.kind === 'cache-list' ? `${payload.subs.length} sub-caches` : `a ${payload.kind}`}`)
  }
  restoreWindow(layer, payload.subs[0], T, `${where} window`)
  const states = [layer.compressor, layer.indexer].filter((s): s is CompressorState => s !== null)
  states.forEach((state, j) => {
    if (state.ratio !== spec.poolRatios[j]) throw new PdBridgeError(`${where}: the cache's pool ${j} has ratio ${state.ratio}, the config ${spec.poolRatios[j]}`)
    restorePool(state, payload.subs[1 + j], T, `${where} ${j === 0 ? 'compressor' : 'indexer'}`)
  })
}

/**
 * The decoder's ModelCache from a restored chain (store.restore / restoreChain): tokenCount is
 * the restored tokens, every array exactly the stored values. A structure the decoder cannot
 * resume from (wrong shapes, missing carries, too few window rows) is a RestoreRejected.
 */
export function modelCacheFromRestored (cfg: DeepseekV4Config, restored: RestoredCache): ModelCache {
  const specs = deepseekV4CacheLayout(cfg)
  if (restored.layers.length !== specs.length) throw new RestoreRejected('restore', `the blocks hold ${restored.layers.length} layers, the model ${specs.length}`)
  const cache = ModelCache.empty(cfg)
  cache.tokenCount = restored.tokenCount
  specs.forEach((spec, i) => restoreLayer(spec, cache.layers[i], restored, i))
  return cache
}

function widened (t: Tensor, what: string): Tensor {
  const values = loadF32(t, what)
  return { dtype: 'F32', shape: [...t.shape], data: new Uint8Array(values.buffer) }
}

/**
 * The chain with every pool's rows in one dtype. The BF16 rule is per tensor, so one block's rows of
 * a pool can be F32 while another's are BF16; joining them needs one dtype, and widening BF16 to
 * F32 is exact. Payloads that need no change are passed through untouched.
 */
export function harmonizePoolDtypes (chain: readonly ChainBlock[]): ChainBlock[] {
  if (chain.length < 2) return [...chain]
  const out = chain.map((b) => ({ hash: b.hash, payload: { ...b.payload, layers: [...b.payload.layers] } }))
  const layers = Math.min(...chain.map((b) => b.payload.layers.length)) // chain.length >= 2 here
  for (let i = 0; i < layers; i++) {
    const lists = chain.map((b) => b.payload.layers[i]).filter((l): l is Extract<LayerPayload, { kind: 'cache-list' }> => l.kind === 'cache-list')
    if (lists.length === 0) continue
    const subs = Math.min(...lists.map((l) => l.subs.length))
    for (let j = 0; j < subs; j++) {
      const pooled = (b: ChainBlock) => {
        const l = b.payload.layers[i]
        const s = l.kind === 'cache-list' ? l.subs[j] : undefined
        const e = s !== undefined && (s.className === POOLING || s.className === POOLING_DELTA) ? s.elements[2] : undefined
        return e !== undefined && e !== null && isTensor(e) ? e : undefined
      }
      const dtypes = new Set(chain.map(pooled).map((t) => t?.dtype))
      if (!(dtypes.has('F32') && dtypes.has('BF16'))) continue
      out.forEach((b, k) => {
        const t = pooled(chain[k])
        if (t?.dtype !== 'BF16') return
        const list = b.payload.layers[i] as Extract<LayerPayload, { kind: 'cache-list' }>
        const sub = list.subs[j]
        const elements = [...sub.elements]
        elements[2] = widened(t, `layer ${i} sub-cache ${j}, block ${k}`)
        const newSubs = [...list.subs]
        newSubs[j] = { ...sub, elements }
        b.payload.layers[i] = { kind: 'cache-list', subs: newSubs }
      })
    }
  }
  return out
}

/**
 * The store's restore rules (restoreChain) over a chain whose pools may mix F32 and BF16 blocks;
 * throws RestoreRejected (or the store's BlockStoreError for malformed tensors) when the blocks do
 * not make a cache.
 */
export function restoreBlocks (chain: readonly ChainBlock[], blockSize: number): RestoredCache {
  return restoreChain(harmonizePoolDtypes(chain), blockSize)
}

/**
 * Rebuild the decoder's cache from a chain of block payloads (oldest first, block k covering
 * tokens [k*bs, (k+1)*bs)) by the store's restore rules; tokenCount says how many tokens it covers
 * (fewer than the chain after a walk-back). Bit for bit the cache a native prefill leaves there.
 * Blocks that do not make a cache throw RestoreRejected or BlockStoreError (both name the layer).
 */
export function restoreCache (engineOrCfg: DeepseekV4Engine | DeepseekV4Config, payloads: readonly BlockPayload[], blockSize: number): ModelCache {
  const cfg = engineOrCfg instanceof DeepseekV4Engine ? engineOrCfg.config : engineOrCfg
  if (!Array.isArray(payloads)) throw new PdBridgeError('restoreCache: payloads must be an array of block payloads, oldest first')
  const restored = restoreBlocks(payloads.map((payload, k) => ({ hash: `block ${k}`, payload })), blockSize)
  const cache = modelCacheFromRestored(cfg, restored)
  // With the engine, the derived overlap carries too, so the cache reads as a native one.
  return engineOrCfg instanceof DeepseekV4Engine ? engineOrCfg.completeCarries(cache) : cache
}
