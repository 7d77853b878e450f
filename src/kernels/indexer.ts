// The lightning indexer's scores: argument checks and the Math.fround reference that
// native/src/indexer.cc matches bit for bit.
import { NumericsError } from '../errors.ts'
import { dotInKernelOrder } from './order.ts'
import { bitsView, storeOutput } from './output.ts'
import { checkArray, checkFinite, checkOut, checkShape, checkSize } from './validate.ts'

const fround = Math.fround

/** Checked indexerScores arguments, with the output allocated when absent. */
export interface IndexerArgs {
  q: Float32Array, t: number, h: number, d: number, entries: Float32Array, n: number
  weights: Float32Array, visible: Int32Array, qScale: number, wScale: number, out: Float32Array
}

/** Validate indexerScores arguments: shapes, every visible[t] in [0, N], finite scales. */
export function checkIndexer (kernel: string, q: unknown, t: unknown, h: unknown, d: unknown, entries: unknown, n: unknown,
  weights: unknown, visible: unknown, qScale: unknown, wScale: unknown, out: unknown): IndexerArgs {
  const qs = checkArray(kernel, 'q', q, 'Float32Array')
  const ts = checkSize(kernel, 'T', t)
  const hs = checkSize(kernel, 'Hi', h)
  const ds = checkSize(kernel, 'Di', d)
  const es = checkArray(kernel, 'entries', entries, 'Float32Array')
  const ns = checkSize(kernel, 'N', n)
  const ws = checkArray(kernel, 'weights', weights, 'Float32Array')
  const vis = checkArray(kernel, 'visible', visible, 'Int32Array')
  checkShape(kernel, 'q', qs, [ts, hs, ds], '[T, Hi, Di]')
  checkShape(kernel, 'entries', es, [ns, ds], '[N, Di]')
  checkShape(kernel, 'weights', ws, [ts, hs], '[T, Hi]')
  checkShape(kernel, 'visible', vis, [ts], '[T]')
  for (let i = 0; i < ts; i++) {
    if (vis[i] < 0 || vis[i] > ns) throw new NumericsError(`${kernel}: visible[${i}] = ${vis[i]} is outside [0, N = ${ns}]`)
  }
  const qsc = checkFinite(kernel, 'qScale', qScale)
  const wsc = checkFinite(kernel, 'wScale', wScale)
  const o = checkOut(kernel, out, [ts, ns], '[T, N]', [['q', qs], ['entries', es], ['weights', ws]])
  return { q: qs, t: ts, h: hs, d: ds, entries: es, n: ns, weights: ws, visible: vis, qScale: qsc, wScale: wsc, out: o }
}

/**
 * Reference lightning-indexer scores. q [T, Hi, Di] (roped), entries [N, Di], weights [T, Hi],
 * visible [T], qScale and wScale (rounded to float32). For n < visible[t], every step float32:
 *   score[t, n] = ((0 + w_0 r_0) + w_1 r_1) + ...   over heads h in order, where
 *   w_h = weights[t, h] * wScale,  r_h = relu(dotInKernelOrder(q[t, h], entries[n])) * qScale
 * and relu(x) = x <= 0 ? +0 : x (NaN passes). score[t, n] = -Inf for n >= visible[t].
 * NaN outputs canonical. Returns out [T, N].
 */
export function indexerScores (q: Float32Array, t: number, h: number, d: number, entries: Float32Array, n: number,
  weights: Float32Array, visible: Int32Array, qScale: number, wScale: number, out?: Float32Array): Float32Array {
  const a = checkIndexer('reference.indexerScores', q, t, h, d, entries, n, weights, visible, qScale, wScale, out)
  const qs = fround(a.qScale)
  const ws = fround(a.wScale)
  const outBits = bitsView(a.out)
  const wq = new Float64Array(a.h)
  for (let ti = 0; ti < a.t; ti++) {
    for (let hi = 0; hi < a.h; hi++) wq[hi] = fround(a.weights[ti * a.h + hi] * ws)
    const vis = a.visible[ti]
    for (let ni = 0; ni < a.n; ni++) {
      if (ni >= vis) {
        a.out[ti * a.n + ni] = -Infinity
        continue
      }
      let acc = 0
      for (let hi = 0; hi < a.h; hi++) {
        const dot = dotInKernelOrder(a.q, (ti * a.h + hi) * a.d, a.entries, ni * a.d, a.d)
        const r = dot <= 0 ? 0 : dot
        acc = fround(acc + fround(wq[hi] * fround(r * qs)))
      }
      storeOutput(a.out, outBits, ti * a.n + ni, acc, false)
    }
  }
  return a.out
}
