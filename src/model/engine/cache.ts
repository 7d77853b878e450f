// Per-layer cache objects: everything a resume needs, named as transformers names it.
//   window      the last window-1 shared K=V rows (a query at t reads t-127..t; row t is its own)
//   compressor  pool entries, the tokens of the partial window (kv and gate, gate WITHOUT position
//               bias), CSA's overlap carry (Ca half of the last complete window, gate WITH bias),
//               entry count; CSA layers hold a second one for the indexer.
// The layout (which pools, their ratios and widths) is described once, in cache-layout.ts.
import { PdBridgeError } from '../../errors.ts'
import type { DeepseekV4Config, LayerType } from '../config.ts'
import { cacheLayout, poolTensorNames, type LayerCacheLayout, type PoolLayout } from './cache-layout.ts'

/** A float32 tensor of a cache dump. */
export interface DumpF32 { dtype: 'F32', shape: number[], data: Float32Array }
/** An int64 tensor of a cache dump. */
export interface DumpI64 { dtype: 'I64', shape: number[], data: BigInt64Array }
/** One tensor of a cache dump. */
export type DumpTensor = DumpF32 | DumpI64

/**
 * Rows of width `width`, appended at the end, growing by doubling. A streaming capture may move the
 * rows held so far out of memory (`spillHeld`, after storing them itself): they still count, but
 * reading one is an error. Engines never spill.
 */
export class RowStore {
  private data: Float32Array
  private rowCount = 0
  private base = 0

  constructor (readonly width: number, capacityRows = 16) {
    this.data = new Float32Array(Math.max(1, capacityRows) * width)
  }

  /** Number of rows, spilled ones included. */
  get rows (): number {
    return this.rowCount
  }

  /** Rows [0, spilledRows) have left memory. */
  get spilledRows (): number {
    return this.base
  }

  /** Row r (a view; valid until the next append). */
  row (r: number): Float32Array {
    if (r < this.base) throw new PdBridgeError(`row store: row ${r} was spilled out of memory (rows below ${this.base} are gone)`)
    const at = r - this.base
    return this.data.subarray(at * this.width, (at + 1) * this.width)
  }

  /** All rows, [rows, width] (a view; valid until the next append). */
  view (): Float32Array {
    if (this.base > 0) throw new PdBridgeError(`row store: rows below ${this.base} were spilled out of memory; only heldView() remains`)
    return this.data.subarray(0, this.rowCount * this.width)
  }

  /** The rows still in memory, [spilledRows, rows) (a view; valid until the next append or spill). */
  heldView (): Float32Array {
    return this.data.subarray(0, (this.rowCount - this.base) * this.width)
  }

  /** Append one row (copied) and return its index. */
  append (row: ArrayLike<number>): number {
    if ((this.rowCount - this.base + 1) * this.width > this.data.length) {
      const grown = new Float32Array(this.data.length * 2)
      grown.set(this.data)
      this.data = grown
    }
    this.data.set(row, (this.rowCount - this.base) * this.width)
    return this.rowCount++
  }

  /** Let the rows held now leave memory (the caller has stored heldView() elsewhere); their storage is released. */
  spillHeld (): void {
    if (this.base === this.rowCount) return
    this.base = this.rowCount
    this.data = new Float32Array(16 * this.width)
  }

  /** Bytes of the storage held now (capacity, not just rows). */
  get heldBytes (): number {
    return this.data.byteLength
  }

  /** A deep copy. */
  clone (): RowStore {
    const c = new RowStore(this.width, 1)
    c.data = this.data.slice()
    c.rowCount = this.rowCount
    c.base = this.base
    return c
  }
}

/**
 * The state of one compressor (the main one of a CSA or HCA layer, or a CSA layer's indexer):
 * ratio r, entry width `dim`, projection width `width` (2*dim with overlap, else dim).
 */
