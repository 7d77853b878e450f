// One layer's attention block: q-LoRA queries, the single shared K=V latent, partial interleaved
// rope on the trailing slice, the 128-row window, the layer's compressor (HCA) or compressor plus
// indexer (CSA), per-head sinks, the inverse rotation of the output and the grouped output projection.
import { PdBridgeError } from '../../errors.ts'
import { matmulBf16Grouped, ropeRows } from '../../kernels/index.ts'
import type { LayerType } from '../config.ts'
import type { Linear } from '../weights/index.ts'
import type { ActivationRounding } from './activation.ts'
import { attentionWeights, type AttentionWeights, type QuerySource, type WeightSource } from './attention-weights.ts'
import { LayerCache } from './cache.ts'
import { layerCacheLayout, type CacheDims, type LayerCacheLayout, type PoolLayout } from './cache-layout.ts'
import { Compressor } from './compressor.ts'
import { groupedKernelsOn } from './grouping.ts'
import { coreAttention, type AttentionQueries } from './core-attention.ts'
import { Indexer } from './indexer.ts'
import type { ModelNumerics } from './numerics.ts'
import { unweightedRmsNormRows, weightedRmsNorm } from './norms.ts'
import { scratch } from './scratch.ts'

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

/** One sequence's rows in a batched attention call: n rows at positions start.. of its own cache. */
export interface AttentionSegment {
  n: number
  start: number
  cache: LayerCache
}

/** The kv path's projections of some rows: the shared K=V (before its norm) and each compressor's kv and gate. */
interface KvProjections {
  kv: Float32Array
  compressor: { kv: Float32Array, gate: Float32Array } | null
  indexer: { kv: Float32Array, gate: Float32Array } | null
}

/** One layer's attention: its weights, its compressor (HCA, CSA) and indexer (CSA), its cache layout and the model's numerics. */
export class Attention {
  readonly compressor: Compressor | null
  readonly indexer: Indexer | null

  constructor (readonly weights: AttentionWeights, readonly shape: AttentionShape, readonly cacheLayout: LayerCacheLayout,
    private readonly numerics: ModelNumerics) {
    const pool = (name: PoolLayout['name']): PoolLayout => {
      const p = cacheLayout.pools.find((q) => q.name === name)
      if (p === undefined) throw new PdBridgeError(`attention: layer ${weights.layer} has ${name} weights but its ${cacheLayout.layerType} cache has no ${name} pool`)
      return p
    }
    const sizes = { ropeDim: shape.ropeDim, rmsEps: shape.rmsEps }
    const quant = numerics.quant
    this.compressor = weights.compressor === null ? null : new Compressor(weights.compressor, pool('compressor'), numerics, sizes, quant?.poolEntry)
    const iw = weights.indexer
    this.indexer = iw === null
      ? null
      : new Indexer(new Compressor(iw, pool('indexer'), numerics, sizes, quant?.indexerVector), iw.qB, iw.weightsProj,
        { heads: shape.indexHeads, headDim: shape.indexHeadDim, topk: shape.indexTopk, ropeDim: shape.ropeDim }, numerics)
  }

  /**
   * Layer `layer` of type `type`: the kv path's weights from `kv`, the rest from `query` (a sidecar
   * holds only the kv path: its query side refuses to run), the cache layout from `dims`.
   */
  static build (kv: WeightSource, query: QuerySource, layer: number, type: LayerType, shape: AttentionShape, dims: CacheDims, numerics: ModelNumerics): Attention {
    return new Attention(attentionWeights(kv, query, layer, type), shape, layerCacheLayout(type, dims), numerics)
  }

  /** An empty cache for this layer, as its layout describes it. */
  makeCache (): LayerCache {
    return LayerCache.fromLayout(this.cacheLayout)
  }

  /**
   * The cache half of the attention block: the chunk's shared K=V rows (kv_proj -> kv_norm -> rope,
   * then the reference fp8 round trip when on) go into the window, and its compressor projections
   * into the compressor (and indexer) state. A pure function of the attention input x [n, hidden]
   * and the positions start..start+n-1: this is what a cache built from captured attention inputs runs.
   */
  updateCache (x: Float32Array, n: number, start: number, cache: LayerCache): void {
    const p = this.projectKv(x, n)
    this.store(this.windowRows(p, n, consecutive(start, n), start + n), p, 0, n, start, cache)
  }

  /** The kv path's projections of x [n, hidden], row by row (a batch projects all its rows at once). */
  private projectKv (x: Float32Array, n: number): KvProjections {
    return {
      kv: this.numerics.act.roundAll(this.weights.kv.apply(x, n)),
      compressor: this.compressor?.project(x, n) ?? null,
      indexer: this.indexer?.pool.project(x, n) ?? null,
    }
  }

