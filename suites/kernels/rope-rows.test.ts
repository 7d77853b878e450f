// ropeRows: the native twin of src/model/rope.ts applyRopeInterleaved over many rows and heads.
import { describe, it, expect, afterAll } from 'vitest'
import fc from 'fast-check'
import { getKernelThreads, reference, ropeRows, setKernelThreads } from '../../src/kernels/index.ts'
import { applyRopeInterleaved, ropeTable } from '../../src/model/rope.ts'
import type { RopeParams } from '../../src/model/config/types.ts'
import { bitReport, makeRng, mixedF32, U, uniformF32 } from './fixtures.ts'

const defaultThreads = getKernelThreads()
afterAll(() => setKernelThreads(defaultThreads))

function params (ropeDim: number, yarn: boolean): RopeParams {
  return {
    ropeType: yarn ? 'yarn' : 'default', theta: yarn ? 160000 : 10000, ropeDim, partialRotaryFactor: 1,
    factor: yarn ? 16 : 1, originalMaxPositionEmbeddings: yarn ? 1024 : null, betaFast: 32, betaSlow: 1,
    attentionFactor: 1, truncate: true,
  }
}

/** applyRopeInterleaved per (row, head), the definition ropeRows must match (NaN made canonical). */
function perSlice (x: Float32Array, rows: number, heads: number, headDim: number, offset: number, ropeDim: number,
  cos: Float32Array, sin: Float32Array, tableRow: (r: number) => number, inverse: boolean): Float32Array {
  const y = x.slice()
  const bits = new Uint32Array(y.buffer)
  for (let r = 0; r < rows; r++) {
    for (let h = 0; h < heads; h++) {
      const start = (r * heads + h) * headDim + offset
      applyRopeInterleaved(y, start, ropeDim, cos, sin, tableRow(r), inverse)
      for (let i = start; i < start + ropeDim; i++) if (Number.isNaN(y[i])) bits[i] = 0x7fc00000
    }
  }
  return y
}

describe('ropeRows: bit-identical to applyRopeInterleaved per row and head', () => {
  it('over rope dims 2..130, offsets (nope slice first, as V4), yarn and plain tables, both directions', () => {
    const rng = makeRng(601)
    for (const [headDim, ropeDim] of [[2, 2], [16, 6], [64, 8], [128, 64], [133, 66], [256, 64], [130, 130]] as const) {
      const offset = headDim - ropeDim
      for (const yarn of [false, true]) {
        const table = ropeTable(params(ropeDim, yarn), { start: 3000, count: 40 })
        for (const inverse of [false, true]) {
          const x = uniformF32(9 * 3 * headDim, rng, 4)
          const want = perSlice(x, 9, 3, headDim, offset, ropeDim, table.cos, table.sin, (r) => 5 + r, inverse)
          const got = ropeRows(x.slice(), 9, 3, headDim, offset, ropeDim, table.cos, table.sin, { inverse, firstTableRow: 5 })
          expect(bitReport(got, want), `headDim=${headDim} ropeDim=${ropeDim} yarn=${yarn} inverse=${inverse}`).toBe('identical')
          expect(bitReport(reference.ropeRows(x.slice(), 9, 3, headDim, offset, ropeDim, table.cos, table.sin, { inverse, firstTableRow: 5 }), want)).toBe('identical')
        }
      }
    }
  })

  it('with explicit table rows (compressed entries at positions i * ratio) and special values (property)', () => {
    fc.assert(fc.property(
      fc.integer({ min: 0, max: 12 }), fc.integer({ min: 1, max: 4 }), fc.integer({ min: 1, max: 40 }), fc.integer({ min: 0, max: 10 }),
      fc.integer({ min: 0, max: 2 ** 31 - 1 }), fc.boolean(),
      (rows, heads, half, extra, seed, inverse) => {
        const rng = makeRng(seed)
        const ropeDim = 2 * half
        const headDim = ropeDim + extra
        const offset = Math.floor(rng() * (extra + 1))
        const table = { cos: mixedF32(30 * half, rng, 0.05), sin: mixedF32(30 * half, rng, 0.05) }
        const tableRows = Int32Array.from({ length: rows }, () => Math.floor(rng() * 30))
        const x = mixedF32(rows * heads * headDim, rng, 0.05)
        const want = perSlice(x, rows, heads, headDim, offset, ropeDim, table.cos, table.sin, (r) => tableRows[r], inverse)
        return bitReport(ropeRows(x.slice(), rows, heads, headDim, offset, ropeDim, table.cos, table.sin, { inverse, tableRows }), want) === 'identical'
      }), { numRuns: 300 })
  })

  it('leaves everything outside the rope slices untouched, bit for bit (NaN payloads included)', () => {
    const x = uniformF32(4 * 2 * 20, makeRng(602))
    const bits = new Uint32Array(x.buffer)
    bits[3] = 0x7f800001 // a signalling NaN in a nope slot
    const before = bits.slice()
    const table = ropeTable(params(8, false), 4)
    const y = ropeRows(x, 4, 2, 20, 4, 8, table.cos, table.sin)
    expect(y).toBe(x)
    for (let r = 0; r < 8; r++) {
      for (let i = 0; i < 20; i++) if (i < 4 || i >= 12) expect(bits[r * 20 + i]).toBe(before[r * 20 + i])
    }
  })

  it('gives identical bits on 1, 2 and 3 threads', () => {
    const table = ropeTable(params(64, true), 4096)
    const x = uniformF32(4096 * 4 * 128, makeRng(603))
    setKernelThreads(1)
    const one = ropeRows(x.slice(), 4096, 4, 128, 64, 64, table.cos, table.sin)
    for (const threads of [2, 3]) {
      setKernelThreads(threads)
      expect(bitReport(ropeRows(x.slice(), 4096, 4, 128, 64, 64, table.cos, table.sin), one), `threads=${threads}`).toBe('identical')
    }
  })
})

