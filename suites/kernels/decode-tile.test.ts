// The decode tile (native/src/matmul_decode.h, docs/kernels.md "Decode tile"): the lanes8 orders at
// 4..16 rows (6..16 in the avx2 and portable variants) widen each weight vector once for every row. At
// m = 1..17 (both sides of the tile's range, across its row pairs and 4-row tiles, its 8-column groups
// and 256-long k chunks, the k % 8 tail):
// native equals the Math.fround reference bit for bit; every row of an m-row call equals the one-row
// call on that row; 2, 3 and 7 threads give the 1-thread bits; and with the tile off
// (setDecodeTile(false): the kernels before it) the bits are the same.
import { afterAll, describe, expect, it } from 'vitest'
import {
  getKernelThreads, kernelParallelThreshold, loadNativeKernels, matmulBf16, matmulF32, setKernelThreads,
} from '../../src/kernels/index.ts'
import type { AccumulationOrder } from '../../src/kernels/index.ts'
import { bitReport, bf16Codes, makeRng, mixedF32, uniformF32 } from './fixtures.ts'
import { expectNativeEqualsReferenceOnShapes } from './invariance.ts'

const defaultThreads = getKernelThreads()
const addon = loadNativeKernels()
afterAll(() => {
  setKernelThreads(defaultThreads)
  addon.setDecodeTile?.(true)
})

const ORDERS: AccumulationOrder[] = ['lanes8', 'lanes8-fma']
const ROWS = Array.from({ length: 17 }, (_, i) => i + 1)

describe('decode tile: native equals the reference', () => {
  // k: no lane steps, one short chunk with a tail, two full chunks and a third with a tail (530:
  // a chunk of 16 lane steps; 539: of 24, so the avx512 tile's last 8 without a 16-wide step); n: a
  // partial column tile, a partial 8-column group.
  const shapes: Array<[number, number, number]> = ROWS.flatMap((m) => [[m, 5, 3], [m, 530, 13], [m, 539, 13]] as Array<[number, number, number]>)
  it.each(ORDERS)('%s: m = 1..17, f32 and bf16 weights, with and without bf16 output', (order) => {
    const rng = makeRng(order === 'lanes8' ? 71 : 72)
    const compared = expectNativeEqualsReferenceOnShapes(order, shapes, rng, (size, r) => mixedF32(size, r, 0.02))
    expect(compared).toBe(4 * ROWS.reduce((s, m) => s + m * (3 + 13 + 13), 0))
  })
})

describe('decode tile: batch and thread invariance', () => {
  it.each(ORDERS)('%s: each row of m = 1..17 equals its one-row call, on 1, 2, 3 and 7 threads', (order) => {
    const rng = makeRng(order === 'lanes8' ? 73 : 74)
    const k = 1100
    const n = 523
    // Even the 2-row call passes the floor under which a call stays on one thread.
    expect(2 * k * n).toBeGreaterThanOrEqual(kernelParallelThreshold())
    const w = uniformF32(n * k, rng, 0.05)
    const wb = bf16Codes(n * k, rng, 0.05)
    const x = mixedF32(17 * k, rng, 0.001)
    setKernelThreads(1)
    const single = ROWS.map((i) => {
      const row = x.subarray((i - 1) * k, i * k)
      return [matmulF32(row, 1, k, w, n, undefined, { order }), matmulBf16(row, 1, k, wb, n, undefined, { order })]
    })
    try {
      for (const m of ROWS) {
        const xm = x.subarray(0, m * k)
        for (const threads of [1, 2, 3, 7]) {
          setKernelThreads(threads)
          const f = matmulF32(xm, m, k, w, n, undefined, { order })
          const b = matmulBf16(xm, m, k, wb, n, undefined, { order })
          for (let r = 0; r < m; r++) {
            expect(bitReport(f.subarray(r * n, (r + 1) * n), single[r][0]), `f32 m=${m} row ${r} threads=${threads}`).toBe('identical')
            expect(bitReport(b.subarray(r * n, (r + 1) * n), single[r][1]), `bf16 m=${m} row ${r} threads=${threads}`).toBe('identical')
          }
        }
      }
    } finally {
      setKernelThreads(defaultThreads)
    }
  })
})

describe('decode tile: the kernels before it give the same bits', () => {
  it.each(ORDERS)('%s: setDecodeTile(false) at m = 2..16', (order) => {
    expect(addon.setDecodeTile).toBeTypeOf('function')
    const rng = makeRng(75)
    const k = 777
    const n = 45
    const w = uniformF32(n * k, rng, 0.05)
    const wb = bf16Codes(n * k, rng, 0.05)
    for (const m of [2, 3, 4, 5, 6, 7, 8, 9, 15, 16]) {
      const x = mixedF32(m * k, rng, 0.01)
      const now = [matmulF32(x, m, k, w, n, undefined, { order }), matmulBf16(x, m, k, wb, n, undefined, { order })]
      addon.setDecodeTile!(false)
      try {
        const before = [matmulF32(x, m, k, w, n, undefined, { order }), matmulBf16(x, m, k, wb, n, undefined, { order })]
        expect(bitReport(now[0], before[0]), `f32 m=${m}`).toBe('identical')
        expect(bitReport(now[1], before[1]), `bf16 m=${m}`).toBe('identical')
      } finally {
        addon.setDecodeTile!(true)
      }
    }
  })
})