export class CompressorState {
  /** Pooled entries [entryCount, dim], rope applied. */
  readonly entries: RowStore
  /** kv and gate projections of the tokens of the current partial window, [bufferLength, width]. */
  readonly bufferKv: Float32Array
  readonly bufferGate: Float32Array
  bufferLength = 0
  /** CSA: Ca half of the last complete window's kv and gate (+ position bias), [ratio, dim]; null before one. */
  overlapKv: Float32Array | null = null
  overlapGate: Float32Array | null = null
  /**
   * CSA: the last complete window's kv and gate projections as they were buffered (both halves,
   * gate WITHOUT the position bias), [ratio, width]; null before one. oMLX's PoolingCache carries
   * exactly this (`prev_win_kv`, `prev_win_gate`), and so does llama.cpp's compressor state.
   */
  prevWindowKv: Float32Array | null = null
  prevWindowGate: Float32Array | null = null

  constructor (readonly ratio: number, readonly dim: number, readonly overlap: boolean) {
    this.entries = new RowStore(dim)
    this.bufferKv = new Float32Array(ratio * this.width)
    this.bufferGate = new Float32Array(ratio * this.width)
  }

  /** An empty state for a pool of the layout. */
  static fromLayout (pool: PoolLayout): CompressorState {
    return new CompressorState(pool.ratio, pool.dim, pool.overlap)
  }

  /** Projection width per token: 2*dim for an overlapping (ratio-4) compressor, else dim. */
  get width (): number {
    return this.overlap ? 2 * this.dim : this.dim
  }

  /** Number of pooled entries (transformers' entry_count). */
  get entryCount (): number {
    return this.entries.rows
  }

  /** Bytes this state holds now: entries' storage, buffers and carries. */
  get heldBytes (): number {
    const arrays = [this.bufferKv, this.bufferGate, this.overlapKv, this.overlapGate, this.prevWindowKv, this.prevWindowGate]
    return this.entries.heldBytes + arrays.reduce((sum, a) => sum + (a?.byteLength ?? 0), 0)
  }

  /** A deep copy. */
  clone (): CompressorState {
    const c = new CompressorState(this.ratio, this.dim, this.overlap)
    Object.assign(c, { entries: this.entries.clone() })
    c.bufferKv.set(this.bufferKv)
    c.bufferGate.set(this.bufferGate)
    c.bufferLength = this.bufferLength
    c.overlapKv = this.overlapKv?.slice() ?? null
    c.overlapGate = this.overlapGate?.slice() ?? null
    c.prevWindowKv = this.prevWindowKv?.slice() ?? null
    c.prevWindowGate = this.prevWindowGate?.slice() ?? null
    return c
  }

  /** The dump tensors under `base` (e.g. `oneshot.layers.1.compressor`); without `compressed_kv` when `pooled` is false. */
  tensors (base: string, pooled = true): Map<string, DumpTensor> {
    const out = new Map<string, DumpTensor>()
    const w = this.width
    const names = poolTensorNames(base)
    if (pooled) out.set(names.compressedKv, { dtype: 'F32', shape: [this.entryCount, this.dim], data: this.entries.view().slice() })
    out.set(names.entryCount, { dtype: 'I64', shape: [1], data: BigInt64Array.of(BigInt(this.entryCount)) })
    out.set(names.bufferKv, { dtype: 'F32', shape: [this.bufferLength, w], data: this.bufferKv.slice(0, this.bufferLength * w) })
    out.set(names.bufferGate, { dtype: 'F32', shape: [this.bufferLength, w], data: this.bufferGate.slice(0, this.bufferLength * w) })
    if (this.overlapKv !== null && this.overlapGate !== null) {
      out.set(names.overlapKv, { dtype: 'F32', shape: [this.ratio, this.dim], data: this.overlapKv.slice() })
      out.set(names.overlapGate, { dtype: 'F32', shape: [this.ratio, this.dim], data: this.overlapGate.slice() })
    }
    return out
  }
}

/** One decoder layer's cache. */
export class LayerCache {
  /** The last min(tokens, window-1) K=V rows, oldest first, [windowLength, headDim]. */
  readonly window: Float32Array
  windowLength = 0
  readonly compressor: CompressorState | null
  readonly indexer: CompressorState | null

  constructor (readonly type: LayerType, readonly headDim: number, readonly windowRowsMax: number,
    compressor: CompressorState | null, indexer: CompressorState | null) {
    this.window = new Float32Array(windowRowsMax * headDim)
    this.compressor = compressor
    this.indexer = indexer
  }

