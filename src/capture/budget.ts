// The memory budget rule. A capture holds, per layer not yet written, that layer's cache; a layer
// is written and released the moment it reaches the sealed length. Before the capture grows past
// the furthest position any layer has reached (a "growth step": in a sequential forward, layer 0
// taking the next chunk), the peak of the round that follows is projected exactly, assuming the
// layers take it in ascending order (every forward does: layer i+1's input is layer i's output):
//   not final:  each layer grows from its position to n and stays held;
//   final:      n is the sealed length, so each layer is written and released once it reaches n.
// If that peak passes the budget, the capture seals at the largest n that fits: n is never below
// the furthest position already reached, so every layer can still reach it, and the cut makes
// the round final. Sizes are in-memory float32 bytes of the caches (payload.ts counts the values)
// plus the boundary snapshots a layer holds until it is written (boundary.ts). A streaming layer
// (`spilled`) holds only its resident state between feeds, plus the pooled rows of the feed under
// way, which go to the spill when the feed returns; its snapshots go there the moment they are taken.
import { layerSnapshotValues } from './boundary.ts'
import { layerPooledValues, layerResidentValues, layerStateValues, type LayerGeometry } from './payload.ts'

/** Bytes a held float32 cache value takes in memory. */
export const HELD_BYTES_PER_VALUE = 4

/**
 * The live layers of a capture: geometry and position (and the snapshot interval when the layer
 * keeps boundary snapshots), or null once written and released.
 */
export type LiveLayer = { geometry: LayerGeometry, position: number, blockSize?: number, spilled?: boolean } | null

/**
 * Float values a live layer holds at n tokens: its cache plus its boundary snapshots; a streaming
 * layer its resident state plus the pooled rows made since its position.
 */
function valuesAt (l: NonNullable<LiveLayer>, n: number): number {
  if (l.spilled === true) return layerResidentValues(l.geometry, n) + layerPooledValues(l.geometry, n) - layerPooledValues(l.geometry, l.position)
  return layerStateValues(l.geometry, n) + layerSnapshotValues(l.geometry, n, l.blockSize)
}

/** Bytes held now by the live layers. */
export function heldBytes (layers: readonly LiveLayer[]): number {
  let values = 0
  for (const l of layers) if (l !== null) values += valuesAt(l, l.position)
  return values * HELD_BYTES_PER_VALUE
}

/**
 * The peak bytes held while every live layer, in ascending order, goes from its position to n
 * (n at least every position); with `final`, each is released when it gets there.
 */
export function roundPeak (layers: readonly LiveLayer[], n: number, final: boolean): number {
  let running = 0
  for (const l of layers) if (l !== null) running += valuesAt(l, l.position)
  let peak = running
  for (const l of layers) {
    if (l === null) continue
    const at = valuesAt(l, n)
    running += at - valuesAt(l, l.position)
    if (running > peak) peak = running
    if (final) running -= at
  }
  return peak * HELD_BYTES_PER_VALUE
}

/**
 * Where a round from `frontier` (the furthest position reached) towards `to` should end under
 * `budget` bytes, given the current sealed length: `to` when its projected peak fits (final when
 * to == sealedLength), else the largest n in [frontier, to) whose final round fits, else frontier.
 */
export function sealPoint (layers: readonly LiveLayer[], frontier: number, to: number, sealedLength: number, budget: number): number {
  if (roundPeak(layers, to, to >= sealedLength) <= budget) return to
  for (let n = to - 1; n > frontier; n--) {
    if (roundPeak(layers, n, true) <= budget) return n
  }
  return frontier
}
