// The hyper-connections' collapse: argument checks and the Math.fround reference of the native
// hcCollapse (native/src/hc_collapse.cc). For each token t, the sublayer input
//   out_t = act(sum_j pre_{t,j} * h_{t,j}), j ascending,
// every product and sum rounded to float32, act = bf16 round to nearest even when bf16, else
// identity. NaN written canonical.
import { bitsView, storeOutput } from './output.ts'
import { checkBoolean, checkFloat32Shape, checkIntegers } from './validate.ts'

const fround = Math.fround

/** Checked hcCollapse arguments. */
export interface HcCollapseArgs {
  h: Float32Array
  n: number
  pre: Float32Array
  hc: number
  hidden: number
  bf16: boolean
  out: Float32Array
}

export function checkHcCollapse (kernel: string, h: unknown, n: unknown, pre: unknown, hc: unknown, hidden: unknown,
  bf16: unknown, out: unknown): HcCollapseArgs {
  const [N, H, D] = checkIntegers(kernel, [['n', n, 0], ['hc', hc, 1], ['hidden', hidden, 1]])
  const flag = checkBoolean(kernel, 'bf16', bf16)
  const arr = (name: string, v: unknown, dims: number[], shape: string) => checkFloat32Shape(kernel, name, v, dims, shape)
  const hs = arr('h', h, [N * H * D], '[n * hc * hidden]')
  const ps = arr('pre', pre, [N * H], '[n * hc]')
  const o = out === undefined ? new Float32Array(N * D) : arr('out', out, [N * D], '[n * hidden]')
  return { h: hs, n: N, pre: ps, hc: H, hidden: D, bf16: flag, out: o }
}

/** Reference: returns out [n, hidden]. */
export function hcCollapse (h: Float32Array, n: number, pre: Float32Array, hc: number, hidden: number, bf16: boolean,
  out?: Float32Array): Float32Array {
  const a = checkHcCollapse('reference.hcCollapse', h, n, pre, hc, hidden, bf16, out)
  const o = a.out
  const bits = bitsView(o)
  for (let t = 0; t < n; t++) {
    const row = t * hc * hidden
    const at = t * hidden
    const w0 = a.pre[t * hc]
    for (let d = 0; d < hidden; d++) o[at + d] = fround(w0 * a.h[row + d])
    for (let j = 1; j < hc; j++) {
      const wj = a.pre[t * hc + j]
      const src = row + j * hidden
      for (let d = 0; d < hidden; d++) o[at + d] = fround(o[at + d] + fround(wj * a.h[src + d]))
    }
    for (let d = 0; d < hidden; d++) storeOutput(o, bits, at + d, o[at + d], a.bf16)
  }
  return o
}
