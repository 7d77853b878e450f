// Block metadata + tensor list -> the payload's shape (checked without reading tensor data), then
// the payload itself. Anything the metadata does not account for is refused, so a layout this
// reader does not know fails closed instead of being half-read.
import type { Dtype, Tensor } from '../../formats/safetensors/index.ts'
import { BlockStoreError } from './errors.ts'
import { PLACEHOLDER, type LayerPayload, type PlainState, type StateElement } from './payload.ts'

/** Where one element's value comes from. */
export type ElementRef =
  | { kind: 'tensor', name: string, zeroDimShape?: number[] }
  | { kind: 'none', name: string }
  | { kind: 'nested', nested: 'tuple' | 'nstate', className?: string, elements: ElementRef[] }

/** A plain state's shape: its class name and element references. */
export interface StateRef {
  className?: string
  elements: ElementRef[]
}

/** A layer's shape. A placeholder lists the tensor names it occupies. */
export type LayerRef =
  | { kind: 'placeholder', names: string[] }
  | { kind: 'state', state: StateRef }
  | { kind: 'cache-list', subs: StateRef[] }

/** What the header says of a tensor. */
export interface TensorShape {
  dtype: Dtype
  shape: readonly number[]
}

const MAX_COUNT = 1_000_000

class Planner {
  readonly usedKeys = new Set<string>()
  readonly usedTensors = new Set<string>()

  constructor (private readonly metadata: Record<string, string>, private readonly tensors: ReadonlyMap<string, TensorShape>, private readonly file: string) {}

  has (key: string): boolean {
    return Object.prototype.hasOwnProperty.call(this.metadata, key)
  }

  take (key: string): string | undefined {
    if (!this.has(key)) return undefined
    this.usedKeys.add(key)
    return this.metadata[key]
  }

  count (key: string): number {
    const text = this.take(key) as string
    if (!/^(0|[1-9][0-9]*)$/.test(text) || Number(text) > MAX_COUNT) {
      throw new BlockStoreError(this.file, `metadata ${key} must be a count, got ${JSON.stringify(text)}`)
    }
    return Number(text)
  }

  tensor (name: string): TensorShape {
    const t = this.tensors.get(name)
    if (t === undefined) throw new BlockStoreError(this.file, `metadata describes tensor ${name} but the file has none`)
    this.usedTensors.add(name)
    return t
  }

  state (prefix: string, className: string | undefined): StateRef {
    if (!this.has(`${prefix}_state_count`)) {
      throw new BlockStoreError(this.file, `no ${prefix}_state_count (legacy keys/values layout or a payload this reader does not know)`)
    }
    const n = this.count(`${prefix}_state_count`)
    const elements: ElementRef[] = []
    for (let k = 0; k < n; k++) elements.push(this.element(`${prefix}_state_${k}`))
    return className === undefined ? { elements } : { className, elements }
  }

  element (key: string): ElementRef {
    const none = this.take(`${key}_none`)
    const nested = this.take(`${key}_nested`)
    const zeroDim = this.take(`${key}_zero_dim`)
    const markers = [none, nested, zeroDim].filter((m) => m !== undefined).length
    if (markers > 1) throw new BlockStoreError(this.file, `${key} carries more than one of _none, _nested and _zero_dim`)
    if (none !== undefined) {
      if (none !== '1') throw new BlockStoreError(this.file, `${key}_none must be "1", got ${JSON.stringify(none)}`)
      this.tensor(key)
      return { kind: 'none', name: key }
    }
    if (nested !== undefined) {
      if (nested !== 'tuple' && nested !== 'nstate') {
        throw new BlockStoreError(this.file, `${key}_nested must be "tuple" or "nstate", got ${JSON.stringify(nested)}`)
      }
      if (this.tensors.has(key)) throw new BlockStoreError(this.file, `nested element ${key} must not also be a tensor`)
      const className = nested === 'nstate' ? this.take(`${key}_state_class_name`) : undefined
      const inner = this.state(key, undefined)
      return className === undefined ? { kind: 'nested', nested, elements: inner.elements } : { kind: 'nested', nested, className, elements: inner.elements }
    }
    const t = this.tensor(key)
    if (zeroDim !== undefined) {
      if (!/^(0|[1-9][0-9]*)(,(0|[1-9][0-9]*))*$/.test(zeroDim)) {
        throw new BlockStoreError(this.file, `${key}_zero_dim must be comma-separated dimensions, got ${JSON.stringify(zeroDim)}`)
      }
      const shape = zeroDim.split(',').map(Number)
      if (!shape.includes(0)) throw new BlockStoreError(this.file, `${key}_zero_dim ${zeroDim} has no zero dimension`)
      if (t.shape.length !== 1 || t.shape[0] !== 1) throw new BlockStoreError(this.file, `zero-dim stand-in ${key} must be shape (1,), got [${t.shape.join(',')}]`)
      return { kind: 'tensor', name: key, zeroDimShape: shape }
    }
    return { kind: 'tensor', name: key }
  }
}

