// An independent float64 check: catches a reference that is wrong in the same way as the kernel
// (wrong indexing, transposed weights, a dropped term), which bit-exactness alone cannot.
import { describe, it, expect } from 'vitest'
import { matmulBf16, matmulF32, rmsNorm } from '../../src/kernels/index.ts'
import { bf16ToF32 } from '../../src/numerics/bf16.ts'
import { bf16Codes, makeRng, uniformF32 } from './fixtures.ts'

const U = 2 ** -24 // unit roundoff of float32

/**
 * Roundings a single product meets in the kernel order: its own product, at most ceil(k/8) lane
 * adds (k8/8 of them, the first onto +0), 3 tree adds, and at most k % 8 tail adds.
 */
function roundingsOnPath (k: number): number {
  return 1 + Math.floor(k / 8) + 3 + (k % 8)
}

/** gamma_L = L u / (1 - L u): the classic bound on L chained roundings (Higham, ch. 3). */
function gamma (l: number): number {
  return (l * U) / (1 - l * U)
}

describe('matmul: within the rounding-error bound of the float64 dot product', () => {
  it('holds |y - exact| <= gamma_L * sum |x_i w_ij| (+ float64 slack) for f32 and bf16 weights', () => {
    const rng = makeRng(31)
    for (const k of [1, 7, 33, 257, 4096]) {
      const m = 3
      const n = 5
      const x = uniformF32(m * k, rng, 2)
      const w = uniformF32(n * k, rng, 0.5)
      const wb = bf16Codes(n * k, rng, 0.5)
      const y = matmulF32(x, m, k, w, n)
      const yb = matmulBf16(x, m, k, wb, n)
      for (const [label, out, weightAt] of [
        ['f32', y, (j: number, p: number) => w[j * k + p]],
        ['bf16', yb, (j: number, p: number) => bf16ToF32(wb[j * k + p])],
      ] as const) {
        for (let i = 0; i < m; i++) {
          for (let j = 0; j < n; j++) {
            let exact = 0
            let magnitude = 0
            for (let p = 0; p < k; p++) {
              const prod = x[i * k + p] * weightAt(j, p) // exact in float64 (24 + 24 bits)
              exact += prod
              magnitude += Math.abs(prod)
            }
            // The float64 sum's own error is at most k * 2^-53 * magnitude.
            const bound = gamma(roundingsOnPath(k)) * magnitude + k * 2 ** -53 * magnitude
            const err = Math.abs(out[i * n + j] - exact)
            expect(err, `${label} k=${k} (${i}, ${j}): err ${err} > bound ${bound}`).toBeLessThanOrEqual(bound)
          }
        }
      }
    }
  })
})

describe('rmsNorm: within the rounding-error bound of the float64 formula', () => {
  it('holds |y - exact| <= (gamma_L / 2 + 8u) |exact| for every element', () => {
    // ss carries a relative error <= gamma_L (all terms positive); mean, + eps, sqrt, 1/, x*r and *w
    // each add at most u, and sqrt halves ss's error: first order (L/2 + 6) u, 8u leaves margin.
    const rng = makeRng(32)
    for (const d of [1, 7, 64, 1000, 4096]) {
      const rows = 4
      const x = uniformF32(rows * d, rng, 5)
      const weight = uniformF32(d, rng, 2)
      const eps = 1e-6
      const y = rmsNorm(x, rows, d, weight, eps)
      const rel = gamma(roundingsOnPath(d)) / 2 + 8 * U
      for (let r = 0; r < rows; r++) {
        let ss = 0
        for (let i = 0; i < d; i++) ss += x[r * d + i] * x[r * d + i]
        const inv = 1 / Math.sqrt(ss / d + Math.fround(eps))
        for (let i = 0; i < d; i++) {
          const exact = x[r * d + i] * inv * weight[i]
          const err = Math.abs(y[r * d + i] - exact)
          expect(err, `d=${d} row ${r} i=${i}`).toBeLessThanOrEqual(rel * Math.abs(exact) + 2 ** -149)
        }
      }
    }
  })
})
