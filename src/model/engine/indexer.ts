// The lightning indexer of a CSA layer: picks, for each query, the pooled entries it attends.
// score(t, s) = sum_h (act(w_h(x_t)) * n_h^-1/2) * (relu(q_{t,h} . k_s) * d_I^-1/2) over the
// entries s visible to t (s < (t+1) // ratio), heads in order (the kernels' indexerScores);
// the top min(index_topk, visible) scores, ties to the lower index, returned ascending.
import { indexerScores, ropeRows, topkRow, topkRows } from '../../kernels/index.ts'
import type { Linear } from '../weights/index.ts'
import type { ActivationRounding } from './activation.ts'
import type { CompressorState } from './cache.ts'
import type { Compressor } from './compressor.ts'
import type { ModelNumerics } from './numerics.ts'

/** What the indexer needs besides its compressor state. */
export interface IndexerParams {
  qB: Linear
  weightsProj: Linear
  heads: number
  headDim: number
  topk: number
  ratio: number
  /** The compress rope table. */
  cos: Float32Array
  sin: Float32Array
  ropeDim: number
  /** Reference-quant hook on each roped query head (Hadamard + fp4), when the profile asks for it. */
  finishQuery?: (qHead: Float32Array) => void
}

/** A CSA layer's indexer: its compressor (the indexer pool) and its scorer's projections and sizes. */
export class Indexer {
  constructor (readonly pool: Compressor, private readonly qB: Linear, private readonly weightsProj: Linear,
    private readonly sizes: { heads: number, headDim: number, topk: number, ropeDim: number }, private readonly numerics: ModelNumerics) {}

  /** For n queries at positions start.. (x the attention input, qResidual the q residual), the entries of `state` each picks. */
  select (x: Float32Array, qResidual: Float32Array, n: number, start: number, state: CompressorState): Int32Array[] {
    return this.selectProjected(this.project(x, qResidual, n), n, start, state)
  }

  /** The scorer's projections of n queries, row by row (a batch may project its rows at once): q_b (before rope) and the head weights. */
  project (x: Float32Array, qResidual: Float32Array, n: number): IndexerProjections {
    const act = this.numerics.act
    return { q: act.roundAll(this.qB.apply(qResidual, n)), weights: act.roundAll(this.weightsProj.apply(x, n)) }
  }

  /** select() from the queries' projections (their q is roped in place). */
  selectProjected (p: IndexerProjections, n: number, start: number, state: CompressorState): Int32Array[] {
    const { act, rope, quant } = this.numerics
    const ctable = rope.table('compress', start + n)
    const params: IndexerParams = {
      qB: this.qB, weightsProj: this.weightsProj, heads: this.sizes.heads, headDim: this.sizes.headDim, topk: this.sizes.topk,
      ratio: state.ratio, cos: ctable.cos, sin: ctable.sin, ropeDim: this.sizes.ropeDim, finishQuery: quant?.indexerVector,
    }
    return indexerSelect(p.q, p.weights, n, start, state.entries.view(), state.entryCount, params, act)
  }
}

/** The indexer's projections of n queries: q_b of the q residual [n, heads * headDim] (before rope) and the head weights [n, heads]. */
export interface IndexerProjections {
  q: Float32Array
  weights: Float32Array
}

/**
 * For n queries at positions start..start+n-1 (their projections: q [n, heads * headDim], roped here
 * in place, and weights [n, heads]), the picked entry indices, ascending, per query.
 * `entries` [entryCount, headDim] must already hold every entry the chunk completes.
 */
export function indexerSelect (q: Float32Array, weights: Float32Array, n: number, start: number,
  entries: Float32Array, entryCount: number, p: IndexerParams, act: ActivationRounding): Int32Array[] {
  const { heads, headDim, ratio } = p
  ropeRows(q, n, heads, headDim, headDim - p.ropeDim, p.ropeDim, p.cos, p.sin, { firstTableRow: start })
  act.roundAll(q)
  if (p.finishQuery !== undefined) for (let r = 0; r < n * heads; r++) p.finishQuery(q.subarray(r * headDim, (r + 1) * headDim))
  const visible = new Int32Array(n)
  for (let i = 0; i < n; i++) visible[i] = Math.min(entryCount, Math.floor((start + i + 1) / ratio))
  const scores = indexerScores(q, n, heads, headDim, entries.subarray(0, entryCount * headDim), entryCount, weights, visible,
    Math.pow(headDim, -0.5), Math.pow(heads, -0.5))
  // Per query the top min(topk, visible) of its visible scores (native, threads over queries).
  const picked = topkRows(scores, n, entryCount, visible, p.topk)
  const picks: Int32Array[] = []
  for (let i = 0; i < n; i++) picks.push(topkRow(picked, i))
  return picks
}