function isPlaceholderRef (state: StateRef, tensors: ReadonlyMap<string, TensorShape>): boolean {
  // Same test as encode's looksLikePlaceholder, on header shapes: two (1,) tensors, no class name, no markers.
  return !state.className && state.elements.length === 2 && state.elements.every((e) => {
    const shape = e.kind === 'tensor' && e.zeroDimShape === undefined ? tensors.get(e.name)?.shape : undefined
    return shape !== undefined && shape.length === 1 && shape[0] === 1
  })
}

/**
 * Check a block's per-layer metadata against its tensor list and return each layer's shape.
 * Refuses missing tensors, tensors no layer claims, `layer_*` keys no layer reads, and bad markers.
 */
export function planLayers (metadata: Record<string, string>, numLayers: number, tensors: ReadonlyMap<string, TensorShape>, file: string): LayerRef[] {
  const p = new Planner(metadata, tensors, file)
  const layers: LayerRef[] = []
  for (let i = 0; i < numLayers; i++) {
    const prefix = `layer_${i}`
    if (p.has(`${prefix}_sub_count`)) {
      if (p.has(`${prefix}_state_count`)) throw new BlockStoreError(file, `layer ${i} is both a CacheList and a plain state`)
      const subs: StateRef[] = []
      const n = p.count(`${prefix}_sub_count`)
      for (let j = 0; j < n; j++) {
        const subPrefix = `${prefix}_sub_${j}`
        subs.push(p.state(subPrefix, p.take(`${subPrefix}_state_class_name`)))
      }
      layers.push({ kind: 'cache-list', subs })
    } else {
      const state = p.state(prefix, p.take(`${prefix}_state_class_name`))
      if (isPlaceholderRef(state, tensors)) {
        layers.push({ kind: 'placeholder', names: state.elements.map((e) => (e as { name: string }).name) })
      } else {
        layers.push({ kind: 'state', state })
      }
    }
  }
  const strayTensor = [...tensors.keys()].find((name) => !p.usedTensors.has(name))
  if (strayTensor !== undefined) throw new BlockStoreError(file, `tensor ${strayTensor} belongs to no layer state`)
  const strayKey = Object.keys(metadata).find((k) => /^layer_[0-9]+_/.test(k) && !p.usedKeys.has(k))
  if (strayKey !== undefined) throw new BlockStoreError(file, `metadata ${strayKey} is not part of any layer state this reader knows`)
  return layers
}

async function materializeState (ref: StateRef, read: (name: string) => Promise<Tensor>): Promise<PlainState> {
  const elements = await materializeElements(ref.elements, read)
  return ref.className === undefined ? { kind: 'state', elements } : { kind: 'state', className: ref.className, elements }
}

async function materializeElements (refs: readonly ElementRef[], read: (name: string) => Promise<Tensor>): Promise<StateElement[]> {
  const out: StateElement[] = []
  for (const r of refs) {
    if (r.kind === 'none') {
      out.push(null)
    } else if (r.kind === 'nested') {
      const elements = await materializeElements(r.elements, read)
      out.push(r.className === undefined ? { kind: r.nested, elements } : { kind: r.nested, className: r.className, elements })
    } else if (r.zeroDimShape !== undefined) {
      const standIn = await read(r.name)
      out.push({ dtype: standIn.dtype, shape: [...r.zeroDimShape], data: new Uint8Array(0) })
    } else {
      out.push(await read(r.name))
    }
  }
  return out
}

/** Read every tensor a plan names and build the payload's layers. */
export async function materializeLayers (plan: readonly LayerRef[], read: (name: string) => Promise<Tensor>): Promise<LayerPayload[]> {
  const layers: LayerPayload[] = []
  for (const ref of plan) {
    if (ref.kind === 'placeholder') layers.push(PLACEHOLDER)
    else if (ref.kind === 'state') layers.push(await materializeState(ref.state, read))
    else {
      const subs: PlainState[] = []
      for (const s of ref.subs) subs.push(await materializeState(s, read))
      layers.push({ kind: 'cache-list', subs })
    }
  }
  return layers
}