  /**
   * The window rows of every row of `p` (kv_norm -> rope at each row's position -> cast, then the
   * reference fp8 round trip when on): row by row, so a batch runs them in one call per kernel.
   */
  private windowRows (p: KvProjections, n: number, positions: Int32Array, ropeEnd: number): Float32Array {
    const { weights: w, shape: s } = this
    const { act, rope, quant } = this.numerics
    const d = s.headDim
    const table = rope.table(w.ropeKind, ropeEnd)
    const kv = weightedRmsNorm(p.kv.subarray(0, n * d), n, d, w.kvNorm, s.rmsEps, act)
    ropeRows(kv, n, 1, d, d - s.ropeDim, s.ropeDim, table.cos, table.sin, { tableRows: positions })
    act.roundAll(kv)
    if (quant !== null) for (let i = 0; i < n; i++) quant.windowRow(kv.subarray(i * d, (i + 1) * d))
    return kv
  }

  /**
   * One segment's cache update from its window rows (rows row..row+n-1 of `kv` and of the
   * compressor projections in `p`): the held window rows then the new ones go into `keys` at
   * `keysAt` (rows) when given, before the window drops the oldest; then the window and the pools.
   */
  private store (kv: Float32Array, p: KvProjections, row: number, n: number, start: number, cache: LayerCache,
    keys?: Float32Array, keysAt = 0): void {
    const d = this.shape.headDim
    const own = kv.subarray(row * d, (row + n) * d)
    if (keys !== undefined) {
      const old = cache.windowLength
      keys.set(cache.window.subarray(0, old * d), keysAt * d)
      keys.set(own, (keysAt + old) * d)
    }
    cache.pushWindow(own, n)
    const rows = (q: { kv: Float32Array, gate: Float32Array }, width: number): [Float32Array, Float32Array] =>
      [q.kv.subarray(row * width, (row + n) * width), q.gate.subarray(row * width, (row + n) * width)]
    const end = start + n
    if (this.compressor !== null && cache.compressor !== null && p.compressor !== null) {
      this.compressor.feed(cache.compressor, ...rows(p.compressor, this.compressor.layout.width), n, end)
      if (this.indexer !== null && cache.indexer !== null && p.indexer !== null) this.indexer.pool.feed(cache.indexer, ...rows(p.indexer, this.indexer.pool.layout.width), n, end)
    }
  }

  /**
   * The attention block for x [n, hidden] (the layer's attention input) at positions start..start+n-1,
   * updating the layer's cache. Returns the block output [n, hidden].
   */
  forward (x: Float32Array, n: number, start: number, cache: LayerCache): Float32Array {
    return this.forwardSegments(x, [{ n, start, cache }])
  }

  /**
   * The attention block for several sequences at once: x holds each segment's rows in order (segment
   * i: n_i rows at positions start_i.. of its own cache). The projections run once over every row
   * (the matmul is batch-invariant: a row's bits do not depend on the other rows); each segment's
   * cache update, rope and core attention run on its own rows and cache. So a segment's output is
   * bit-identical to forward() of that segment alone. Returns the block output [sum n_i, hidden].
   */
  forwardSegments (x: Float32Array, segments: readonly AttentionSegment[]): Float32Array {
    const { weights: w, shape: s } = this
    const { act, rope } = this.numerics
    const { heads, headDim: d, ropeDim, rmsEps } = s
    const nope = d - ropeDim
    const total = segments.reduce((sum, g) => sum + g.n, 0)
    const qWidth = heads * d

    // Queries: q_a -> q_a_norm (the q residual) -> q_b -> per-head unweighted norm -> rope.
    const qResidual = weightedRmsNorm(act.roundAll(w.qA.apply(x, total)), total, w.qA.outFeatures, w.qANorm, rmsEps, act)
    // q and o live only inside this call (scratch slots: no per-layer zero-fill of [rows, heads, headDim]).
    const q = act.roundAll(w.qB.apply(qResidual, total, scratch('attn-q', total * qWidth)))
    unweightedRmsNormRows(q, total * heads, d, rmsEps, act)
    // The kv path's and the indexer's projections, once over every row too.
    const kvp = this.projectKv(x, total)
    const iq = this.indexer?.project(x, qResidual, total) ?? null
    const iWidth = s.indexHeads * s.indexHeadDim

    // Everything row by row runs once over the batch's rows, each row at its own position: the
    // queries' rope and cast, and the window rows (kv_norm, rope, cast).
    const positions = new Int32Array(total)
    let keyRows = 0
    let ropeEnd = 0
    {
      let row = 0
      for (const { n, start, cache } of segments) {
        for (let i = 0; i < n; i++) positions[row + i] = start + i
        row += n
        keyRows += cache.windowLength + n
        ropeEnd = Math.max(ropeEnd, start + n)
      }
    }
    const table = rope.table(w.ropeKind, ropeEnd)
    // Rope in fp32, then cast (rounding the whole row is the same: the nope part is already cast).
    ropeRows(q, total, heads, d, nope, ropeDim, table.cos, table.sin, { tableRows: positions })
    act.roundAll(q)
    const kv = this.windowRows(kvp, total, positions, ropeEnd)

    // Per sequence: its cache (window rows and pooled entries) before any of its queries attends,
    // its held and new window rows copied into the one K=V table, and which entries each query sees.
    // The table is a scratch slot with room for the entries the queries can use (at most the cache's
    // entries after this chunk, at most one more per row; with an indexer at most topk per query):
    // sized by what is read, so the slot keeps no more than a call without it would allocate.
    const picksPerQuery = this.indexer === null ? Infinity : s.indexTopk
    const entryRoom = segments.reduce((sum, g) => sum + (g.cache.compressor === null ? 0 : Math.min(g.cache.compressor.entryCount + g.n, g.n * picksPerQuery)), 0)
    const keys = scratch('attn-kv-table', (keyRows + entryRoom) * d)
    const queries: AttentionQueries[] = []
    let row = 0
    let keyRow = 0
    for (const { n, start, cache } of segments) {
      const held = cache.windowLength
      this.store(kv, kvp, row, n, start, cache, keys, keyRow)
      // Which pooled entries each query sees: HCA every complete one, CSA the indexer's picks.
      let entriesFor: (i: number) => number | Int32Array = () => 0
      let entries: Float32Array = new Float32Array(0)
      if (cache.compressor !== null) {
        const state = cache.compressor
        entries = state.entries.view()
        if (this.indexer !== null && cache.indexer !== null && iq !== null) {
          const own = { q: iq.q.subarray(row * iWidth, (row + n) * iWidth), weights: iq.weights.subarray(row * s.indexHeads, (row + n) * s.indexHeads) }
          const picks = this.indexer.selectProjected(own, n, start, cache.indexer)
          entriesFor = (i) => picks[i]
        } else {
          const ratio = state.ratio
          const count = state.entryCount
          entriesFor = (i) => Math.min(count, Math.floor((start + i + 1) / ratio))
        }
      }
      queries.push({ n, start, keyRow, keyBase: start - held, entries, entriesFor })
      keyRow += held + n
      row += n
    }

    // One kernel call for every sequence's queries (each query reads only its own sequence's rows),
    // straight into o (the kernel writes every element); then the rope undone on the output's rope
    // slice (K=V carried it into the values), at each query's position.
    const o = coreAttention({ q, heads, headDim: d, window: s.window, sinks: w.sinks, table: keys, keyRows, sequences: queries }, act,
      scratch('attn-out', total * qWidth))
    ropeRows(o, total, heads, d, nope, ropeDim, table.cos, table.sin, { tableRows: positions, inverse: true })
    act.roundAll(o)
    return act.roundAll(w.oB.apply(groupedOutput(w.oA, o, total, s, act), total))
  }

