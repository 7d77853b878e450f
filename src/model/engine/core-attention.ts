// Sparse attention of one layer for a chunk of queries: each query t attends the shared K=V rows at
// positions t-window+1..t (by position), then its pooled entries (ascending: HCA every complete
// one, CSA the indexer's picks), then a per-head sink that takes probability but gives no value.
// The arithmetic is the kernels' attentionMqa (docs/kernels.md), with transformers' bf16 rounding
// points switched on in a bf16 profile. Several sequences' queries go through one kernel call: the
// kernel gives each query its own key list, so one table holding every sequence's keys serves all,
// and the pool's threads share the batch's rows instead of one sequence's at a time.
import { attentionMqa } from '../../kernels/index.ts'
import type { ActivationRounding } from './activation.ts'

/** One sequence's queries in a core-attention call: n rows of q at positions start.. of its own cache. */
export interface AttentionQueries {
  n: number
  /** Position of the first query. */
  start: number
  /** Table row of the window K=V row at position keyBase; the rows up to start+n-1 follow it. */
  keyRow: number
  keyBase: number
  /** Pooled entries [entryCount, headDim] of this sequence's cache. */
  entries: Float32Array
  /** Entries query i attends, ascending: a count (the first `count`) or an explicit list. */
  entriesFor: (i: number) => number | Int32Array
}

/** The inputs of one core-attention call over one or more sequences. */
export interface CoreAttentionInput {
  /** Queries [sum n, heads, headDim], rope applied, the sequences' rows in order. */
  q: Float32Array
  heads: number
  headDim: number
  window: number
  sinks: Float32Array
  /** The sequences' window K=V rows, each where its keyRow says; rows from keyRows on are free. */
  table: Float32Array
  keyRows: number
  sequences: readonly AttentionQueries[]
}

/**
 * Attention outputs [sum n, heads * headDim] (before the inverse rope), into `out` when given. The
 * entries any query uses are copied into the table after row keyRows (a larger table is made when
 * it has no room), once per sequence however many of its queries pick them.
 */
export function coreAttention (a: CoreAttentionInput, act: ActivationRounding, out?: Float32Array): Float32Array {
  const { heads, headDim: d, window } = a
  const rows = a.sequences.reduce((sum, s) => sum + s.n, 0)
  const lists: Array<number | Int32Array> = []
  const entryRows: Int32Array[] = []
  const used: Array<{ entries: Float32Array, e: number }> = []
  let total = 0
  for (const s of a.sequences) {
    // Entries any of this sequence's queries uses, mapped to rows after the window keys.
    const entryRow = new Int32Array(s.entries.length / d).fill(-1)
    entryRows.push(entryRow)
    for (let i = 0; i < s.n; i++) {
      const t = s.start + i
      const picked = s.entriesFor(i)
      lists.push(picked)
      const count = typeof picked === 'number' ? picked : picked.length
      for (let k = 0; k < count; k++) {
        const e = typeof picked === 'number' ? k : picked[k]
        if (entryRow[e] < 0) {
          entryRow[e] = a.keyRows + used.length
          used.push({ entries: s.entries, e })
        }
      }
      total += (t - Math.max(0, t - window + 1) + 1) + count
    }
  }
  const tableRows = a.keyRows + used.length
  let table = a.table
  if (table.length < tableRows * d) {
    table = new Float32Array(tableRows * d)
    table.set(a.table.subarray(0, a.keyRows * d))
  }
  used.forEach(({ entries, e }, r) => table.set(entries.subarray(e * d, (e + 1) * d), (a.keyRows + r) * d))
  const offsets = new Int32Array(rows + 1)
  const keyIndex = new Int32Array(total)
  let k = 0
  let q = 0
  a.sequences.forEach((s, j) => {
    const entryRow = entryRows[j]
    for (let i = 0; i < s.n; i++, q++) {
      const t = s.start + i
      for (let p = Math.max(0, t - window + 1); p <= t; p++) keyIndex[k++] = s.keyRow + p - s.keyBase
      const picked = lists[q]
      if (typeof picked === 'number') for (let e = 0; e < picked; e++) keyIndex[k++] = entryRow[e]
      else for (const e of picked) keyIndex[k++] = entryRow[e]
      offsets[q + 1] = k
    }
  })
  const bf16 = act.bf16
  return attentionMqa(a.q, rows, heads, d, table.subarray(0, tableRows * d), tableRows, offsets, keyIndex, a.sinks, Math.pow(d, -0.5), out,
    { roundScoresBf16: bf16, roundProbsBf16: bf16, roundOutBf16: bf16 })
}
