// Taking boundary snapshots (the hook, at every multiple of the block size) and counting what they
// hold (the memory budget, the cache geometry). What a snapshot is and how a layer file names its
// tensors is the wire format, src/wire/boundary.ts.
import { PdBridgeError } from '../errors.ts'
import type { CompressorState, LayerCache } from '../model/engine/cache.ts'
import type { BoundarySnapshot, PoolBoundary } from '../wire/boundary.ts'
import type { LayerGeometry } from './payload.ts'

function poolBoundary (name: PoolBoundary['name'], s: CompressorState): PoolBoundary {
  const n = s.bufferLength
  return {
    name,
    ratio: s.ratio,
    dim: s.dim,
    width: s.width,
    entryCount: s.entryCount,
    bufferLength: n,
    bufferKv: s.bufferKv.slice(0, n * s.width),
    bufferGate: s.bufferGate.slice(0, n * s.width),
    overlapKv: s.overlapKv?.slice() ?? null,
    overlapGate: s.overlapGate?.slice() ?? null,
    prevWindowKv: s.prevWindowKv?.slice() ?? null,
    prevWindowGate: s.prevWindowGate?.slice() ?? null,
  }
}

/** Copy what a block needs of `layer` standing at `boundary` (its window, buffers and carries). */
export function takeBoundarySnapshot (layer: LayerCache, boundary: number): BoundarySnapshot {
  const pools: PoolBoundary[] = []
  if (layer.compressor !== null) pools.push(poolBoundary('compressor', layer.compressor))
  if (layer.indexer !== null) pools.push(poolBoundary('indexer', layer.indexer))
  return { boundary, headDim: layer.headDim, windowLength: layer.windowLength, window: layer.windowRows(), pools }
}

/** Float values of one snapshot at `boundary` (entry counts not included): what it holds in memory and in a file. */
export function boundarySnapshotValues (g: LayerGeometry, boundary: number): number {
  let values = Math.min(boundary, g.windowRows) * g.headDim
  for (const p of g.pools) {
    const width = p.overlap ? 2 * p.dim : p.dim
    values += (boundary % p.ratio) * width * 2
    // the overlap carry [ratio, dim] and the previous window [ratio, 2 dim], kv and gate each
    if (p.overlap && boundary >= p.ratio) values += 2 * p.ratio * p.dim + 2 * p.ratio * width
  }
  return values
}

/** The boundaries in (0, n]: every multiple of `blockSize` up to n. */
export function boundariesUpTo (n: number, blockSize: number): number[] {
  if (!Number.isSafeInteger(blockSize) || blockSize < 1) throw new PdBridgeError(`boundary snapshots: block size must be a positive integer, got ${String(blockSize)}`)
  const out: number[] = []
  for (let b = blockSize; b <= n; b += blockSize) out.push(b)
  return out
}

/** Float values of every snapshot a layer holds after n tokens with snapshots every `blockSize` (0 without). */
export function layerSnapshotValues (g: LayerGeometry, n: number, blockSize: number | undefined): number {
  if (blockSize === undefined) return 0
  let values = 0
  for (const b of boundariesUpTo(n, blockSize)) values += boundarySnapshotValues(g, b)
  return values
}
