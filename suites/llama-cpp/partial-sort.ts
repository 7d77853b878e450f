// A model of the top-k selection llama.cpp's CPU backend makes (ggml_compute_forward_top_k_f32 in
// ggml/src/ggml-cpu/ops.cpp): indices 0..n-1, then std::partial_sort(idx, idx + k, idx + n, comp)
// with comp(a, b) = score[a] > score[b]. std::partial_sort is not stable; which of several equal
// scores it keeps follows from libstdc++'s heap algorithms (bits/stl_heap.h, bits/stl_algo.h:
// __heap_select = __make_heap on the first k, then __pop_heap for every later element strictly
// better than the heap's top), ported here line for line. The set it keeps is what matters: the
// attention uses the picks as a mask, so their order does not.
// Used only by the suites, to test the hypothesis that indexer ties explain where llama.cpp and
// our engine disagree; the engine's own rule (descending score, ties to the lower index) is not changed.

/** The k indices libstdc++'s std::partial_sort puts first for `scores` under comp = greater, ascending. */
export function libstdcxxTopk (scores: ArrayLike<number>, k: number): Int32Array {
  const n = scores.length
  const idx = Int32Array.from({ length: n }, (_, i) => i)
  const comp = (a: number, b: number) => scores[a] > scores[b]
  const pushHeap = (first: number, holeIndex: number, topIndex: number, value: number) => {
    let parent = Math.trunc((holeIndex - 1) / 2)
    while (holeIndex > topIndex && comp(idx[first + parent], value)) {
      idx[first + holeIndex] = idx[first + parent]
      holeIndex = parent
      parent = Math.trunc((holeIndex - 1) / 2)
    }
    idx[first + holeIndex] = value
  }
  const adjustHeap = (first: number, holeIndex: number, len: number, value: number) => {
    const topIndex = holeIndex
    let secondChild = holeIndex
    while (secondChild < Math.trunc((len - 1) / 2)) {
      secondChild = 2 * (secondChild + 1)
      if (comp(idx[first + secondChild], idx[first + secondChild - 1])) secondChild--
      idx[first + holeIndex] = idx[first + secondChild]
      holeIndex = secondChild
    }
    if ((len & 1) === 0 && secondChild === Math.trunc((len - 2) / 2)) {
      secondChild = 2 * (secondChild + 1)
      idx[first + holeIndex] = idx[first + secondChild - 1]
      holeIndex = secondChild - 1
    }
    pushHeap(first, holeIndex, topIndex, value)
  }
  const makeHeap = (first: number, last: number) => {
    const len = last - first
    if (len < 2) return
    let parent = Math.trunc((len - 2) / 2)
    for (;;) {
      adjustHeap(first, parent, len, idx[first + parent])
      if (parent === 0) return
      parent--
    }
  }
  const popHeap = (first: number, last: number, result: number) => {
    const value = idx[result]
    idx[result] = idx[first]
    adjustHeap(first, 0, last - first, value)
  }
  makeHeap(0, k)
  for (let i = k; i < n; i++) if (comp(idx[i], idx[0])) popHeap(0, k, i)
  return idx.slice(0, k).sort()
}
