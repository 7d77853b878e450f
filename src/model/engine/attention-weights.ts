// Where one layer's attention weights live, by transformers' parameter names, and how they are looked
// up from a weight source: the checkpoint's prepared weights, or a sidecar's exported kv-path tensors.
// These names are written here only; the sidecar's tensor list (src/capture/kv-weights.ts) and the
// llama.cpp adapters read them from here.
import { PdBridgeError } from '../../errors.ts'
import type { LayerType } from '../config.ts'
import type { Linear, PreparedWeights } from '../weights/index.ts'
import type { RopeKind } from './rope-tables.ts'

/** What the weights are read from: projections and vectors by parameter name. */
export interface WeightSource {
  linear (name: string): Linear
  vector (name: string): Float32Array
}

/** A compressor's projections and parameters. */
export interface CompressorWeights {
  kv: Linear
  gate: Linear
  positionBias: Float32Array
  normWeight: Float32Array
}

/** Everything one layer's attention reads. */
export interface AttentionWeights {
  layer: number
  ropeKind: RopeKind
  qA: Linear
  qANorm: Float32Array
  qB: Linear
  kv: Linear
  kvNorm: Float32Array
  /** o_a_proj per group: group g is rows [g * o_lora, (g + 1) * o_lora) of [o_groups * o_lora, heads * head_dim / o_groups]. */
  oA: Linear[]
  oB: Linear
  sinks: Float32Array
  compressor: CompressorWeights | null
  indexer: (CompressorWeights & { qB: Linear, weightsProj: Linear }) | null
}

/** Where a layer's attention lives, its main compressor, and its indexer's (CSA only). */
export function compressorPrefixes (layer: number): { attn: string, compressor: string, indexer: string } {
  const attn = `model.layers.${layer}.self_attn`
  return { attn, compressor: `${attn}.compressor`, indexer: `${attn}.compressor.indexer` }
}

/** The parameter names of one compressor under `base`. */
export interface CompressorWeightNames {
  kv: string
  gate: string
  positionBias: string
  norm: string
}

/** The parameter names a layer's cache update reads (the kv path): nothing of the query side. */
export interface KvPathWeightNames {
  kv: string
  kvNorm: string
  compressor: CompressorWeightNames | null
  indexer: CompressorWeightNames | null
}

function compressorNames (base: string): CompressorWeightNames {
  return { kv: `${base}.kv_proj.weight`, gate: `${base}.gate_proj.weight`, positionBias: `${base}.position_bias`, norm: `${base}.kv_norm.weight` }
}

/** The kv-path parameter names of layer `layer` of type `type`. */
export function kvPathWeightNames (layer: number, type: LayerType): KvPathWeightNames {
  const p = compressorPrefixes(layer)
  return {
    kv: `${p.attn}.kv_proj.weight`,
    kvNorm: `${p.attn}.kv_norm.weight`,
    compressor: type === 'sliding_attention' ? null : compressorNames(p.compressor),
    indexer: type === 'compressed_sparse_attention' ? compressorNames(p.indexer) : null,
  }
}

/** The query-side parameter names of layer `layer` (what a sidecar does not hold). */
function queryWeightNames (layer: number) {
  const p = compressorPrefixes(layer)
  return {
    qA: `${p.attn}.q_a_proj.weight`,
    qANorm: `${p.attn}.q_a_norm.weight`,
    qB: `${p.attn}.q_b_proj.weight`,
    oA: `${p.attn}.o_a_proj.weight`,
    oB: `${p.attn}.o_b_proj.weight`,
    sinks: `${p.attn}.sinks`,
    indexerQB: `${p.indexer}.q_b_proj.weight`,
    indexerWeightsProj: `${p.indexer}.scorer.weights_proj.weight`,
  }
}

function compressorFrom (w: WeightSource, n: CompressorWeightNames): CompressorWeights {
  return { kv: w.linear(n.kv), gate: w.linear(n.gate), positionBias: w.vector(n.positionBias), normWeight: w.vector(n.norm) }
}

/** o_a_proj as its o_groups row blocks (group g: rows [g * rows / groups, (g + 1) * rows / groups)). */
function groupBlocks (oA: ReturnType<PreparedWeights['linear']>, groups: number): Linear[] {
  if (oA.outFeatures % groups !== 0) throw new PdBridgeError(`${oA.name}: ${oA.outFeatures} rows do not split into o_groups ${groups}`)
  const rows = oA.outFeatures / groups
  return Array.from({ length: groups }, (_, g) => oA.rowBlock(g * rows, rows))
}

// The query side of a source that holds only the kv path (a sidecar): each projection refuses to run,
// naming itself, so nothing computes with something made up.
function absentLinear (name: string): Linear {
  const refuse = (): never => { throw new PdBridgeError(`capture: ${name} is not in the sidecar; the kv path must not read it`) }
  return { inFeatures: 0, outFeatures: 0, apply: refuse }
}

/** The query side: a checkpoint's weights (with o_groups), or `kv-path-only` for a source holding just the kv path. */
export type QuerySource = { weights: PreparedWeights, oGroups: number } | 'kv-path-only'

/** Layer `layer`'s attention weights from `kv` (the kv path) and `query` (the rest), looked up in transformers' parameter order. */
export function attentionWeights (kv: WeightSource, query: QuerySource, layer: number, type: LayerType): AttentionWeights {
  const names = kvPathWeightNames(layer, type)
  const q = queryWeightNames(layer)
  const held = query === 'kv-path-only' ? null : query
  const linear = (name: string): Linear => held === null ? absentLinear(name) : held.weights.linear(name)
  const vector = (name: string): Float32Array => held === null ? new Float32Array(0) : held.weights.vector(name)
  const qA = linear(q.qA)
  const qANorm = vector(q.qANorm)
  const qB = linear(q.qB)
  const kvProj = kv.linear(names.kv)
  const kvNorm = kv.vector(names.kvNorm)
  const oA = held === null ? [] : groupBlocks(held.weights.linear(q.oA), held.oGroups)
  const oB = linear(q.oB)
  const sinks = vector(q.sinks)
  const compressor = names.compressor === null ? null : compressorFrom(kv, names.compressor)
  const indexer = names.indexer === null
    ? null
    : { ...compressorFrom(kv, names.indexer), qB: linear(q.indexerQB), weightsProj: linear(q.indexerWeightsProj) }
  return { layer, ropeKind: type === 'sliding_attention' ? 'main' : 'compress', qA, qANorm, qB, kv: kvProj, kvNorm, oA, oB, sinks, compressor, indexer }
}