describe('ropeRows: within a derived bound of the float64 rotation', () => {
  it('holds |y - exact| <= 2u (|a c| + |b s|) + u |exact| per output, and forward then inverse comes back within 4u scale', () => {
    // Two rounded products and one rounded sum: each product off by u of itself, the sum by u of the
    // result. The inverse rotation of the rotated pair returns (a, b) to within the same bound twice.
    const table = ropeTable(params(64, true), { start: 0, count: 2048 })
    const x = uniformF32(2048 * 64, makeRng(611), 3)
    const y = ropeRows(x.slice(), 2048, 1, 64, 0, 64, table.cos, table.sin)
    const back = ropeRows(y.slice(), 2048, 1, 64, 0, 64, table.cos, table.sin, { inverse: true })
    for (let r = 0; r < 2048; r++) {
      for (let k = 0; k < 32; k++) {
        const i = r * 64 + 2 * k
        const c = table.cos[r * 32 + k]
        const s = table.sin[r * 32 + k]
        const a = x[i]
        const b = x[i + 1]
        const e0 = a * c - b * s
        const e1 = a * s + b * c
        expect(Math.abs(y[i] - e0)).toBeLessThanOrEqual(2 * U * (Math.abs(a * c) + Math.abs(b * s)) + U * Math.abs(e0))
        expect(Math.abs(y[i + 1] - e1)).toBeLessThanOrEqual(2 * U * (Math.abs(a * s) + Math.abs(b * c)) + U * Math.abs(e1))
        // cos^2 + sin^2 is 1 only to float32 accuracy, so the round trip is bounded, not exact.
        const scale = Math.abs(a) + Math.abs(b)
        expect(Math.abs(back[i] - a)).toBeLessThanOrEqual(8 * U * scale)
        expect(Math.abs(back[i + 1] - b)).toBeLessThanOrEqual(8 * U * scale)
      }
    }
  })
})

describe('ropeRows: bad arguments', () => {
  const table = ropeTable(params(8, false), 4)
  it('refuses odd rope dims, slices past the head, short tables and bad table rows', () => {
    const x = new Float32Array(2 * 16)
    expect(() => ropeRows(x, 2, 1, 16, 0, 7, table.cos, table.sin)).toThrow(/^ropeRows: ropeDim must be a positive even integer, got 7/)
    expect(() => ropeRows(x, 2, 1, 16, 10, 8, table.cos, table.sin)).toThrow(/^ropeRows: offset \+ ropeDim = 18 exceeds headDim 16/)
    expect(() => ropeRows(x, 2, 1, 16, 0, 8, table.cos, table.sin, { firstTableRow: 3 })).toThrow(/^ropeRows: rows 3 \.\. 4 do not fit in a table of 4 rows/)
    expect(() => ropeRows(x, 2, 1, 16, 0, 8, table.cos, table.sin, { tableRows: Int32Array.from([0, 4]) })).toThrow(/^ropeRows: opts.tableRows\[1\] = 4 is outside a table of 4 rows/)
    expect(() => ropeRows(x, 2, 1, 16, 0, 8, table.cos, table.sin.subarray(1))).toThrow(/^ropeRows: cos \(16\) and sin \(15\) must be equal multiples of ropeDim \/ 2 = 4/)
    expect(() => ropeRows(x, 2, 1, 16, 0, 8, table.cos, table.sin, { reverse: true } as never)).toThrow(/^ropeRows: opts.reverse is not an option/)
    expect(() => ropeRows(x, 3, 1, 16, 0, 8, table.cos, table.sin)).toThrow(/^ropeRows: x has 32 elements, expected \[rows, heads, headDim\] = 3 x 1 x 16 = 48/)
  })
})
