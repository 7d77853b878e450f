// The compressors' position biases the builder needs (llama.cpp keeps score = gate + bias in its
// rings; we add the bias when a window pools, so blocks and caches never hold it). They come from
// the sidecar the capture was computed under: read from its weights file, only those tensors.
import { join } from 'node:path'
import { compressorPrefixes } from '../../../model/engine/attention-weights.ts'
import { SIDECAR_WEIGHTS, type SidecarJson } from '../../../wire/sidecar-format.ts'
import { PdBridgeError } from '../../../errors.ts'
import { SafetensorsFile } from '../../../formats/safetensors/index.ts'

/** Name -> values of every compressor and indexer position bias of the sidecar's layers. */
export async function readPositionBiases (sidecarDir: string, json: Pick<SidecarJson, 'layers'>): Promise<Map<string, Float32Array>> {
  const path = join(sidecarDir, SIDECAR_WEIGHTS)
  const names = json.layers.flatMap((l) => {
    const p = compressorPrefixes(l.index)
    if (l.layerType === 'sliding_attention') return []
    return l.layerType === 'compressed_sparse_attention' ? [p.compressor, p.indexer] : [p.compressor]
  }).map((base) => `${base}.position_bias`)
  const file = await SafetensorsFile.open(path)
  try {
    const out = new Map<string, Float32Array>()
    for (const name of names) {
      const info = file.tensors.get(name)
      if (info === undefined) throw new PdBridgeError(`${path}: no tensor ${name}`)
      if (info.dtype !== 'F32' || info.shape.length !== 2) throw new PdBridgeError(`${path}: ${name} is ${info.dtype} [${info.shape.join(', ')}], expected a 2-D F32 tensor`)
      const raw = await file.readRange(name, 0, info.end - info.begin)
      out.set(name, new Float32Array(raw.buffer, raw.byteOffset, raw.byteLength / 4).slice())
    }
    return out
  } finally {
    await file.close()
  }
}

/** A `vector` for ourCacheOf over those biases; any other name is an error. */
export function biasVector (biases: ReadonlyMap<string, Float32Array>): (name: string) => Float32Array {
  return (name) => {
    const v = biases.get(name)
    if (v === undefined) throw new PdBridgeError(`llama.cpp target: the sidecar holds no ${name}`)
    return v
  }
}
