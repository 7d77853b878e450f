// The two RMSNorms of DeepSeek-V4, with transformers' rounding points.
import { rmsNorm, unweightedNormRows } from '../../kernels/index.ts'
import type { ActivationRounding } from './activation.ts'

const fround = Math.fround

const onesCache = new Map<number, Float32Array>()
function ones (d: number): Float32Array {
  let o = onesCache.get(d)
  if (o === undefined) onesCache.set(d, o = new Float32Array(d).fill(1))
  return o
}

/**
 * DeepseekV4RMSNorm over `rows` rows of length d: x̂ = x / sqrt(mean(x²) + eps) in fp32, cast to the
 * activation dtype, then times the weight and cast again: act(w * act(x̂)). The kernel's sum order.
 */
export function weightedRmsNorm (x: Float32Array, rows: number, d: number, weight: Float32Array, eps: number, act: ActivationRounding): Float32Array {
  if (!act.bf16) return rmsNorm(x, rows, d, weight, eps)
  const y = act.roundAll(rmsNorm(x, rows, d, ones(d), eps))
  for (let r = 0; r < rows; r++) {
    const off = r * d
    for (let i = 0; i < d; i++) y[off + i] = fround(weight[i] * y[off + i])
  }
  return act.roundAll(y)
}

/**
 * DeepseekV4UnweightedRMSNorm of each of `rows` rows of length d, in place: the factor
 * 1 / sqrt(mean(x²) + eps) is computed in fp32 and cast to the activation dtype before the
 * multiply: x <- act(x * act(r)). The native kernel (src/kernels/unweighted-norm.ts its reference).
 */
export function unweightedRmsNormRows (x: Float32Array, rows: number, d: number, eps: number, act: ActivationRounding): Float32Array {
  return unweightedNormRows(x, rows, d, eps, act.bf16)
}
