// The decode tile's fused steps for exact products (native/src/exact_products.h, docs/kernels.md
// "Decode tile"): where x holds bf16 values and every product with the chunk's bf16 weights is exact
// in float32, the lanes8 order's rounded mul then add runs as one fma, the same bits. At m = 2..16
// with bf16 activations (the decoder's case): native equals the Math.fround reference and every row
// its one-row call, on 1, 2 and 3 threads, and equals the tile with the fused steps off
// (setExactProductFma(false)). Where a product is not exact (underflow below 2^-149's grid, an
// overflow an fma would not see, x not bf16) the fma gives other bits, shown with the lanes8-fma
// order on the same inputs, and lanes8 must still equal its reference.
import { afterAll, describe, expect, it } from 'vitest'
import { getKernelThreads, loadNativeKernels, matmulBf16, reference, setKernelThreads } from '../../src/kernels/index.ts'
import { f32ToBf16, roundBf16 } from '../../src/numerics/bf16.ts'
import { bf16Codes, bitReport, makeRng } from './fixtures.ts'

const defaultThreads = getKernelThreads()
const addon = loadNativeKernels()
afterAll(() => {
  setKernelThreads(defaultThreads)
  addon.setExactProductFma?.(true)
})

/** bf16 activations: uniform in [-scale, scale), rounded to bf16 as the engine's act() does. */
function bf16Values (n: number, rng: () => number, scale: number): Float32Array {
  const out = new Float32Array(n)
  for (let i = 0; i < n; i++) out[i] = roundBf16((rng() * 2 - 1) * scale)
  return out
}

const ROWS = Array.from({ length: 15 }, (_, i) => i + 2)

describe('exact-product fma: bf16 activations at m = 2..16', () => {
  it('native equals the reference and each row its one-row call, on 1, 2 and 3 threads', () => {
    const rng = makeRng(81)
    // Two full k chunks and a third with a tail; a partial 8-column group.
    const k = 530
    const n = 61
    const wb = bf16Codes(n * k, rng, 0.05)
    const x = bf16Values(16 * k, rng, 4)
    const single = Array.from({ length: 16 }, (_, r) => matmulBf16(x.subarray(r * k, (r + 1) * k), 1, k, wb, n))
    try {
      for (const m of ROWS) {
        const xm = x.subarray(0, m * k)
        const expected = reference.matmulBf16(xm, m, k, wb, n)
        for (const threads of [1, 2, 3]) {
          setKernelThreads(threads)
          const y = matmulBf16(xm, m, k, wb, n)
          expect(bitReport(y, expected), `m=${m} threads=${threads}`).toBe('identical')
          for (let r = 0; r < m; r++) expect(bitReport(y.subarray(r * n, (r + 1) * n), single[r]), `m=${m} row ${r} threads=${threads}`).toBe('identical')
        }
      }
    } finally {
      setKernelThreads(defaultThreads)
    }
  })

  it('equals the tile with the fused steps off, with and without bf16 output', () => {
    expect(addon.setExactProductFma).toBeTypeOf('function')
    const rng = makeRng(82)
    const k = 1031
    const n = 37
    const wb = bf16Codes(n * k, rng, 0.5)
    for (const m of [2, 4, 5, 8, 9, 16]) {
      const x = bf16Values(m * k, rng, 100)
      for (const roundBf16 of [false, true]) {
        const on = matmulBf16(x, m, k, wb, n, undefined, { roundBf16 })
        addon.setExactProductFma!(false)
        let off: Float32Array
        try {
          off = matmulBf16(x, m, k, wb, n, undefined, { roundBf16 })
        } finally {
          addon.setExactProductFma!(true)
        }
        expect(bitReport(on, off), `m=${m} roundBf16=${roundBf16}`).toBe('identical')
        expect(bitReport(on, reference.matmulBf16(x, m, k, wb, n, undefined, { roundBf16 })), `m=${m} reference`).toBe('identical')
      }
    }
  })
})