  /** Fill the derived overlap carries of `cache` restored with only the raw previous windows (see deriveOverlapCarry). */
  completeCarries (cache: LayerCache): void {
    if (cache.compressor !== null && this.compressor !== null) this.compressor.completeCarry(cache.compressor)
    if (cache.indexer !== null && this.indexer !== null) this.indexer.pool.completeCarry(cache.indexer)
  }
}

// o_a: group g's heads (heads*head_dim/o_groups inputs) through rows [g*o_lora, (g+1)*o_lora) of the weight.
function groupedOutput (oA: Linear[], o: Float32Array, n: number, s: AttentionShape, act: ActivationRounding): Float32Array {
  const g = s.oGroups
  const r = s.oLoraRank
  if (oA.length !== g) throw new PdBridgeError(`attention: ${oA.length} o_a_proj group weights for o_groups ${g}`)
  const width = o.length / (n * g)
  const out = new Float32Array(n * g * r)
  const order = oA[0].bf16Matmul?.order
  if (groupedKernelsOn() && order !== undefined && oA.every((l) => l.bf16Matmul?.order === order)) {
    // Every group a plain bf16 matmul: all of them in one grouped call (each output the same dot product).
    const groups = oA.map((l, k) => {
      const rows = new Float32Array(n * width)
      for (let i = 0; i < n; i++) rows.set(o.subarray((i * g + k) * width, (i * g + k + 1) * width), i * width)
      return { x: rows, m: n, w: l.bf16Matmul!.codes }
    })
    matmulBf16Grouped(groups, width, r, { order }).forEach((y, k) => {
      for (let i = 0; i < n; i++) out.set(y.subarray(i * r, (i + 1) * r), (i * g + k) * r)
    })
    return act.roundAll(out)
  }
  const rows = scratch('attn-group-rows', n * width)
  const y = scratch('attn-group-out', n * r)
  for (let k = 0; k < g; k++) {
    for (let i = 0; i < n; i++) rows.set(o.subarray((i * g + k) * width, (i * g + k + 1) * width), i * width)
    oA[k].apply(rows, n, y)
    for (let i = 0; i < n; i++) out.set(y.subarray(i * r, (i + 1) * r), (i * g + k) * r)
  }
  return act.roundAll(out)
}

/** Positions start..start+n-1, one per row (the rope's table rows of a single sequence's chunk). */
function consecutive (start: number, n: number): Int32Array {
  const p = new Int32Array(n)
  for (let i = 0; i < n; i++) p[i] = start + i
  return p
}
