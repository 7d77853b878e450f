// One layer's attention block: q-LoRA queries, the single shared K=V latent, partial interleaved
// rope on the trailing slice, the 128-row window, the layer's compressor (HCA) or compressor plus
// indexer (CSA), per-head sinks, the inverse rotation of the output and the grouped output projection.
import { PdBridgeError } from '../../errors.ts'
import { ropeRows } from '../../kernels/index.ts'
import type { ReferenceQuantHooks } from '../profiles/index.ts'
import type { Linear } from '../weights/index.ts'
import type { ActivationRounding } from './activation.ts'
import type { LayerCache } from './cache.ts'
import { compressTokens, type CompressorParams } from './compressor.ts'
import { coreAttention } from './core-attention.ts'
import { indexerSelect, type IndexerParams } from './indexer.ts'
import { unweightedRmsNormInPlace, weightedRmsNorm } from './norms.ts'
import type { RopeKind, RopeTables } from './rope-tables.ts'

/** A compressor's projections and parameters (tables are filled in per call). */
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

/** Sizes and constants shared by every layer. */
export interface AttentionShape {
  heads: number
  headDim: number
  ropeDim: number
  oGroups: number
  oLoraRank: number
  window: number
  rmsEps: number
  indexHeads: number
  indexHeadDim: number
  indexTopk: number
}

/** Reference-quant hooks on cached activations (DeepSeek's QAT round trips, src/model/profiles); null = all off. */
export type CacheQuantHooks = ReferenceQuantHooks

/** What a chunk added to a layer's cache, as its attention reads it. */
export interface CacheStep {
  /** Window K=V rows [keyCount, headDim] for positions keyBase.. (held rows, then the chunk's). */
  keys: Float32Array
  keyBase: number
}

/** What one layer's cache update reads besides its rows: the layer's weights and the model's shapes, rope tables and numerics. */
export interface LayerCacheContext {
  weights: AttentionWeights
  shape: AttentionShape
  rope: RopeTables
  act: ActivationRounding
  quant: CacheQuantHooks | null
}

/**
 * The cache half of the attention block: the chunk's shared K=V rows (kv_proj -> kv_norm -> rope,
 * then the reference fp8 round trip when on) go into the window, and its compressor projections
 * into the compressor (and indexer) state. A pure function of the attention input x [n, hidden]
 * and the positions start..start+n-1: this is what a cache built from captured attention inputs runs.
 */
export function updateLayerCache (layer: LayerCacheContext, x: Float32Array, n: number, start: number, cache: LayerCache): CacheStep {
  const { weights: w, shape: s, rope, act, quant } = layer
  const { headDim: d, ropeDim, rmsEps } = s
  const nope = d - ropeDim
  const end = start + n
  const table = rope.table(w.ropeKind, end)
  const kv = weightedRmsNorm(act.roundAll(w.kv.apply(x, n)), n, d, w.kvNorm, rmsEps, act)
  ropeRows(kv, n, 1, d, nope, ropeDim, table.cos, table.sin, { firstTableRow: start })
  act.roundAll(kv)
  if (quant !== null) for (let i = 0; i < n; i++) quant.windowRow(kv.subarray(i * d, (i + 1) * d))
  const old = cache.windowLength
  const keys = new Float32Array((old + n) * d)
  keys.set(cache.window.subarray(0, old * d))
  keys.set(kv, old * d)
  cache.pushWindow(kv, n)
  if (w.compressor !== null && cache.compressor !== null) {
    const ctable = rope.table('compress', end)
    const t = { cos: ctable.cos, sin: ctable.sin, ropeDim, rmsEps }
    runCompressor(w.compressor, cache.compressor, x, n, { ...t, finishEntry: quant?.poolEntry }, act)
    if (w.indexer !== null && cache.indexer !== null) {
      runCompressor(w.indexer, cache.indexer, x, n, { ...t, finishEntry: quant?.indexerVector }, act)
    }
  }
  return { keys, keyBase: start - old }
}

/**
 * The attention block for x [n, hidden] (the layer's attention input) at positions start..start+n-1,
 * updating the layer's cache. Returns the block output [n, hidden].
 */
