// A row's result never depends on how many rows, columns or threads were in the call.
import { describe, it, expect, afterAll } from 'vitest'
import {
  getKernelThreads, kernelParallelThreshold, matmulBf16, matmulF32, reference, rmsNorm, setKernelThreads,
} from '../../src/kernels/index.ts'
import { bitReport, bf16Codes, makeRng, uniformF32 } from './fixtures.ts'

const defaultThreads = getKernelThreads()
afterAll(() => setKernelThreads(defaultThreads))

/** Column j of a row-major [m, n] matrix. */
function column (y: Float32Array, m: number, n: number, j: number): Float32Array {
  return Float32Array.from({ length: m }, (_, i) => y[i * n + j])
}

describe('matmul: rows of a batch equal separate matrix-vector calls', () => {
  it('row i of m=5 is bit-identical to the m=1 call on that row (f32 and bf16 weights)', () => {
    const rng = makeRng(11)
    for (const k of [1, 7, 31, 257, 4096]) {
      const m = 5
      const n = 17
      const x = uniformF32(m * k, rng)
      const w = uniformF32(n * k, rng, 0.1)
      const wb = bf16Codes(n * k, rng, 0.1)
      const batch = matmulF32(x, m, k, w, n)
      const batchB = matmulBf16(x, m, k, wb, n)
      for (let i = 0; i < m; i++) {
        const row = x.subarray(i * k, (i + 1) * k)
        expect(bitReport(matmulF32(row, 1, k, w, n), batch.subarray(i * n, (i + 1) * n)), `f32 k=${k} i=${i}`).toBe('identical')
        expect(bitReport(matmulBf16(row, 1, k, wb, n), batchB.subarray(i * n, (i + 1) * n)), `bf16 k=${k} i=${i}`).toBe('identical')
      }
    }
  })

  it('column j of n=17 is bit-identical to the n=1 call on weight row j', () => {
    const rng = makeRng(12)
    const m = 5
    const n = 17
    const k = 257
    const x = uniformF32(m * k, rng)
    const w = uniformF32(n * k, rng)
    const full = matmulF32(x, m, k, w, n)
    for (let j = 0; j < n; j++) {
      const single = matmulF32(x, m, k, w.subarray(j * k, (j + 1) * k), 1)
      expect(bitReport(single, column(full, m, n, j)), `j=${j}`).toBe('identical')
    }
  })
})

describe('matmul: the thread count does not change any bit', () => {
  it('gives identical results with 1, 2, 3 and 7 threads on a call large enough to be split', () => {
    const rng = makeRng(13)
    const m = 5
    const n = 67
    const k = 4096
    expect(m * n * k).toBeGreaterThanOrEqual(kernelParallelThreshold())
    const x = uniformF32(m * k, rng)
    const w = uniformF32(n * k, rng, 0.05)
    const wb = bf16Codes(n * k, rng, 0.05)
    setKernelThreads(1)
    const one = matmulF32(x, m, k, w, n)
    const oneB = matmulBf16(x, m, k, wb, n)
    expect(bitReport(one, reference.matmulF32(x, m, k, w, n))).toBe('identical')
    for (const threads of [2, 3, 7]) {
      setKernelThreads(threads)
      expect(getKernelThreads()).toBe(threads)
      expect(bitReport(matmulF32(x, m, k, w, n), one), `f32 threads=${threads}`).toBe('identical')
      expect(bitReport(matmulBf16(x, m, k, wb, n), oneB), `bf16 threads=${threads}`).toBe('identical')
    }
  })
})

describe('rmsNorm: rows and threads do not change any bit', () => {
  it('row r of a 64-row call equals the 1-row call, and 1, 2, 5 threads agree', () => {
    const rng = makeRng(14)
    const rows = 64
    const d = 16384
    expect(rows * d).toBeGreaterThanOrEqual(kernelParallelThreshold())
    const x = uniformF32(rows * d, rng, 3)
    const weight = uniformF32(d, rng)
    setKernelThreads(1)
    const one = rmsNorm(x, rows, d, weight, 1e-6)
    for (const threads of [2, 5]) {
      setKernelThreads(threads)
      expect(bitReport(rmsNorm(x, rows, d, weight, 1e-6), one), `threads=${threads}`).toBe('identical')
    }
    for (const r of [0, 31, 63]) {
      const single = rmsNorm(x.subarray(r * d, (r + 1) * d), 1, d, weight, 1e-6)
      expect(bitReport(single, one.subarray(r * d, (r + 1) * d)), `row ${r}`).toBe('identical')
    }
  })
})

describe('kernels: repeated calls are identical', () => {
  it('gives the same bits on 20 repeats of each kernel', () => {
    const rng = makeRng(15)
    const x = uniformF32(3 * 1000, rng)
    const w = uniformF32(9 * 1000, rng)
    const weight = uniformF32(1000, rng)
    const first = matmulF32(x, 3, 1000, w, 9)
    const firstNorm = rmsNorm(x, 3, 1000, weight, 1e-5)
    for (let t = 0; t < 20; t++) {
      expect(bitReport(matmulF32(x, 3, 1000, w, 9), first), `matmul repeat ${t}`).toBe('identical')
      expect(bitReport(rmsNorm(x, 3, 1000, weight, 1e-5), firstNorm), `rmsNorm repeat ${t}`).toBe('identical')
    }
  })
})
