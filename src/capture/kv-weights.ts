// Which weights a layer's cache depends on, with the shapes the sidecar must hold them in. The names
// are the engine's (src/model/engine/attention-weights.ts: kvPathWeightNames) and the widths its cache
// layout's (cache-layout.ts): kv_proj and kv_norm for the window row; for CSA/HCA the compressor's
// kv/gate projections, position bias and norm; for CSA also the indexer compressor's.
import type { LayerType } from '../model/config.ts'
import { kvPathWeightNames, type CompressorWeightNames } from '../model/engine/attention-weights.ts'
import { layerCacheLayout, type PoolLayout } from '../model/engine/cache-layout.ts'

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

/** The kv-path weights of layer `layer` (of type `type`), in a fixed order. */
export function kvWeightSpecs (layer: number, type: LayerType, s: KvShapeInputs): KvWeightSpec[] {
  const names = kvPathWeightNames(layer, type)
  // The window size does not shape any weight.
  const layout = layerCacheLayout(type, { ...s, slidingWindow: 1 })
  const specs: KvWeightSpec[] = [
    { name: names.kv, kind: 'linear', shape: [s.headDim, s.hiddenSize] },
    { name: names.kvNorm, kind: 'vector', shape: [s.headDim] },
  ]
  const pool = (n: CompressorWeightNames, p: PoolLayout): void => {
    specs.push(
      { name: n.kv, kind: 'linear', shape: [p.width, s.hiddenSize] },
      { name: n.gate, kind: 'linear', shape: [p.width, s.hiddenSize] },
      { name: n.positionBias, kind: 'vector', shape: [p.ratio, p.width] },
      { name: n.norm, kind: 'vector', shape: [p.dim] },
    )
  }
  for (const p of layout.pools) {
    const n = p.name === 'indexer' ? names.indexer : names.compressor
    if (n === null) throw new Error(`unreachable: layer ${layer} has a ${p.name} pool but no ${p.name} weights`)
    pool(n, p)
  }
  return specs
}
