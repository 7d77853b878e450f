// Sparse attention of one layer for a chunk of queries: each query t attends the shared K=V rows at
// positions t-window+1..t (by position), then its pooled entries (ascending: HCA every complete
// one, CSA the indexer's picks), then a per-head sink that takes probability but gives no value.
// The arithmetic is the kernels' attentionMqa (docs/kernels.md), with transformers' bf16 rounding
// points switched on in a bf16 profile.
import { attentionMqa } from '../../kernels/index.ts'
import type { ActivationRounding } from './activation.ts'

/** The inputs of one chunk's core attention. */
export interface CoreAttentionInput {
  /** Queries [n, heads, headDim], rope applied. */
  q: Float32Array
  n: number
  /** Position of the first query. */
  start: number
  heads: number
  headDim: number
  /** Window K=V rows [keyCount, headDim] for positions keyBase.. ; must cover start-window+1 .. start+n-1. */
  keys: Float32Array
  keyBase: number
  window: number
  /** Pooled entries [entryCount, headDim]. */
  entries: Float32Array
  /** Entries query i attends, ascending: a count (the first `count`) or an explicit list. */
  entriesFor: (i: number) => number | Int32Array
  sinks: Float32Array
}

/** Attention outputs [n, heads * headDim] (before the inverse rope), into `out` when given. */
export function coreAttention (a: CoreAttentionInput, act: ActivationRounding, out?: Float32Array): Float32Array {
  const { n, heads, headDim: d, start, window } = a
  const keyCount = a.keys.length / d
  // Entries any query uses, mapped to rows after the window keys in one K=V table.
  const entryCount = a.entries.length / d
  const entryRow = new Int32Array(entryCount).fill(-1)
  const used: number[] = []
  const lists: Array<number | Int32Array> = []
  let total = 0
  for (let i = 0; i < n; i++) {
    const t = start + i
    const picked = a.entriesFor(i)
    lists.push(picked)
    const count = typeof picked === 'number' ? picked : picked.length
    for (let k = 0; k < count; k++) {
      const e = typeof picked === 'number' ? k : picked[k]
      if (entryRow[e] < 0) {
        entryRow[e] = keyCount + used.length
        used.push(e)
      }
    }
    total += (t - Math.max(0, t - window + 1) + 1) + count
  }
  const table = new Float32Array((keyCount + used.length) * d)
  table.set(a.keys)
  used.forEach((e, r) => table.set(a.entries.subarray(e * d, (e + 1) * d), (keyCount + r) * d))
  const offsets = new Int32Array(n + 1)
  const keyIndex = new Int32Array(total)
  let k = 0
  for (let i = 0; i < n; i++) {
    const t = start + i
    for (let s = Math.max(0, t - window + 1); s <= t; s++) keyIndex[k++] = s - a.keyBase
    const picked = lists[i]
    if (typeof picked === 'number') for (let e = 0; e < picked; e++) keyIndex[k++] = entryRow[e]
    else for (const e of picked) keyIndex[k++] = entryRow[e]
    offsets[i + 1] = k
  }
  const bf16 = act.bf16
  return attentionMqa(a.q, n, heads, d, table, keyCount + used.length, offsets, keyIndex, a.sinks, Math.pow(d, -0.5), out,
    { roundScoresBf16: bf16, roundProbsBf16: bf16, roundOutBf16: bf16 })
}
