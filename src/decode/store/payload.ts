// What one block holds, layer by layer, in oMLX's payload model: per layer a plain state (a list of
// elements with an optional class name), a CacheList (a list of sub-states), or a placeholder for a
// layer with no state in this block. Engine cache objects map onto this with one thin function.
import type { Tensor } from '../../formats/safetensors/index.ts'
import type { JsonValue } from '../../wire/python-json.ts'

/** A composite element: a bare tuple, or an `__nstate__` marker with an optional class name. */
export interface NestedElements {
  kind: 'tuple' | 'nstate'
  className?: string
  elements: StateElement[]
}

/** One element of a state: a tensor, a Python None (null), or a nested group of elements. */
export type StateElement = Tensor | null | NestedElements

/** A plain per-layer (or per-sub-cache) state: N elements and, usually, the cache class name. */
export interface PlainState {
  kind: 'state'
  className?: string
  elements: StateElement[]
}

/** A CacheList layer: one plain state per sub-cache, in sub-cache order. */
export interface CacheListState {
  kind: 'cache-list'
  subs: PlainState[]
}

/** A layer with no real state in this block (oMLX writes two float32 (1,) zeros). */
export interface Placeholder {
  kind: 'placeholder'
}

/** One layer of a block. */
export type LayerPayload = PlainState | CacheListState | Placeholder

/**
 * Everything a block file holds besides its keying metadata: one payload, one cache type name and
 * one meta state (mlx-lm's `meta_state`, as JSON) per cache layer.
 */
export interface BlockPayload {
  layers: LayerPayload[]
  layerCacheTypes: string[]
  layerMetaStates: JsonValue[]
}

/** The placeholder layer. */
export const PLACEHOLDER: Placeholder = Object.freeze({ kind: 'placeholder' })

/** A plain state with `elements` and, when given, a class name. */
export function plainState (elements: StateElement[], className?: string): PlainState {
  return className === undefined ? { kind: 'state', elements } : { kind: 'state', className, elements }
}

/** A CacheList layer. */
export function cacheList (subs: PlainState[]): CacheListState {
  return { kind: 'cache-list', subs }
}

/** Whether an element is a tensor (not None, not nested). */
export function isTensor (e: StateElement): e is Tensor {
  return e !== null && !('kind' in e)
}

/** Whether a plain state or sub-state is a PoolingCache in delta form (6 elements, row range last). */
export function isPoolingDelta (s: PlainState): boolean {
  return s.className === 'PoolingCacheDelta'
}

/** Whether any layer of the payload holds a PoolingCache delta (such blocks are format "4"). */
export function holdsPoolingDelta (layers: readonly LayerPayload[]): boolean {
  return layers.some((l) => (l.kind === 'cache-list' && l.subs.some(isPoolingDelta)) || (l.kind === 'state' && isPoolingDelta(l)))
}