export function attentionBlock (w: AttentionWeights, s: AttentionShape, x: Float32Array, n: number, start: number,
  cache: LayerCache, rope: RopeTables, act: ActivationRounding, quant: CacheQuantHooks | null): Float32Array {
  const { heads, headDim: d, ropeDim, rmsEps } = s
  const nope = d - ropeDim
  const table = rope.table(w.ropeKind, start + n)

  // Queries: q_a -> q_a_norm (the q residual) -> q_b -> per-head unweighted norm -> rope.
  const qResidual = weightedRmsNorm(act.roundAll(w.qA.apply(x, n)), n, w.qA.outFeatures, w.qANorm, rmsEps, act)
  const q = act.roundAll(w.qB.apply(qResidual, n))
  for (let r = 0; r < n * heads; r++) unweightedRmsNormInPlace(q, r * d, d, rmsEps, act)
  // Rope in fp32, then cast (rounding the whole row is the same: the nope part is already cast).
  ropeRows(q, n, heads, d, nope, ropeDim, table.cos, table.sin, { firstTableRow: start })
  act.roundAll(q)

  // The cache: window rows and pooled entries, before any query of the chunk attends.
  const { keys, keyBase } = updateLayerCache({ weights: w, shape: s, rope, act, quant }, x, n, start, cache)

  // Which pooled entries each query sees: HCA every complete one, CSA the indexer's picks.
  let entriesFor: (i: number) => number | Int32Array = () => 0
  let entries: Float32Array = new Float32Array(0)
  if (cache.compressor !== null) {
    const state = cache.compressor
    entries = state.entries.view()
    if (w.indexer !== null && cache.indexer !== null) {
      const istate = cache.indexer
      const ctable = rope.table('compress', start + n)
      const params: IndexerParams = {
        qB: w.indexer.qB, weightsProj: w.indexer.weightsProj, heads: s.indexHeads, headDim: s.indexHeadDim,
        topk: s.indexTopk, ratio: istate.ratio, cos: ctable.cos, sin: ctable.sin, ropeDim, finishQuery: quant?.indexerVector,
      }
      const picks = indexerSelect(x, qResidual, n, start, istate.entries.view(), istate.entryCount, params, act)
      entriesFor = (i) => picks[i]
    } else {
      const ratio = state.ratio
      const count = state.entryCount
      entriesFor = (i) => Math.min(count, Math.floor((start + i + 1) / ratio))
    }
  }

  const o = coreAttention({ q, n, start, heads, headDim: d, keys, keyBase, window: s.window, entries, entriesFor, sinks: w.sinks }, act)

  // Undo the rope on the output's rope slice (K=V carried it into the values), at the query position.
  ropeRows(o, n, heads, d, nope, ropeDim, table.cos, table.sin, { firstTableRow: start, inverse: true })
  act.roundAll(o)
  return act.roundAll(w.oB.apply(groupedOutput(w.oA, o, n, s, act), n))
}

// o_a: group g's heads (heads*head_dim/o_groups inputs) through rows [g*o_lora, (g+1)*o_lora) of the weight.
function groupedOutput (oA: Linear[], o: Float32Array, n: number, s: AttentionShape, act: ActivationRounding): Float32Array {
  const g = s.oGroups
  const r = s.oLoraRank
  if (oA.length !== g) throw new PdBridgeError(`attention: ${oA.length} o_a_proj group weights for o_groups ${g}`)
  const width = o.length / (n * g)
  const rows = new Float32Array(n * width)
  const out = new Float32Array(n * g * r)
  for (let k = 0; k < g; k++) {
    for (let i = 0; i < n; i++) rows.set(o.subarray((i * g + k) * width, (i * g + k + 1) * width), i * width)
    const y = oA[k].apply(rows, n)
    for (let i = 0; i < n; i++) out.set(y.subarray(i * r, (i + 1) * r), (i * g + k) * r)
  }
  return act.roundAll(out)
}

function runCompressor (cw: CompressorWeights, state: NonNullable<LayerCache['compressor']>, x: Float32Array, n: number,
  t: Omit<CompressorParams, 'positionBias' | 'normWeight'>, act: ActivationRounding): void {
  const kv = act.roundAll(cw.kv.apply(x, n))
  const gate = act.roundAll(cw.gate.apply(x, n))
  compressTokens(state, kv, gate, n, { ...t, positionBias: cw.positionBias, normWeight: cw.normWeight }, act)
}
