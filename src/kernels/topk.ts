// Top-k selection for the indexer: the k best entries of a score row, ties to the lower index.
import { NumericsError } from '../errors.ts'
import { checkArray, checkSize } from './validate.ts'

/** Options of topkIndices. */
export interface TopkOptions {
  /** 'score' (default): best first, ties by lower index. 'index': the same set, ascending index. */
  order?: 'score' | 'index'
}

// a is better than b: higher score, or the same score at a lower index.
function better (sa: number, ia: number, sb: number, ib: number): boolean {
  return sa > sb || (sa === sb && ia < ib)
}

/**
 * The indices of the k best entries of `scores` (a Float32Array row): descending score, ties broken
 * by the lower index (+0 and -0 are the same score). -Inf and NaN entries are never picked, so the
 * result has min(k, number of finite-or-+Inf entries) indices. TypeScript only: a binary heap of
 * the k best seen so far, O(N log k).
 */
export function topkIndices (scores: Float32Array, k: number, opts?: TopkOptions): Int32Array {
  const kernel = 'topkIndices'
  const s = checkArray(kernel, 'scores', scores, 'Float32Array')
  const kk = checkSize(kernel, 'k', k)
  const order = opts?.order ?? 'score'
  if (order !== 'score' && order !== 'index') throw new NumericsError(`${kernel}: opts.order must be 'score' or 'index', got ${String(order)}`)
  const heap = new Int32Array(Math.min(kk, s.length)) // heap[0] is the worst kept entry
  let size = 0
  const worse = (a: number, b: number) => better(s[heap[b]], heap[b], s[heap[a]], heap[a])
  const swap = (a: number, b: number) => { const t = heap[a]; heap[a] = heap[b]; heap[b] = t }
  const siftDown = (i: number) => {
    for (;;) {
      const l = 2 * i + 1
      const r = l + 1
      let w = i
      if (l < size && worse(l, w)) w = l
      if (r < size && worse(r, w)) w = r
      if (w === i) return
      swap(i, w)
      i = w
    }
  }
  for (let i = 0; i < s.length && heap.length > 0; i++) {
    const v = s[i]
    if (!(v > -Infinity)) continue // -Inf and NaN
    if (size < heap.length) {
      heap[size] = i
      let c = size++
      while (c > 0) {
        const p = (c - 1) >> 1
        if (!worse(c, p)) break
        swap(c, p)
        c = p
      }
    } else if (better(v, i, s[heap[0]], heap[0])) {
      heap[0] = i
      siftDown(0)
    }
  }
  const picked = Array.from(heap.subarray(0, size))
  if (order === 'index') picked.sort((a, b) => a - b)
  else picked.sort((a, b) => (better(s[a], a, s[b], b) ? -1 : 1))
  return Int32Array.from(picked)
}
