// The capture's kv path of an mlx-cpu sidecar: one MlxCpuKvLayer per layer over the sidecar's
// MLX-layout weights, computing with the rounding points the sidecar records.
import { PdBridgeError } from '../../errors.ts'
import type { Tensor } from '../../formats/safetensors/index.ts'
import type { SidecarJson } from '../../wire/sidecar-format.ts'
import type { KvPathModel } from '../kv-path-model.ts'
import { mlxCpuCacheConfigFromSidecar } from './config.ts'
import { MlxCpuKvLayer } from './kv-layer.ts'
import { mlxCpuCacheWeightsFromTensors } from './weights.ts'

export function buildMlxCpuKvPath (json: SidecarJson, tensors: ReadonlyMap<string, Tensor>, metadata: Record<string, string>): KvPathModel {
  const math = json.cacheMath
  if (math?.name !== 'mlx-cpu') throw new PdBridgeError(`sidecar: cache math ${JSON.stringify(math?.name)} is not mlx-cpu`)
  const cfg = mlxCpuCacheConfigFromSidecar(json, math.rounding)
  const weights = mlxCpuCacheWeightsFromTensors(metadata, tensors)
  if (weights.layers.length !== json.layers.length) throw new PdBridgeError(`sidecar: the weights hold ${weights.layers.length} layers, sidecar.json ${json.layers.length}`)
  const layers = json.layers.map(({ index, layerType }) => new MlxCpuKvLayer(weights.layers[index], cfg, index, layerType, json))
  return { profile: json.profile, layers, hiddenSize: json.hiddenSize, maxPositionEmbeddings: json.maxPositionEmbeddings }
}
