// A block payload's fingerprint: SHA-256 over every layer's structure (kinds, class names, element
// order, None markers) and every tensor's dtype, shape and bytes, plus the cache types and meta
// states. The writer keeps this instead of the payload, so verifying a block after it was released
// needs 32 bytes per block, and a block read back matches only if every bit is the one built.
import { createHash, type Hash } from 'node:crypto'
import { isTensor, type BlockPayload, type PlainState, type StateElement } from '../store/index.ts'

function element (h: Hash, e: StateElement): void {
  if (e === null) {
    h.update('N;')
    return
  }
  if (isTensor(e)) {
    h.update(`T${e.dtype}[${e.shape.join(',')}]${e.data.byteLength};`)
    h.update(e.data)
    return
  }
  h.update(`G${e.kind}:${e.className ?? ''}:${e.elements.length};`)
  for (const x of e.elements) element(h, x)
}

function state (h: Hash, s: PlainState): void {
  h.update(`S${s.className ?? ''}:${s.elements.length};`)
  for (const e of s.elements) element(h, e)
}

/** Hex SHA-256 of everything a block payload holds (see the file comment). */
export function payloadDigest (p: BlockPayload): string {
  const h = createHash('sha256')
  h.update(JSON.stringify({ types: p.layerCacheTypes, metas: p.layerMetaStates }))
  for (const layer of p.layers) {
    if (layer.kind === 'placeholder') h.update('P;')
    else if (layer.kind === 'state') state(h, layer)
    else {
      h.update(`L${layer.subs.length};`)
      for (const s of layer.subs) state(h, s)
    }
  }
  return h.digest('hex')
}

/** Bytes of tensor data a payload holds. */
export function payloadTensorBytes (p: BlockPayload): number {
  let bytes = 0
  const walk = (e: StateElement): void => {
    if (e === null) return
    if (isTensor(e)) bytes += e.data.byteLength
    else e.elements.forEach(walk)
  }
  for (const layer of p.layers) {
    if (layer.kind === 'state') layer.elements.forEach(walk)
    else if (layer.kind === 'cache-list') for (const s of layer.subs) s.elements.forEach(walk)
  }
  return bytes
}
