// Multi-query attention with per-head sinks over one shared K = V table: its options, argument
// checks and the Math.fround reference that native/src/attention.cc matches bit for bit.
import { NumericsError } from '../errors.ts'
import { roundBf16 } from '../numerics/bf16.ts'
import { expF32 } from './fmath.ts'
import { dotInKernelOrder } from './order.ts'
import { bitsView, storeOutput } from './output.ts'
import { checkArray, checkFinite, checkFlags, checkOut, checkShape, checkSize } from './validate.ts'

const fround = Math.fround

/** Rounding switches of attentionMqa (all off: everything float32). */
export interface AttentionOptions {
  /**
   * transformers' bf16 eager path: the dot product rounded to bf16, the scaled score rounded to
   * bf16, and each difference to the max (keys and sink) rounded to bf16 before exp.
   */
  roundScoresBf16?: boolean
  /** Probabilities rounded to bf16 before the value product (transformers casts them to bf16). */
  roundProbsBf16?: boolean
  /** The output rounded to bf16. */
  roundOutBf16?: boolean
}

const FLAGS = ['roundScoresBf16', 'roundProbsBf16', 'roundOutBf16'] as const

/** Native flag bits, as native/src/entry_attention.cc reads them. */
export function attentionFlagBits (o: Record<typeof FLAGS[number], boolean>): number {
  return (o.roundScoresBf16 ? 1 : 0) | (o.roundProbsBf16 ? 2 : 0) | (o.roundOutBf16 ? 4 : 0)
}

/** Checked attentionMqa arguments, with the output allocated when absent. */
export interface AttentionArgs {
  q: Float32Array, t: number, h: number, d: number, kv: Float32Array, n: number
  offsets: Int32Array, keyIndex: Int32Array, sinks: Float32Array, scale: number, out: Float32Array
  flags: Record<typeof FLAGS[number], boolean>
}

/**
 * Validate attentionMqa arguments: shapes, CSR offsets (start at 0, non-decreasing, end at
 * keyIndex.length), every key index in [0, N), a finite scale, the option flags.
 */
export function checkAttention (kernel: string, q: unknown, t: unknown, h: unknown, d: unknown, kv: unknown, n: unknown,
  offsets: unknown, keyIndex: unknown, sinks: unknown, scale: unknown, out: unknown, opts: unknown): AttentionArgs {
  const qs = checkArray(kernel, 'q', q, 'Float32Array')
  const ts = checkSize(kernel, 'T', t)
  const hs = checkSize(kernel, 'H', h)
  const ds = checkSize(kernel, 'D', d)
  const kvs = checkArray(kernel, 'kv', kv, 'Float32Array')
  const ns = checkSize(kernel, 'N', n)
  const off = checkArray(kernel, 'offsets', offsets, 'Int32Array')
  const keys = checkArray(kernel, 'keyIndex', keyIndex, 'Int32Array')
  const sk = checkArray(kernel, 'sinks', sinks, 'Float32Array')
  checkShape(kernel, 'q', qs, [ts, hs, ds], '[T, H, D]')
  checkShape(kernel, 'kv', kvs, [ns, ds], '[N, D]')
  checkShape(kernel, 'offsets', off, [ts + 1], '[T + 1]')
  checkShape(kernel, 'sinks', sk, [hs], '[H]')
  if (off[0] !== 0) throw new NumericsError(`${kernel}: offsets[0] must be 0, got ${off[0]}`)
  for (let i = 0; i < ts; i++) {
    if (off[i + 1] < off[i]) throw new NumericsError(`${kernel}: offsets must be non-decreasing, but offsets[${i + 1}] = ${off[i + 1]} < offsets[${i}] = ${off[i]}`)
  }
  if (off[ts] !== keys.length) throw new NumericsError(`${kernel}: offsets[T] = ${off[ts]} must equal the length of keyIndex, ${keys.length}`)
  for (let i = 0; i < keys.length; i++) {
    if (keys[i] < 0 || keys[i] >= ns) throw new NumericsError(`${kernel}: keyIndex[${i}] = ${keys[i]} is outside the ${ns} rows of kv`)
  }
  const sc = checkFinite(kernel, 'scale', scale)
  const flags = checkFlags(kernel, opts, FLAGS)
  const o = checkOut(kernel, out, [ts, hs, ds], '[T, H, D]', [['q', qs], ['kv', kvs], ['sinks', sk]])
  return { q: qs, t: ts, h: hs, d: ds, kv: kvs, n: ns, offsets: off, keyIndex: keys, sinks: sk, scale: sc, out: o, flags }
}

