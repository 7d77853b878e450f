// Boundary snapshots: what a decoder block needs at its boundary b = (k+1)*blockSize that the
// capture's final state (at T') no longer holds. A block stores the full boundary state of every
// layer's window (its last window-1 rows before b) and of each pool's partial-window buffers and
// overlap carry at b; its pooled rows need no snapshot, because pools are append-only (the rows
// below b/r are the same rows in the final state). So at every multiple b of the block size the hook
// copies exactly those arrays, and a layer file stores them under `layers.{i}.boundary.{b}.*`.
// This is the snapshot's shape and its tensor names, which the block writer reads back; taking a
// snapshot and counting its values is the capture's (src/capture/boundary.ts).
import type { DumpTensor } from '../model/engine/cache.ts'

/** One pool's state at a boundary, without its pooled rows. */
export interface PoolBoundary {
  /** 'compressor' (the main pool) or 'indexer' (a CSA layer's indexer pool). */
  name: 'compressor' | 'indexer'
  ratio: number
  dim: number
  /** Projection width per buffered token: 2*dim with overlap, else dim. */
  width: number
  /** Pooled entries at the boundary: floor(b / ratio). */
  entryCount: number
  /** Buffered tokens at the boundary: b mod ratio. */
  bufferLength: number
  /** [bufferLength, width] each (copies). */
  bufferKv: Float32Array
  bufferGate: Float32Array
  /** [ratio, dim] each (copies), or null before the first complete window and in pools without overlap. */
  overlapKv: Float32Array | null
  overlapGate: Float32Array | null
  /** The last complete window as buffered, both halves, gate without bias, [ratio, width] (copies); null as above. */
  prevWindowKv: Float32Array | null
  prevWindowGate: Float32Array | null
}

/** One layer's state at boundary `boundary`, without pooled rows. */
export interface BoundarySnapshot {
  /** The boundary position b (tokens [0, b) are in the state). */
  boundary: number
  headDim: number
  /** Window rows held: min(b, window - 1). */
  windowLength: number
  /** [windowLength, headDim], oldest first (a copy). */
  window: Float32Array
  pools: PoolBoundary[]
}

/** The name prefix of layer `layer`'s snapshot at `boundary`: `layers.{i}.boundary.{b}`. */
export function boundaryPrefix (layer: number, boundary: number): string {
  return `layers.${layer}.boundary.${boundary}`
}

/**
 * A snapshot's tensors under `layers.{i}.boundary.{b}.`: `window` [rows, head_dim] and, per pool,
 * `{compressor|indexer}.{entry_count, buffer_kv, buffer_gate}` plus `overlap_kv`/`overlap_gate`
 * when the pool holds a carry (ModelCache.tensors' names without `compressed_kv`), and the raw
 * previous window `prev_window_kv`/`prev_window_gate` [ratio, width] that oMLX's blocks store.
 */
export function boundaryTensors (layer: number, snap: BoundarySnapshot): Map<string, DumpTensor> {
  const base = boundaryPrefix(layer, snap.boundary)
  const out = new Map<string, DumpTensor>()
  out.set(`${base}.window`, { dtype: 'F32', shape: [snap.windowLength, snap.headDim], data: snap.window })
  for (const p of snap.pools) {
    const at = `${base}.${p.name}`
    out.set(`${at}.entry_count`, { dtype: 'I64', shape: [1], data: BigInt64Array.of(BigInt(p.entryCount)) })
    out.set(`${at}.buffer_kv`, { dtype: 'F32', shape: [p.bufferLength, p.width], data: p.bufferKv })
    out.set(`${at}.buffer_gate`, { dtype: 'F32', shape: [p.bufferLength, p.width], data: p.bufferGate })
    if (p.overlapKv !== null && p.overlapGate !== null) {
      out.set(`${at}.overlap_kv`, { dtype: 'F32', shape: [p.ratio, p.dim], data: p.overlapKv })
      out.set(`${at}.overlap_gate`, { dtype: 'F32', shape: [p.ratio, p.dim], data: p.overlapGate })
    }
    if (p.prevWindowKv !== null && p.prevWindowGate !== null) {
      out.set(`${at}.prev_window_kv`, { dtype: 'F32', shape: [p.ratio, p.width], data: p.prevWindowKv })
      out.set(`${at}.prev_window_gate`, { dtype: 'F32', shape: [p.ratio, p.width], data: p.prevWindowGate })
    }
  }
  return out
}
