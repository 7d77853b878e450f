// The bf16 weight path is exactly the float32 path on the widened weights.
import { describe, it, expect } from 'vitest'
import { matmulBf16, matmulF32, reference } from '../../src/kernels/index.ts'
import { decodeBf16 } from '../../src/numerics/bf16.ts'
import { bitReport, makeRng, wideF32 } from './fixtures.ts'

describe('matmulBf16: equals matmulF32 on the widened weights', () => {
  it('gives the same bits natively for many shapes, with and without output rounding', () => {
    const rng = makeRng(21)
    for (const [m, n, k] of [[1, 1, 1], [2, 3, 7], [5, 17, 33], [1, 9, 257], [4, 12, 1031]]) {
      // Every 16-bit code is a possible weight, NaN and Inf included.
      const w = Uint16Array.from({ length: n * k }, () => Math.floor(rng() * 65536))
      const widened = decodeBf16(w)
      const x = wideF32(m * k, rng)
      for (const roundBf16 of [false, true]) {
        const opts = { roundBf16 }
        expect(bitReport(matmulBf16(x, m, k, w, n, undefined, opts), matmulF32(x, m, k, widened, n, undefined, opts)),
          `native m=${m} n=${n} k=${k}`).toBe('identical')
        expect(bitReport(reference.matmulBf16(x, m, k, w, n, undefined, opts), reference.matmulF32(x, m, k, widened, n, undefined, opts)),
          `reference m=${m} n=${n} k=${k}`).toBe('identical')
      }
    }
  })

  it('widens each of the 65,536 codes exactly, in the vector lanes (k = 8) and in the scalar tail (k = 1)', () => {
    const n = 65536
    for (const k of [8, 1]) {
      // Weight row c is [code c, then +0s]; x = [1, then +0s] picks out code c in output c.
      const codes = new Uint16Array(n * k)
      for (let c = 0; c < n; c++) codes[c * k] = c
      const x = new Float32Array(k)
      x[0] = 1
      const yBits = new Uint32Array(matmulBf16(x, 1, k, codes, n).buffer)
      const wrong: string[] = []
      for (let c = 0; c < n; c++) {
        const isNan = (c & 0x7f80) === 0x7f80 && (c & 0x7f) !== 0
        // 1 * w is exact, and adding +0s keeps w (a -0 weight gives +0: the sums start at +0).
        const want = isNan ? 0x7fc00000 : c === 0x8000 ? 0 : (c << 16) >>> 0
        if (yBits[c] !== want) wrong.push(`k=${k}: code 0x${c.toString(16)} gave 0x${yBits[c].toString(16)}`)
      }
      expect(wrong.slice(0, 5)).toEqual([])
    }
  })
})