/**
 * Reference multi-query attention with sinks. q [T, H, D] (normed, roped), kv [N, D] (each row
 * both key and value), query t attends to rows keyIndex[offsets[t] .. offsets[t+1]) in that
 * order, sinks [H], scale (rounded to float32). Per (t, h), every step rounded to float32:
 *   s_j = dotInKernelOrder(q[t, h], kv[key_j]) * scale
 *   m = sinks[h], then m = s_j wherever s_j > m (keys in order)
 *   e_j = expF32(s_j - m), e_sink = expF32(sinks[h] - m)
 *   sum = ((0 + e_0) + e_1) + ... + e_sink
 *   p_j = e_j / sum
 *   out[t, h, d] = ((0 + p_0 kv[key_0][d]) + p_1 kv[key_1][d]) + ...
 * with the bf16 rounding points of `opts`; NaN outputs canonical. Returns out [T, H, D].
 */
export function attentionMqa (q: Float32Array, t: number, h: number, d: number, kv: Float32Array, n: number,
  offsets: Int32Array, keyIndex: Int32Array, sinks: Float32Array, scale: number, out?: Float32Array,
  opts?: AttentionOptions): Float32Array {
  const a = checkAttention('reference.attentionMqa', q, t, h, d, kv, n, offsets, keyIndex, sinks, scale, out, opts)
  const { roundScoresBf16: rs, roundProbsBf16: rp, roundOutBf16: ro } = a.flags
  const sc = fround(a.scale)
  const outBits = bitsView(a.out)
  const D = a.d
  let s = new Float64Array(0)
  for (let ti = 0; ti < a.t; ti++) {
    const k0 = a.offsets[ti]
    const K = a.offsets[ti + 1] - k0
    if (s.length < K) s = new Float64Array(K)
    for (let hi = 0; hi < a.h; hi++) {
      const qOff = (ti * a.h + hi) * D
      for (let j = 0; j < K; j++) {
        const dot = dotInKernelOrder(a.q, qOff, a.kv, a.keyIndex[k0 + j] * D, D)
        s[j] = rs ? roundBf16(fround(roundBf16(dot) * sc)) : fround(dot * sc)
      }
      const sink = a.sinks[hi]
      let m = sink
      for (let j = 0; j < K; j++) if (s[j] > m) m = s[j]
      for (let j = 0; j < K; j++) {
        const diff = fround(s[j] - m)
        s[j] = expF32(rs ? roundBf16(diff) : diff)
      }
      const sinkDiff = fround(sink - m)
      const eSink = expF32(rs ? roundBf16(sinkDiff) : sinkDiff)
      let sum = 0
      for (let j = 0; j < K; j++) sum = fround(sum + s[j])
      sum = fround(sum + eSink)
      for (let j = 0; j < K; j++) {
        const p = fround(s[j] / sum)
        s[j] = rp ? roundBf16(p) : p
      }
      for (let c = 0; c < D; c++) {
        let acc = 0
        for (let j = 0; j < K; j++) acc = fround(acc + fround(s[j] * a.kv[a.keyIndex[k0 + j] * D + c]))
        storeOutput(a.out, outBits, qOff + c, acc, ro)
      }
    }
  }
  return a.out
}
