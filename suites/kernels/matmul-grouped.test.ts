// The grouped bf16 matmul (native/src/matmul_grouped.cc, docs/kernels.md "Grouped matmul"): several
// matmuls of one shape in one call, the threads sharing all groups' output columns. Every group's
// output equals matmulBf16 of that group alone (which the other suites hold to the Math.fround
// reference) and the reference matmulBf16Grouped, bit for bit, in every order, on 1, 2, 3 and 7
// threads, with groups of 0 to 20 rows (both sides of the decode tile's range), n not a multiple of
// the 8-column grain, and with bf16 output. Bad input is refused before any work.
import { afterAll, describe, expect, it } from 'vitest'
import {
  ACCUMULATION_ORDERS, getKernelThreads, kernelParallelThreshold, matmulBf16, matmulBf16Grouped, reference, setKernelThreads,
} from '../../src/kernels/index.ts'
import { NumericsError } from '../../src/errors.ts'
import { bitReport, bf16Codes, makeRng, mixedF32 } from './fixtures.ts'

const defaultThreads = getKernelThreads()
afterAll(() => setKernelThreads(defaultThreads))

describe('matmulBf16Grouped: each group equals its own matmulBf16', () => {
  it.each(ACCUMULATION_ORDERS)('%s: rows 0..20 per group, n = 203, on 1, 2, 3 and 7 threads', (order) => {
    const rng = makeRng(4100 + ACCUMULATION_ORDERS.indexOf(order))
    const k = 530
    const n = 203
    const rows = [2, 0, 1, 5, 8, 3, 0, 17, 4, 20, 1]
    // The call's work passes the floor under which it stays on one thread, so the split is exercised.
    expect(rows.reduce((s, m) => s + m, 0) * k * n).toBeGreaterThanOrEqual(kernelParallelThreshold())
    const groups = rows.map((m) => ({ x: mixedF32(m * k, rng, 0.001), m, w: bf16Codes(n * k, rng, 0.05) }))
    for (const roundBf16 of [false, true]) {
      setKernelThreads(1)
      const alone = groups.map((g) => matmulBf16(g.x, g.m, k, g.w, n, undefined, { order, roundBf16 }))
      const ref = reference.matmulBf16Grouped(groups, k, n, { order, roundBf16 })
      for (const threads of [1, 2, 3, 7]) {
        setKernelThreads(threads)
        const outs = matmulBf16Grouped(groups, k, n, { order, roundBf16 })
        expect(outs.length).toBe(groups.length)
        outs.forEach((o, g) => {
          expect(o.length).toBe(rows[g] * n)
          expect(bitReport(o, alone[g]), `group ${g} (${rows[g]} rows) threads=${threads} round=${roundBf16}`).toBe('identical')
          expect(bitReport(o, ref[g]), `group ${g} vs reference threads=${threads}`).toBe('identical')
        })
      }
    }
    setKernelThreads(defaultThreads)
  })

  it('writes into the outputs it is given, and returns them', () => {
    const rng = makeRng(4110)
    const k = 64
    const n = 24
    const groups = [1, 3].map((m) => ({ x: mixedF32(m * k, rng, 0.01), m, w: bf16Codes(n * k, rng, 0.05), out: new Float32Array(m * n).fill(Number.NaN) }))
    const outs = matmulBf16Grouped(groups, k, n)
    outs.forEach((o, g) => {
      expect(o).toBe(groups[g].out)
      expect(bitReport(o, matmulBf16(groups[g].x, groups[g].m, k, groups[g].w, n))).toBe('identical')
    })
    expect(matmulBf16Grouped([], k, n)).toEqual([])
  })
})

describe('matmulBf16Grouped: bad input', () => {
  const k = 8
  const n = 8
  const ok = (): { x: Float32Array, m: number, w: Uint16Array } => ({ x: new Float32Array(2 * k), m: 2, w: new Uint16Array(n * k) })
  it('refuses a group whose arrays do not fit the shape, naming the group', () => {
    expect(() => matmulBf16Grouped([ok(), { ...ok(), m: 3 }], k, n)).toThrow(/groups\[1\].*x has 16 elements/)
    expect(() => matmulBf16Grouped([ok(), { ...ok(), w: new Uint16Array(7 * k) }], k, n)).toThrow(NumericsError)
    expect(() => matmulBf16Grouped([{ ...ok(), w: new Float32Array(n * k) as unknown as Uint16Array }], k, n)).toThrow(/w must be a Uint16Array/)
  })
  it('refuses outputs that overlap an input or each other', () => {
    const shared = new Float32Array(4 * n)
    const a = { ...ok(), out: shared.subarray(0, 2 * n) }
    const b = { ...ok(), out: shared.subarray(n, 3 * n) }
    expect(() => matmulBf16Grouped([a, b], k, n)).toThrow(/groups\[1\].*overlaps groups\[0\]\.out/)
    const x = new Float32Array(2 * k)
    expect(() => matmulBf16Grouped([{ x, m: 2, w: new Uint16Array(n * k) }, { ...ok(), out: new Float32Array(x.buffer, 0, 2 * n) }], k, n)).toThrow(/overlaps groups\[0\]\.x/)
  })
  it('refuses the packed order and non-arrays', () => {
    expect(() => matmulBf16Grouped('no' as unknown as [], k, n)).toThrow(/groups must be an array/)
    expect(() => matmulBf16Grouped([ok()], k, n, { order: 'packed' as unknown as 'lanes8' })).toThrow(/opts.order/)
    expect(() => matmulBf16Grouped([ok()], -1, n)).toThrow(/k must be a non-negative integer/)
  })
})