  /** An empty cache of the layout (window rows, and a compressor state per pool). */
  static fromLayout (layout: LayerCacheLayout): LayerCache {
    const pool = (name: PoolLayout['name']): CompressorState | null => {
      const p = layout.pools.find((q) => q.name === name)
      return p === undefined ? null : CompressorState.fromLayout(p)
    }
    return new LayerCache(layout.layerType, layout.headDim, layout.windowRows, pool('compressor'), pool('indexer'))
  }

  /** The last min(T, window-1) rows, oldest first (a copy). */
  windowRows (): Float32Array {
    return this.window.slice(0, this.windowLength * this.headDim)
  }

  /**
   * Keep the last window-1 rows of (held rows, then `rows` [count, headDim]): what the next call
   * needs, whatever the chunk sizes were.
   */
  pushWindow (rows: Float32Array, count: number): void {
    const d = this.headDim
    const keepNew = Math.min(count, this.windowRowsMax)
    const keepOld = Math.min(this.windowLength, this.windowRowsMax - keepNew)
    this.window.copyWithin(0, (this.windowLength - keepOld) * d, this.windowLength * d)
    this.window.set(rows.subarray((count - keepNew) * d, count * d), keepOld * d)
    this.windowLength = keepOld + keepNew
  }

  /** Bytes this layer's cache holds now. */
  get heldBytes (): number {
    return this.window.byteLength + (this.compressor?.heldBytes ?? 0) + (this.indexer?.heldBytes ?? 0)
  }

  /** A deep copy. */
  clone (): LayerCache {
    const c = new LayerCache(this.type, this.headDim, this.windowRowsMax, this.compressor?.clone() ?? null, this.indexer?.clone() ?? null)
    c.window.set(this.window)
    c.windowLength = this.windowLength
    return c
  }

  /** The dump tensors of this layer under `base` (e.g. `oneshot.layers.1`); without the pools' `compressed_kv` when `pooled` is false. */
  tensors (base: string, pooled = true): Map<string, DumpTensor> {
    const out = new Map<string, DumpTensor>()
    out.set(`${base}.window`, { dtype: 'F32', shape: [this.windowLength, this.headDim], data: this.windowRows() })
    for (const [name, state] of [['compressor', this.compressor], ['indexer', this.indexer]] as const) {
      if (state !== null) for (const [k, v] of state.tensors(`${base}.${name}`, pooled)) out.set(k, v)
    }
    return out
  }
}

/** The whole model's cache: one LayerCache per decoder layer plus the token count. A complete resume state. */
export class ModelCache {
  tokenCount = 0

  constructor (readonly layers: LayerCache[]) {}

  /** An empty cache for `cfg` (what the model's makeCache() returns). */
  static empty (cfg: DeepseekV4Config): ModelCache {
    return new ModelCache(cacheLayout(cfg.layerTypes, cfg).map((layout) => LayerCache.fromLayout(layout)))
  }

  /** Bytes the whole cache holds now (what one more sequence costs a batching decoder, besides its step buffers). */
  get heldBytes (): number {
    return this.layers.reduce((sum, l) => sum + l.heldBytes, 0)
  }

  /** A deep copy (to branch a conversation or compare resumes). */
  clone (): ModelCache {
    const c = new ModelCache(this.layers.map((l) => l.clone()))
    c.tokenCount = this.tokenCount
    return c
  }

  /**
   * Every cache tensor under `prefix` with transformers' dump names:
   * `${prefix}.layers.{i}.window`, `.{compressor|indexer}.{compressed_kv, entry_count, buffer_kv,
   * buffer_gate, overlap_kv, overlap_gate}` (overlap only for CSA, once a window completed).
   */
  tensors (prefix: string): Map<string, DumpTensor> {
    if (typeof prefix !== 'string' || prefix.length === 0) throw new PdBridgeError(`cache.tensors: prefix must be a non-empty string, got ${JSON.stringify(prefix)}`)
    const out = new Map<string, DumpTensor>()
    this.layers.forEach((layer, i) => {
      for (const [k, v] of layer.tensors(`${prefix}.layers.${i}`)) out.set(k, v)
    })
    return out
  }
}
