// Mounting a capture: the layer caches rebuilt from a capture's tensors, as a ModelCache an engine
// under the sidecar's profile can continue from (prefill the rest of the prompt, then decode).
// This is what "the decoder can mount a sealed prefix" means: nothing is recomputed, the tensors
// are placed where the cache keeps them, and their counts are checked against T'.
import { PdBridgeError } from '../errors.ts'
import { ModelCache, type DumpTensor, type LayerCache } from '../model/engine/cache.ts'
import type { CompressorState } from '../model/engine/cache.ts'
import { cacheTensorNames, type PoolTensorNames } from '../model/engine/cache-layout.ts'
import type { Sidecar } from './sidecar.ts'

function tensor (tensors: ReadonlyMap<string, DumpTensor>, name: string): DumpTensor {
  const t = tensors.get(name)
  if (t === undefined) throw new PdBridgeError(`mount: the capture has no tensor ${name}`)
  return t
}

function floats (tensors: ReadonlyMap<string, DumpTensor>, name: string, rows: number, width: number): Float32Array {
  const t = tensor(tensors, name)
  if (t.dtype !== 'F32' || t.shape.length !== 2 || t.shape[0] !== rows || t.shape[1] !== width) {
    throw new PdBridgeError(`mount: ${name} is ${t.dtype} [${t.shape.join(', ')}], expected F32 [${rows}, ${width}]`)
  }
  return t.data
}

function mountPool (tensors: ReadonlyMap<string, DumpTensor>, names: PoolTensorNames, state: CompressorState, tokens: number): void {
  const entries = Math.floor(tokens / state.ratio)
  const count = tensor(tensors, names.entryCount)
  if (count.dtype !== 'I64' || count.data[0] !== BigInt(entries)) throw new PdBridgeError(`mount: ${names.entryCount} should be ${entries} for ${tokens} tokens`)
  const pooled = floats(tensors, names.compressedKv, entries, state.dim)
  for (let r = 0; r < entries; r++) state.entries.append(pooled.subarray(r * state.dim, (r + 1) * state.dim))
  const buffered = tokens % state.ratio
  state.bufferKv.set(floats(tensors, names.bufferKv, buffered, state.width))
  state.bufferGate.set(floats(tensors, names.bufferGate, buffered, state.width))
  state.bufferLength = buffered
  if (state.overlap && entries > 0) {
    state.overlapKv = floats(tensors, names.overlapKv, state.ratio, state.dim).slice()
    state.overlapGate = floats(tensors, names.overlapGate, state.ratio, state.dim).slice()
  }
}

/**
 * A ModelCache holding `tokens` tokens, rebuilt from capture tensors named `layers.{i}...` (as
 * readCapture returns them without a prefix) for the sidecar's layers.
 */
export function mountCapture (tensors: ReadonlyMap<string, DumpTensor>, sidecar: Sidecar, tokens: number): ModelCache {
  const kv = sidecar.kvPath
  const layers: LayerCache[] = sidecar.json.layers.map(({ index }, i) => {
    const cache = kv.layers[i].makeCache()
    const names = cacheTensorNames(index)
    const rows = Math.min(tokens, cache.windowRowsMax)
    cache.window.set(floats(tensors, names.window, rows, cache.headDim))
    cache.windowLength = rows
    if (cache.compressor !== null) mountPool(tensors, names.pool('compressor'), cache.compressor, tokens)
    if (cache.indexer !== null) mountPool(tensors, names.pool('indexer'), cache.indexer, tokens)
    return cache
  })
  const cache = new ModelCache(layers)
  cache.tokenCount = tokens
  return cache
}
