// The compressor's softmax pooling: options, argument checks and the Math.fround reference that
// native/src/pool.cc matches bit for bit.
import { NumericsError } from '../errors.ts'
import { roundBf16 } from '../numerics/bf16.ts'
import { expF32 } from './fmath.ts'
import { bitsView, storeOutput } from './output.ts'
import { checkArray, checkFlags, checkOut, checkShape, checkSize } from './validate.ts'

const fround = Math.fround

/** Rounding switches of softmaxPool (all off: everything float32). */
export interface PoolOptions {
  /** The softmax weights rounded to bf16 (transformers casts the fp32 softmax to the model dtype). */
  roundWeightsBf16?: boolean
  /** Each product p * kv rounded to bf16 (transformers' bf16 product tensor before the sum). */
  roundProductsBf16?: boolean
  /** The pooled row rounded to bf16. */
  roundOutBf16?: boolean
}

const FLAGS = ['roundWeightsBf16', 'roundProductsBf16', 'roundOutBf16'] as const

/** Native flag bits, as native/src/entry_pool.cc reads them. */
export function poolFlagBits (o: Record<typeof FLAGS[number], boolean>): number {
  return (o.roundWeightsBf16 ? 1 : 0) | (o.roundProductsBf16 ? 2 : 0) | (o.roundOutBf16 ? 4 : 0)
}

/** Checked softmaxPool arguments, with the output allocated when absent. */
export interface PoolArgs {
  kv: Float32Array, gate: Float32Array, w: number, rows: number, d: number, out: Float32Array
  flags: Record<typeof FLAGS[number], boolean>
}

/** Validate softmaxPool arguments: kv and gate [W, rows, d], rows >= 1, the option flags. */
export function checkPool (kernel: string, kv: unknown, gate: unknown, w: unknown, rows: unknown, d: unknown,
  out: unknown, opts: unknown): PoolArgs {
  const kvs = checkArray(kernel, 'kv', kv, 'Float32Array')
  const gs = checkArray(kernel, 'gate', gate, 'Float32Array')
  const ws = checkSize(kernel, 'W', w)
  const rs = checkSize(kernel, 'rows', rows)
  const ds = checkSize(kernel, 'd', d)
  if (rs < 1) throw new NumericsError(`${kernel}: rows must be at least 1, got ${rs}`)
  checkShape(kernel, 'kv', kvs, [ws, rs, ds], '[W, rows, d]')
  checkShape(kernel, 'gate', gs, [ws, rs, ds], '[W, rows, d]')
  const flags = checkFlags(kernel, opts, FLAGS)
  const o = checkOut(kernel, out, [ws, ds], '[W, d]', [['kv', kvs], ['gate', gs]])
  return { kv: kvs, gate: gs, w: ws, rows: rs, d: ds, out: o, flags }
}

/**
 * Reference softmax pooling. kv and gate [W, rows, d] (gate already including the position bias;
 * -Inf rows get weight 0). Per window w and channel c, every step float32:
 *   m = gate[w, 0, c], then m = g_r wherever g_r > m (rows in order)
 *   e_r = expF32(g_r - m); sum = ((0 + e_0) + e_1) + ...; p_r = e_r / sum
 *   y[w, c] = ((0 + p_0 kv_0) + p_1 kv_1) + ...
 * with the bf16 rounding points of `opts`; NaN outputs canonical (all -Inf gates give NaN, as
 * torch's softmax does). Returns out [W, d].
 */
export function softmaxPool (kv: Float32Array, gate: Float32Array, w: number, rows: number, d: number,
  out?: Float32Array, opts?: PoolOptions): Float32Array {
  const a = checkPool('reference.softmaxPool', kv, gate, w, rows, d, out, opts)
  const { roundWeightsBf16: rw, roundProductsBf16: rp, roundOutBf16: ro } = a.flags
  const outBits = bitsView(a.out)
  const e = new Float64Array(a.rows)
  for (let wi = 0; wi < a.w; wi++) {
    const base = wi * a.rows * a.d
    for (let c = 0; c < a.d; c++) {
      let m = a.gate[base + c]
      for (let r = 1; r < a.rows; r++) {
        const g = a.gate[base + r * a.d + c]
        if (g > m) m = g
      }
      let sum = 0
      for (let r = 0; r < a.rows; r++) {
        e[r] = expF32(fround(a.gate[base + r * a.d + c] - m))
        sum = fround(sum + e[r])
      }
      let acc = 0
      for (let r = 0; r < a.rows; r++) {
        let p = fround(e[r] / sum)
        if (rw) p = roundBf16(p)
        let prod = fround(p * a.kv[base + r * a.d + c])
        if (rp) prod = roundBf16(prod)
        acc = fround(acc + prod)
      }
      storeOutput(a.out, outBits, wi * a.d + c, acc, ro)
    }
  }
  return a.out
}
