// Which weights a layer's cache depends on, by transformers' parameter names, with the shapes the
// sidecar must hold them in. The kv path (src/model/engine/attention.ts, updateLayerCache) reads
// these and nothing else: kv_proj and kv_norm for the window row; for CSA/HCA the compressor's
// kv/gate projections, position bias and norm; for CSA also the indexer compressor's.
import type { LayerType } from '../model/config.ts'

/** A linear ([out, in]) or a vector (norm weight, position bias) of the kv path. */
export interface KvWeightSpec {
  name: string
  kind: 'linear' | 'vector'
  shape: number[]
}

/** The sizes the kv-path shapes follow from. */
export interface KvShapeInputs {
  hiddenSize: number
  headDim: number
  indexHeadDim: number
  compressRates: { csa: number, hca: number }
}

/** Where a layer's main compressor lives, and its indexer's (CSA only). */
export function compressorPrefixes (layer: number): { attn: string, compressor: string, indexer: string } {
  const attn = `model.layers.${layer}.self_attn`
  return { attn, compressor: `${attn}.compressor`, indexer: `${attn}.compressor.indexer` }
}

/** The kv-path weights of layer `layer` (of type `type`), in a fixed order. */
export function kvWeightSpecs (layer: number, type: LayerType, s: KvShapeInputs): KvWeightSpec[] {
  const { attn, compressor, indexer } = compressorPrefixes(layer)
  const specs: KvWeightSpec[] = [
    { name: `${attn}.kv_proj.weight`, kind: 'linear', shape: [s.headDim, s.hiddenSize] },
    { name: `${attn}.kv_norm.weight`, kind: 'vector', shape: [s.headDim] },
  ]
  const pool = (base: string, ratio: number, dim: number, overlap: boolean): void => {
    const width = overlap ? 2 * dim : dim
    specs.push(
      { name: `${base}.kv_proj.weight`, kind: 'linear', shape: [width, s.hiddenSize] },
      { name: `${base}.gate_proj.weight`, kind: 'linear', shape: [width, s.hiddenSize] },
      { name: `${base}.position_bias`, kind: 'vector', shape: [ratio, width] },
      { name: `${base}.kv_norm.weight`, kind: 'vector', shape: [dim] },
    )
  }
  if (type === 'compressed_sparse_attention') {
    pool(compressor, s.compressRates.csa, s.headDim, true)
    pool(indexer, s.compressRates.csa, s.indexHeadDim, true)
  } else if (type === 'heavily_compressed_attention') {
    pool(compressor, s.compressRates.hca, s.headDim, false)
  }
  return specs
}
