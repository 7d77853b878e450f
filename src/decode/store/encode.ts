// Payload -> safetensors tensors and per-layer metadata keys, named as oMLX names them:
// layer_{i}_state_{k}, layer_{i}_sub_{j}_state_{k}, nested ..._state_{k}_state_{m}, with
// _state_count, _state_class_name, _sub_count, _none, _zero_dim and _nested markers.
import type { Tensor } from '../../formats/safetensors/index.ts'
import { BlockStoreError } from './errors.ts'
import { isTensor, type LayerPayload, type StateElement } from './payload.ts'
import { zeros } from './tensor-ops.ts'

/** One tensor to write, in write order. */
export interface NamedTensor {
  name: string
  tensor: Tensor
}

/** The tensors of a block (in oMLX's order: layer by layer, element by element) and the per-layer metadata. */
export interface EncodedLayers {
  tensors: NamedTensor[]
  metadata: Record<string, string>
}

const ONE_F32_ZERO = (): Tensor => ({ dtype: 'F32', shape: [1], data: new Uint8Array(4) })

/** "d0,d1,..." as oMLX's _encode_shape writes a shape. */
export function encodeShape (shape: readonly number[]): string {
  return shape.join(',')
}

function storeElements (out: EncodedLayers, prefix: string, elements: readonly StateElement[]): void {
  if (!Array.isArray(elements)) throw new BlockStoreError(prefix, 'state elements must be an array')
  out.metadata[`${prefix}_state_count`] = String(elements.length)
  elements.forEach((e, k) => {
    const key = `${prefix}_state_${k}`
    if (e === null) {
      // None: a float32 (1,) zero and a marker, so the reader restores None rather than zeros.
      out.tensors.push({ name: key, tensor: ONE_F32_ZERO() })
      out.metadata[`${key}_none`] = '1'
    } else if (isTensor(e)) {
      if (e.shape.some((d) => d === 0)) {
        // Zero-size dims cannot be stored; keep the dtype on a (1,) stand-in and the shape in metadata.
        out.tensors.push({ name: key, tensor: zeros(e.dtype, [1], key) })
        out.metadata[`${key}_zero_dim`] = encodeShape(e.shape)
      } else {
        out.tensors.push({ name: key, tensor: e })
      }
    } else if (e.kind === 'tuple' || e.kind === 'nstate') {
      // No tensor under the composite's own name, so a reader that does not know nesting fails closed.
      out.metadata[`${key}_nested`] = e.kind
      if (e.kind === 'nstate' && e.className) out.metadata[`${key}_state_class_name`] = e.className
      storeElements(out, key, e.elements)
    } else {
      throw new BlockStoreError(key, 'element must be a tensor, null or a nested { kind, elements }')
    }
  })
}

/** The placeholder shape: two (1,) tensors and no class name (what oMLX's restore treats as "no state"). */
export function looksLikePlaceholder (elements: readonly StateElement[], className: string | undefined): boolean {
  return !className && elements.length === 2 && elements.every((e) => e !== null && isTensor(e) && e.shape.length === 1 && e.shape[0] === 1)
}

/** Flatten every layer of a payload into tensors and metadata keys. */
export function encodeLayers (layers: readonly LayerPayload[]): EncodedLayers {
  const out: EncodedLayers = { tensors: [], metadata: {} }
  layers.forEach((layer, i) => {
    const prefix = `layer_${i}`
    if (layer.kind === 'placeholder') {
      storeElements(out, prefix, [ONE_F32_ZERO(), ONE_F32_ZERO()])
    } else if (layer.kind === 'state') {
      if (looksLikePlaceholder(layer.elements, layer.className)) {
        throw new BlockStoreError(prefix, 'a state of two (1,) tensors without a class name reads back as a placeholder; give it a class name')
      }
      if (layer.className) out.metadata[`${prefix}_state_class_name`] = layer.className
      storeElements(out, prefix, layer.elements)
    } else if (layer.kind === 'cache-list') {
      out.metadata[`${prefix}_sub_count`] = String(layer.subs.length)
      layer.subs.forEach((sub, j) => {
        const subPrefix = `${prefix}_sub_${j}`
        if (sub?.kind !== 'state') throw new BlockStoreError(subPrefix, 'a CacheList sub-cache must be a plain state')
        if (sub.className) out.metadata[`${subPrefix}_state_class_name`] = sub.className
        storeElements(out, subPrefix, sub.elements)
      })
    } else {
      throw new BlockStoreError(prefix, `unknown layer kind ${JSON.stringify((layer as { kind?: unknown }).kind)}`)
    }
  })
  return out
}
