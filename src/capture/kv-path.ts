// The engine's kv path, built from a sidecar's exported tensors instead of a checkpoint: the same
// Attention objects the engine builds (src/model/engine/attention.ts), from the sidecar's weights
// (the query side absent), its sizes, rope pair and profile, so their `updateCache` computes the
// same bits. Nothing of the pooling math or the weight names is repeated here.
import { PdBridgeError } from '../errors.ts'
import type { Tensor } from '../formats/safetensors/index.ts'
import { viewAs } from '../formats/safetensors/index.ts'
import { matmulBf16, matmulF32 } from '../kernels/index.ts'
import { Attention, type AttentionShape } from '../model/engine/attention.ts'
import type { WeightSource } from '../model/engine/attention-weights.ts'
import { modelNumerics } from '../model/engine/numerics.ts'
import type { MatmulOrder } from '../model/profiles/index.ts'
import type { Linear } from '../model/weights/index.ts'
import { sidecarRope, type SidecarJson } from '../wire/sidecar-format.ts'
import { buildMlxCpuKvPath } from './mlx-cpu/kv-path.ts'

import type { KvPathModel } from './kv-path-model.ts'
export type { KvPathLayer, KvPathModel } from './kv-path-model.ts'

/**
 * A Linear over held weight values, computed exactly as prepareWeights' PreparedLinear does: bf16
 * codes through matmulBf16, float32 values through matmulF32, in the profile's order.
 */
export function heldLinear (t: Tensor, order: MatmulOrder, name: string): Linear {
  if (t.shape.length !== 2) throw new PdBridgeError(`sidecar tensor ${name}: expected a 2-D [out, in] weight, found shape [${t.shape.join(', ')}]`)
  const [rows, cols] = t.shape
  const opts = { order }
  if (t.dtype === 'BF16') {
    const codes = viewAs(t, 'BF16')
    return { inFeatures: cols, outFeatures: rows, apply: (x, m, out) => matmulBf16(x, m, cols, codes, rows, out, opts) }
  }
  if (t.dtype === 'F32') {
    const values = viewAs(t, 'F32')
    return { inFeatures: cols, outFeatures: rows, apply: (x, m, out) => matmulF32(x, m, cols, values, rows, out, opts) }
  }
  throw new PdBridgeError(`sidecar tensor ${name}: expected a BF16 or F32 weight, found ${t.dtype}`)
}

/** The sidecar's tensors (name -> tensor, already shape-checked) as a weight source, in the profile's matmul order. */
function sidecarWeights (tensors: ReadonlyMap<string, Tensor>, order: MatmulOrder): WeightSource {
  const get = (name: string): Tensor => {
    const t = tensors.get(name)
    if (t === undefined) throw new PdBridgeError(`sidecar weights: no tensor ${name}`)
    return t
  }
  return {
    linear: (name) => heldLinear(get(name), order, name),
    vector: (name) => Float32Array.from(viewAs(get(name), 'F32')),
  }
}

/**
 * Assemble the kv path of `json` from its weights (tensor name -> tensor, already shape-checked;
 * `metadata`: the weights file's): the decoder profile's own, or MLX's arithmetic when the
 * sidecar's cache math is mlx-cpu.
 */
export function buildKvPath (json: SidecarJson, tensors: ReadonlyMap<string, Tensor>, metadata: Record<string, string> = {}): KvPathModel {
  if (json.cacheMath !== undefined) return buildMlxCpuKvPath(json, tensors, metadata)
  const profile = json.profile
  const source = sidecarWeights(tensors, profile.matmulOrder)
  const numerics = modelNumerics(profile, { rope: sidecarRope(json), headDim: json.headDim, ropeDim: json.ropeDim })
  // The kv path reads headDim, ropeDim, rmsEps (and nothing of the query side, left at 0).
  const shape: AttentionShape = {
    heads: 0, headDim: json.headDim, ropeDim: json.ropeDim, oGroups: 0, oLoraRank: 0, window: json.slidingWindow,
    rmsEps: json.rmsNormEps, indexHeads: 0, indexHeadDim: json.indexHeadDim, indexTopk: 0,
  }
  const layers = json.layers.map(({ index, layerType }) => Attention.build(source, 'kv-path-only', index, layerType, shape, json, numerics))
  return { profile, layers, hiddenSize: json.hiddenSize, maxPositionEmbeddings: json.maxPositionEmbeddings }
}
