// Manifold-constrained hyper-connections: hc_mult residual streams per token, collapsed into the
// sublayer input by `pre`, written back by `post` and mixed by a Sinkhorn-projected `comb`.
// Everything here is fp32 as in transformers (the mixing maths upcasts); only the collapsed input,
// the mixing weights and the new streams are cast to the activation dtype.
import { expF32, hcCollapse, hcPost as hcPostKernel, matmulF32, rmsNorm, sigmoidF32 } from '../../kernels/index.ts'
import type { ActivationRounding } from './activation.ts'
import { scratch } from './scratch.ts'

const fround = Math.fround

/** The learned parameters of one hyper-connection site (attn_hc / ffn_hc). */
export interface HcParams {
  /** [(2 + hc) * hc, hc * hidden] */
  fn: Float32Array
  /** [(2 + hc) * hc] */
  base: Float32Array
  /** [3]: pre, post, comb */
  scale: Float32Array
}

/** Shapes and constants of the hyper-connections. */
export interface HcShape {
  hc: number
  hidden: number
  sinkhornIters: number
  hcEps: number
  rmsEps: number
}

/** What a site's mapping produced for n tokens. */
export interface HcMix {
  /** [n, hc] in [0, 2] */
  post: Float32Array
  /** [n, hc, hc], comb[j][k] weighs stream j into new stream k */
  comb: Float32Array
  /** [n, hidden], the sublayer input before its norm */
  collapsed: Float32Array
}

const onesCache = new Map<number, Float32Array>()
function ones (d: number): Float32Array {
  let o = onesCache.get(d)
  if (o === undefined) onesCache.set(d, o = new Float32Array(d).fill(1))
  return o
}

// Unweighted fp32 RMSNorm of each token's flattened streams, then the mixing logits.
function mixLogits (h: Float32Array, n: number, s: HcShape, fn: Float32Array, outs: number): Float32Array {
  const width = s.hc * s.hidden
  // The flat norm lives only until the matmul has read it: a scratch slot, not n * hc * hidden fresh floats per site.
  const flat = rmsNorm(h, n, width, ones(width), s.rmsEps, scratch('hc-flat-norm', n * width))
  return matmulF32(flat, n, width, fn, outs)
}

/**
 * Sinkhorn as transformers writes it, in place on one hc x hc matrix (row-major, c[j*hc + k]):
 * softmax over k, + eps, column-normalise, then iters-1 rounds of row- then column-normalise,
 * each dividing by (sum + eps) with sums in ascending index.
 */
export function sinkhorn (c: Float32Array, off: number, hc: number, iters: number, eps: number): void {
  const eps32 = fround(eps)
  for (let j = 0; j < hc; j++) {
    const r = off + j * hc
    let max = c[r]
    for (let k = 1; k < hc; k++) if (c[r + k] > max) max = c[r + k]
    let sum = 0
    for (let k = 0; k < hc; k++) {
      c[r + k] = expF32(fround(c[r + k] - max))
      sum = fround(sum + c[r + k])
    }
    for (let k = 0; k < hc; k++) c[r + k] = fround(fround(c[r + k] / sum) + eps32)
  }
  const columns = () => {
    for (let k = 0; k < hc; k++) {
      let sum = 0
      for (let j = 0; j < hc; j++) sum = fround(sum + c[off + j * hc + k])
      const den = fround(sum + eps32)
      for (let j = 0; j < hc; j++) c[off + j * hc + k] = fround(c[off + j * hc + k] / den)
    }
  }
  const rows = () => {
    for (let j = 0; j < hc; j++) {
      let sum = 0
      for (let k = 0; k < hc; k++) sum = fround(sum + c[off + j * hc + k])
      const den = fround(sum + eps32)
      for (let k = 0; k < hc; k++) c[off + j * hc + k] = fround(c[off + j * hc + k] / den)
    }
  }
  columns()
  for (let i = 0; i < iters - 1; i++) {
    rows()
    columns()
  }
}

/**
 * A site's mapping for n tokens of streams h [n, hc, hidden]: pre = sigmoid(l*s0 + b) + eps,
 * post = 2 sigmoid(l*s1 + b), comb = Sinkhorn(l*s2 + b), collapsed = act(sum_j pre_j h_j).
 */
export function hcPre (h: Float32Array, n: number, p: HcParams, s: HcShape, act: ActivationRounding): HcMix {
  const { hc, hidden } = s
  const mix = (2 + hc) * hc
  const logits = mixLogits(h, n, s, p.fn, mix)
  const eps32 = fround(s.hcEps)
  const [s0, s1, s2] = p.scale
  const pre = new Float32Array(n * hc)
  const post = new Float32Array(n * hc)
  const comb = new Float32Array(n * hc * hc)
  for (let t = 0; t < n; t++) {
    const l = t * mix
    for (let i = 0; i < hc; i++) {
      pre[t * hc + i] = fround(sigmoidF32(fround(fround(logits[l + i] * s0) + p.base[i])) + eps32)
      post[t * hc + i] = fround(2 * sigmoidF32(fround(fround(logits[l + hc + i] * s1) + p.base[hc + i])))
    }
    const c = t * hc * hc
    for (let i = 0; i < hc * hc; i++) comb[c + i] = fround(fround(logits[l + 2 * hc + i] * s2) + p.base[2 * hc + i])
    sinkhorn(comb, c, hc, s.sinkhornIters, s.hcEps)
  }
  // collapsed = act(sum_j pre_j h_j), j ascending (the native kernel; src/kernels/hc-collapse.ts its reference).
  return { post, comb, collapsed: hcCollapse(h, n, pre, hc, hidden, act.bf16) }
}

/**
 * Write a sublayer's output back: new_k = act(act(post_k * out) + act(sum_j comb[j][k] * h_j)),
 * post and comb first cast to the activation dtype (transformers' `.to(dtype)`). Returns new streams
 * (in `out` when given: not h or sub).
 */
export function hcPost (h: Float32Array, n: number, mix: HcMix, sub: Float32Array, s: HcShape, act: ActivationRounding, out?: Float32Array): Float32Array {
  // The native kernel (src/kernels/hc-post.ts is its Math.fround reference, this loop as it was).
  return hcPostKernel(h, n, mix.post, mix.comb, sub, s.hc, s.hidden, act.bf16, out)
}

/** The hyper head's parameters. */
export interface HcHeadParams {
  /** [hc, hc * hidden] */
  fn: Float32Array
  /** [hc] */
  base: Float32Array
  /** [1] */
  scale: Float32Array
}

/** The final collapse of the streams: pre = sigmoid(l * scale + base) + eps, out = act(sum_j pre_j h_j). */
export function hcHead (h: Float32Array, n: number, p: HcHeadParams, s: HcShape, act: ActivationRounding): Float32Array {
  const { hc, hidden } = s
  const logits = mixLogits(h, n, s, p.fn, hc)
  const eps32 = fround(s.hcEps)
  const pre = new Float32Array(n * hc)
  for (let t = 0; t < n; t++) {
    for (let i = 0; i < hc; i++) pre[t * hc + i] = fround(sigmoidF32(fround(fround(logits[t * hc + i] * p.scale[0]) + p.base[i])) + eps32)
  }
  return hcCollapse(h, n, pre, hc, hidden, act.bf16)
}
