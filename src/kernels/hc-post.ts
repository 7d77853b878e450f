// The hyper-connections' write-back: argument checks and the Math.fround reference of the native
// hcPost (native/src/hc_post.cc). For each token t and stream k:
//   new_k = act(act(post_k * sub) + act(sum_j comb[j][k] * h_j)), j ascending,
// every product and sum rounded to float32, post and comb first cast by act (bf16 round to nearest
// even when bf16, else identity; transformers' `.to(dtype)`). NaN written canonical.
import { bitsView, storeOutput } from './output.ts'
import { roundBf16InPlace } from './reference.ts'
import { checkBoolean, checkFloat32Shape, checkIntegers } from './validate.ts'

const fround = Math.fround

/** Checked hcPost arguments. */
export interface HcPostArgs {
  h: Float32Array
  n: number
  post: Float32Array
  comb: Float32Array
  sub: Float32Array
  hc: number
  hidden: number
  bf16: boolean
  out: Float32Array
}

export function checkHcPost (kernel: string, h: unknown, n: unknown, post: unknown, comb: unknown, sub: unknown,
  hc: unknown, hidden: unknown, bf16: unknown, out: unknown): HcPostArgs {
  const [N, H, D] = checkIntegers(kernel, [['n', n, 0], ['hc', hc, 1], ['hidden', hidden, 1]])
  const flag = checkBoolean(kernel, 'bf16', bf16)
  const arr = (name: string, v: unknown, dims: number[], shape: string) => checkFloat32Shape(kernel, name, v, dims, shape)
  const hs = arr('h', h, [N * H * D], '[n * hc * hidden]')
  const ps = arr('post', post, [N * H], '[n * hc]')
  const cs = arr('comb', comb, [N * H * H], '[n * hc * hc]')
  const ss = arr('sub', sub, [N * D], '[n * hidden]')
  const o = out === undefined ? new Float32Array(N * H * D) : arr('out', out, [N * H * D], '[n * hc * hidden]')
  return { h: hs, n: N, post: ps, comb: cs, sub: ss, hc: H, hidden: D, bf16: flag, out: o }
}

/** Reference: returns out [n, hc, hidden]. */
export function hcPost (h: Float32Array, n: number, post: Float32Array, comb: Float32Array, sub: Float32Array,
  hc: number, hidden: number, bf16: boolean, out?: Float32Array): Float32Array {
  const a = checkHcPost('reference.hcPost', h, n, post, comb, sub, hc, hidden, bf16, out)
  const round = (x: Float32Array, from = 0, to = x.length): void => { if (a.bf16) roundBf16InPlace(x, from, to) }
  const o = a.out
  const bits = bitsView(o)
  const p = new Float32Array(hc)
  const c = new Float32Array(hc * hc)
  const placed = new Float32Array(hidden)
  const column = new Float32Array(hc)
  for (let t = 0; t < n; t++) {
    p.set(a.post.subarray(t * hc, (t + 1) * hc))
    c.set(a.comb.subarray(t * hc * hc, (t + 1) * hc * hc))
    round(p)
    round(c)
    const row = t * hc * hidden
    const subOff = t * hidden
    for (let k = 0; k < hc; k++) {
      const at = row + k * hidden
      for (let j = 0; j < hc; j++) column[j] = c[j * hc + k]
      const pk = p[k]
      for (let d = 0; d < hidden; d++) {
        let acc = fround(column[0] * a.h[row + d])
        for (let j = 1; j < hc; j++) acc = fround(acc + fround(column[j] * a.h[row + j * hidden + d]))
        o[at + d] = acc
        placed[d] = fround(pk * a.sub[subOff + d])
      }
      round(o, at, at + hidden)
      round(placed)
      for (let d = 0; d < hidden; d++) o[at + d] = fround(placed[d] + o[at + d])
      round(o, at, at + hidden)
      for (let d = 0; d < hidden; d++) storeOutput(o, bits, at + d, o[at + d], false)
    }
  }
  return o
}
