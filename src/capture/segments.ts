// Block segments on the capture side (the format is src/wire/segment-file.ts): while the engine
// runs, the session hands each layer's new boundary snapshots and new pooled rows here, and after
// every chunk `publishReady` writes one segment per block whose boundary every layer has passed
// (atomic), then lists it in segments.json. What is held until then is one chunk's pooled rows and
// the snapshots of boundaries not yet passed by every layer; a published block's share is released.
import { join } from 'node:path'
import { PdBridgeError } from '../errors.ts'
import { serializeSafetensors, type Tensor } from '../formats/safetensors/index.ts'
import { poolTensorNames } from '../model/engine/cache-layout.ts'
import type { LayerCache } from '../model/engine/cache.ts'
import { boundaryTensors, type BoundarySnapshot } from '../wire/boundary.ts'
import { fileTensor, writeFileAtomicSync } from '../wire/layer-file.ts'
import { sha256Hex } from '../wire/manifest.ts'
import { encodeSegmentIndex, segmentFileMetadata, segmentFileName, SEGMENT_INDEX_FILE, SEGMENT_INDEX_FORMAT, type SegmentEntry } from '../wire/segment-file.ts'

/** One pool's rows not yet published, from row `first` on. */
class PendingRows {
  private buf: Float32Array
  private rows = 0
  /** Rows the pool had when last looked at (spilled ones included). */
  seen: number

  constructor (readonly name: 'compressor' | 'indexer', readonly ratio: number, readonly dim: number, seen: number) {
    this.seen = seen
    this.buf = new Float32Array(16 * dim)
  }

  add (values: Float32Array): void {
    const need = (this.rows * this.dim) + values.length
    if (need > this.buf.length) {
      const grown = new Float32Array(Math.max(need, this.buf.length * 2))
      grown.set(this.buf.subarray(0, this.rows * this.dim))
      this.buf = grown
    }
    this.buf.set(values, this.rows * this.dim)
    this.rows += values.length / this.dim
  }

  /** The first n rows (a copy), dropped from here. */
  take (n: number): Float32Array {
    if (n > this.rows) throw new PdBridgeError(`block segments: the ${this.name} pool holds ${this.rows} unpublished rows, a block needs ${n}`)
    const out = this.buf.slice(0, n * this.dim)
    this.buf.copyWithin(0, n * this.dim, this.rows * this.dim)
    this.rows -= n
    return out
  }

  get heldBytes (): number {
    return this.buf.byteLength
  }
}

/** What a segment publisher writes for: the capture, its layers' pools, the file's dtype rule. */
export interface SegmentPublisherOptions {
  dir: string
  requestId: string
  blockSize: number
  /** P / bs for a continued capture, else 0. */
  firstBlock: number
  fingerprint: string
  profile: string
  /** Floats in BF16 when every value of a tensor is a bf16 value (the layer files' rule). */
  bf16: boolean
  /** Each layer's cache at the start (its pools' shapes and row counts). */
  layers: readonly LayerCache[]
}

/** Publishes block segments of one capture as every layer passes each boundary. */
export class SegmentPublisher {
  private readonly snaps: BoundarySnapshot[][]
  private readonly snapsSeen: number[]
  private readonly pools: PendingRows[][]
  private readonly landed: SegmentEntry[] = []
  private writeMs = 0

  constructor (private readonly o: SegmentPublisherOptions) {
    this.snaps = o.layers.map(() => [])
    this.snapsSeen = o.layers.map(() => 0)
    this.pools = o.layers.map((l) => {
      const out: PendingRows[] = []
      if (l.compressor !== null) out.push(new PendingRows('compressor', l.compressor.ratio, l.compressor.dim, l.compressor.entries.rows))
      if (l.indexer !== null) out.push(new PendingRows('indexer', l.indexer.ratio, l.indexer.dim, l.indexer.entries.rows))
      return out
    })
  }