describe('exact-product fma: products that are not exact keep the two roundings', () => {
  const k = 64
  const n = 16
  const m = 8
  // Output (0, 0): x row 0 is zero but for product a at index 0 and b at index 8 (lane 0's two
  // steps); the other rows are ordinary bf16 activations, so the call runs the decode tile at m = 8.
  function lane0Case (xa: number, wa: number, xb: number, wb: number): { x: Float32Array, w: Uint16Array } {
    const rng = makeRng(83)
    const x = bf16Values(m * k, rng, 1)
    const w = bf16Codes(n * k, rng, 1)
    x.fill(0, 0, k)
    x[0] = xa
    w[0] = f32ToBf16(wa)
    x[8] = xb
    w[8] = f32ToBf16(wb)
    return { x, w }
  }
  const cases: Array<[string, { x: Float32Array, w: Uint16Array }]> = [
    // 2^-149 then 1.5 * 2^-149: mul rounds the second to 2^-148 (sum 3 * 2^-149), fma ties 2.5 * 2^-149 to 2^-148.
    ['below the subnormal grid', lane0Case(2 ** -75, 2 ** -74, 1.5 * 2 ** -74, 2 ** -75)],
    // -2^127 then 2.25 * 2^127: mul overflows to +Inf, fma gives 1.25 * 2^127.
    ['past the largest float', lane0Case(-(2 ** 64), 2 ** 63, 1.5 * 2 ** 64, 1.5 * 2 ** 63)],
  ]
  it.each(cases)('%s: lanes8 equals its reference, lanes8-fma differs there', (_name, { x, w }) => {
    for (const rows of [1, m]) {
      const xs = x.subarray(0, rows * k)
      const y = matmulBf16(xs, rows, k, w, n)
      expect(bitReport(y, reference.matmulBf16(xs, rows, k, w, n)), `m=${rows}`).toBe('identical')
      // The case discriminates: a fused step gives other bits at output (0, 0).
      const fused = matmulBf16(xs, rows, k, w, n, undefined, { order: 'lanes8-fma' })
      expect(Object.is(fused[0], y[0]), `m=${rows}: lanes8-fma ${fused[0]} vs lanes8 ${y[0]}`).toBe(false)
    }
  })

  it('the lower exponent bound: fields summing to 118 keep the roundings', () => {
    // x and w near 2^-68 (fields 59 + 59): odd 16-bit products on a 2^-150 grid, one step below
    // the bound; random signs and mantissas. ('past the largest float' above sits one past the upper
    // bound: fields 191 + 190 = 381.)
    const rng = makeRng(84)
    const near = (): number => (rng() < 0.5 ? -1 : 1) * (1 + Math.floor(rng() * 128) / 128) * 2 ** -68
    const x = new Float32Array(m * k)
    const w = new Uint16Array(n * k)
    for (let i = 0; i < x.length; i++) x[i] = roundBf16(near())
    for (let i = 0; i < w.length; i++) w[i] = f32ToBf16(near())
    const y = matmulBf16(x, m, k, w, n)
    expect(bitReport(y, reference.matmulBf16(x, m, k, w, n))).toBe('identical')
    const fused = matmulBf16(x, m, k, w, n, undefined, { order: 'lanes8-fma' })
    expect(bitReport(fused, y), 'the fma order differs somewhere').not.toBe('identical')
  })

  it('x that is not bf16 keeps the roundings', () => {
    const rng = makeRng(85)
    const w = bf16Codes(n * k, rng, 1)
    const x = new Float32Array(m * k)
    for (let i = 0; i < x.length; i++) x[i] = Math.fround(rng() * 2 - 1)
    const y = matmulBf16(x, m, k, w, n)
    expect(bitReport(y, reference.matmulBf16(x, m, k, w, n))).toBe('identical')
    expect(bitReport(matmulBf16(x, m, k, w, n, undefined, { order: 'lanes8-fma' }), y)).not.toBe('identical')
  })
})
