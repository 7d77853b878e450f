// The edges: our cache objects as the builder's input, a state file written atomically, a state
// file read and checked before anything else touches it.
import { readFileSync, renameSync, writeFileSync } from 'node:fs'
import { compressorPrefixes } from '../../../model/engine/attention-weights.ts'
import type { DumpTensor, ModelCache } from '../../../model/engine/cache.ts'
import type { OurCache } from './build.ts'
import type { LlamaCppState } from './format.ts'
import type { LlamaCppStateGeometry } from './geometry.ts'
import { checkLlamaCppState } from './guard.ts'
import { parseLlamaCppState } from './reader.ts'
import { serializeLlamaCppState } from './writer.ts'

/**
 * The builder's view of our engine's cache after `tokens`. `vector` reads a float tensor by its
 * internal name (a checkpoint's WeightStore.f32, or a sidecar's tensors: both name the position
 * biases `model.layers.{i}.self_attn.compressor[.indexer].position_bias`).
 */
export function ourCacheOf (cache: ModelCache, tokens: readonly number[], vector: (name: string) => Float32Array): OurCache {
  const tensors = new Map<string, DumpTensor>()
  for (const [k, v] of cache.tensors('cache')) tensors.set(k.slice('cache.'.length), v)
  return {
    tokens,
    tensor: (name) => tensors.get(name),
    positionBias: (layer, which) => vector(`${compressorPrefixes(layer)[which]}.position_bias`),
  }
}

/** Write `state` to `path` so it appears complete or not at all. */
export function writeStateFile (path: string, state: LlamaCppState): number {
  const bytes = serializeLlamaCppState(state)
  const tmp = `${path}.tmp-${process.pid}`
  writeFileSync(tmp, bytes)
  renameSync(tmp, path)
  return bytes.length
}

/** Parse `bytes` (or the file at `path`) and check it against `g`: the state, or a LlamaCppStateError. */
export function readCheckedState (source: string | Uint8Array, g: LlamaCppStateGeometry, file?: string): LlamaCppState {
  const bytes = typeof source === 'string' ? new Uint8Array(readFileSync(source)) : source
  const name = typeof source === 'string' ? source : file
  const state = parseLlamaCppState(bytes, name)
  checkLlamaCppState(state, g, name)
  return state
}