  /** A boundary snapshot layer `layer` just took (a streaming session hands them one by one). */
  addSnapshot (layer: number, snap: BoundarySnapshot): void {
    this.snaps[layer].push(snap)
  }

  /**
   * After a feed of layer `layer`: its new snapshots (from `all`, the hook's list, when it keeps
   * them; those past the ones seen) and its pools' new rows (still in memory: call before they spill).
   */
  take (layer: number, all: readonly BoundarySnapshot[] | null, state: LayerCache): void {
    if (all !== null) {
      for (const s of all.slice(this.snapsSeen[layer])) this.snaps[layer].push(s)
      this.snapsSeen[layer] = all.length
    }
    for (const p of this.pools[layer]) {
      const store = (p.name === 'compressor' ? state.compressor : state.indexer)?.entries
      if (store === undefined) throw new PdBridgeError(`block segments: layer ${layer} has no ${p.name} pool`)
      if (store.rows === p.seen) continue
      const held = store.heldView()
      const from = (p.seen - store.spilledRows) * p.dim
      if (from < 0) throw new PdBridgeError(`block segments: layer ${layer}'s ${p.name} rows from ${p.seen} left memory before they were published`)
      p.add(held.subarray(from))
      p.seen = store.rows
    }
  }

  /** Blocks published so far. */
  get published (): number {
    return this.landed.length
  }

  /** Milliseconds spent writing segments. */
  get ms (): number {
    return this.writeMs
  }

  /** Bytes held for blocks not yet published. */
  get heldBytes (): number {
    let bytes = 0
    for (const layer of this.pools) for (const p of layer) bytes += p.heldBytes
    for (const layer of this.snaps) {
      for (const s of layer) {
        bytes += s.window.byteLength
        for (const p of s.pools) bytes += p.bufferKv.byteLength + p.bufferGate.byteLength + 2 * (p.overlapKv?.byteLength ?? 0) + 2 * (p.prevWindowKv?.byteLength ?? 0)
      }
    }
    return bytes
  }

  /** Write a segment for every block whose boundary every layer has passed, up to `limit` tokens; the count. */
  publishReady (limit: number): number {
    const t0 = performance.now()
    const bs = this.o.blockSize
    let n = 0
    for (;;) {
      const k = this.o.firstBlock + this.landed.length
      const b = (k + 1) * bs
      if (b > limit || !this.snaps.every((s) => s[0]?.boundary === b)) break
      this.publish(k)
      n++
    }
    this.writeMs += performance.now() - t0
    return n
  }

  private publish (k: number): void {
    const bs = this.o.blockSize
    const tensors = new Map<string, Tensor>()
    this.snaps.forEach((queue, i) => {
      const snap = queue.shift() as BoundarySnapshot
      for (const [name, t] of boundaryTensors(i, snap)) tensors.set(name, fileTensor(t, this.o.bf16))
      for (const p of this.pools[i]) {
        const rows = bs / p.ratio
        tensors.set(poolTensorNames(`layers.${i}.${p.name}`).compressedKv, fileTensor({ dtype: 'F32', shape: [rows, p.dim], data: p.take(rows) }, this.o.bf16))
      }
    })
    const bytes = serializeSafetensors(tensors, segmentFileMetadata({ block: k, blockSize: bs, fingerprint: this.o.fingerprint, profile: this.o.profile, numLayers: this.snaps.length }))
    const file = segmentFileName(k)
    writeFileAtomicSync(join(this.o.dir, file), bytes)
    this.landed.push({ block: k, file, bytes: bytes.length, sha256: sha256Hex(bytes) })
    // Listed only after it landed; the index is replaced whole.
    writeFileAtomicSync(join(this.o.dir, SEGMENT_INDEX_FILE), encodeSegmentIndex({
      format: SEGMENT_INDEX_FORMAT, requestId: this.o.requestId, blockSize: bs, firstBlock: this.o.firstBlock, segments: this.landed,
    }))
  }
}
