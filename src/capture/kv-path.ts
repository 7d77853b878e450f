// The engine's kv path, assembled from a sidecar's exported tensors instead of a checkpoint: the
// same AttentionWeights, AttentionShape, rope tables, activation rounding and reference-quant hooks
// the engine builds, so `updateLayerCache` (src/model/engine/attention.ts) computes the same bits.
// The pooling math is not repeated here; only the inputs of that one function are put together.
import { PdBridgeError } from '../errors.ts'
import type { Tensor } from '../formats/safetensors/index.ts'
import { viewAs } from '../formats/safetensors/index.ts'
import { matmulBf16, matmulF32 } from '../kernels/index.ts'
import { activationRounding, type ActivationRounding } from '../model/engine/activation.ts'
import type { AttentionShape, AttentionWeights, CacheQuantHooks, CompressorWeights } from '../model/engine/attention.ts'
import { CompressorState, LayerCache } from '../model/engine/cache.ts'
import { RopeTables } from '../model/engine/rope-tables.ts'
import { referenceQuantHooks, type MatmulOrder, type NumericsProfile } from '../model/profiles/index.ts'
import type { Linear } from '../model/weights/index.ts'
import { compressorPrefixes } from './kv-weights.ts'
import { sidecarRope, type SidecarJson } from '../wire/sidecar-format.ts'

/** Everything `updateLayerCache` needs, per layer and shared. */
export interface KvPathModel {
  profile: NumericsProfile
  layers: AttentionWeights[]
  shape: AttentionShape
  rope: RopeTables
  act: ActivationRounding
  quant: CacheQuantHooks | null
  hiddenSize: number
  maxPositionEmbeddings: number
  /** An empty cache for layer i, shaped as ModelCache.empty shapes it. */
  newLayerCache: (layer: number) => LayerCache
}

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

// The attention block's other weights are not in a sidecar: the kv path never reads them, and if
// it ever did, this says so instead of computing with something made up.
function absentLinear (name: string): Linear {
  const refuse = (): never => { throw new PdBridgeError(`capture: ${name} is not in the sidecar; the kv path must not read it`) }
  return { inFeatures: 0, outFeatures: 0, apply: refuse }
}

/** Assemble the kv path of `json` from its weights (tensor name -> tensor, already shape-checked). */
export function buildKvPath (json: SidecarJson, tensors: ReadonlyMap<string, Tensor>): KvPathModel {
  const profile = json.profile
  const order = profile.matmulOrder
  const get = (name: string): Tensor => {
    const t = tensors.get(name)
    if (t === undefined) throw new PdBridgeError(`sidecar weights: no tensor ${name}`)
    return t
  }
  const linear = (name: string): Linear => heldLinear(get(name), order, name)
  const vector = (name: string): Float32Array => Float32Array.from(viewAs(get(name), 'F32'))
  const compressor = (base: string): CompressorWeights => ({
    kv: linear(`${base}.kv_proj.weight`),
    gate: linear(`${base}.gate_proj.weight`),
    positionBias: vector(`${base}.position_bias`),
    normWeight: vector(`${base}.kv_norm.weight`),
  })
  const layers = json.layers.map(({ index, layerType }): AttentionWeights => {
    const p = compressorPrefixes(index)
    const none = (what: string): Linear => absentLinear(`${p.attn}.${what}`)
    return {
      layer: index,
      ropeKind: layerType === 'sliding_attention' ? 'main' : 'compress',
      qA: none('q_a_proj.weight'),
      qANorm: new Float32Array(0),
      qB: none('q_b_proj.weight'),
      kv: linear(`${p.attn}.kv_proj.weight`),
      kvNorm: vector(`${p.attn}.kv_norm.weight`),
      oA: [],
      oB: none('o_b_proj.weight'),
      sinks: new Float32Array(0),
      compressor: layerType === 'sliding_attention' ? null : compressor(p.compressor),
      indexer: layerType !== 'compressed_sparse_attention'
        ? null
        : { ...compressor(p.indexer), qB: none('compressor.indexer.q_b_proj.weight'), weightsProj: none('compressor.indexer.scorer.weights_proj.weight') },
    }
  })
  const act = activationRounding(profile.activations)
  const rope = new RopeTables({ rope: sidecarRope(json) }, { invFreqBf16: profile.vectors === 'bf16', cosSinBf16: act.bf16 })
  // The kv path reads headDim, ropeDim, rmsEps (and nothing of the query side, left at 0).
  const shape: AttentionShape = {
    heads: 0, headDim: json.headDim, ropeDim: json.ropeDim, oGroups: 0, oLoraRank: 0, window: json.slidingWindow,
    rmsEps: json.rmsNormEps, indexHeads: 0, indexHeadDim: json.indexHeadDim, indexTopk: 0,
  }
  const newLayerCache = (layer: number): LayerCache => {
    const type = json.layers[layer].layerType
    let compressor: CompressorState | null = null
    let indexer: CompressorState | null = null
    if (type === 'compressed_sparse_attention') {
      compressor = new CompressorState(json.compressRates.csa, json.headDim, true)
      indexer = new CompressorState(json.compressRates.csa, json.indexHeadDim, true)
    } else if (type === 'heavily_compressed_attention') {
      compressor = new CompressorState(json.compressRates.hca, json.headDim, false)
    }
    return new LayerCache(type, json.headDim, json.slidingWindow - 1, compressor, indexer)
  }
  return {
    profile,
    layers,
    shape,
    rope,
    act,
    quant: referenceQuantHooks(profile.referenceQuant, json.headDim, json.ropeDim),
    hiddenSize: json.hiddenSize,
    maxPositionEmbeddings: json.maxPositionEmbeddings,
    newLayerCache,
  }
}
