// The sequential-fma order (docs/kernels.md, "The fourth order: sequential-fma") and its tiles
// (native/src/matmul_seq.h: W packed in strips of 16 columns, 256 k-values and 192 columns per packed
// block, tiles of up to 6 rows of x): native equals the fmaF32 reference bit for bit on shapes that
// cross every tile, strip, panel and block edge; a row of a batch equals the one-row call (which takes
// the 1-row, 4-strip tiles), whatever the thread count; the order meets its error bound; and it is
// another order than lanes8-fma.
import fc from 'fast-check'
import { afterAll, describe, expect, it } from 'vitest'
import { dotSequentialFma, fmaF32, getKernelThreads, matmulBf16, matmulF32, matmulPacked, packedLength, packSequentialFma, reference, setKernelThreads } from '../../src/kernels/index.ts'
import { bf16ToF32 } from '../../src/numerics/bf16.ts'
import { bitReport, bf16Codes, gamma, makeRng, mixedF32, uniformF32, wideF32 } from './fixtures.ts'
import { expectBatchAndThreadInvariance, expectNativeEqualsReferenceOnShapes } from './invariance.ts'

const defaultThreads = getKernelThreads()
afterAll(() => setKernelThreads(defaultThreads))

const order = 'sequential-fma' as const

describe('sequential-fma: the reference', () => {
  it('is one fmaF32 chain from +0 in increasing index', () => {
    const rng = makeRng(60)
    const x = wideF32(37, rng)
    const w = uniformF32(37, rng)
    let s = 0
    for (let i = 0; i < 37; i++) s = fmaF32(x[i], w[i], s)
    expect(Object.is(dotSequentialFma(x, 0, w, 0, 37), s)).toBe(true)
    // Lanes start at +0: products that are all -0 give +0, and k = 0 gives +0.
    expect(Object.is(dotSequentialFma([-0, -1], 0, [1, 0], 0, 2), 0)).toBe(true)
    expect(Object.is(dotSequentialFma([], 0, [], 0, 0), 0)).toBe(true)
  })
})

describe('sequential-fma: native equals the reference across tile edges', () => {
  // m: 1 (4-strip tiles), 2, 3, 5, 6 (one full tile), 7, 13 (remainder rows); n: under one strip,
  // 16, 17, 70 (4 strips and a 6-column rest), 193 and 400 (past the 192-column panel); k: 0, 1, a
  // k % 8 tail in the packing, 256 (one block), 257, 1031 (several blocks and a tail).
  const shapes: Array<[number, number, number]> = [
    [1, 0, 5], [3, 1, 17], [1, 300, 70], [2, 257, 33], [3, 255, 48], [5, 9, 16], [6, 256, 15], [7, 513, 193],
    [13, 1031, 37], [12, 100, 400], [1, 1031, 203], [4, 64, 64],
  ]
  it('f32 and bf16 weights, with and without bf16 output', () => {
    const compared = expectNativeEqualsReferenceOnShapes(order, shapes, makeRng(61), (n, rng) => uniformF32(n, rng, 0.5))
    expect(compared).toBeGreaterThan(30000)
  })

  it('random shapes, seeds and special values (property)', () => {
    fc.assert(fc.property(
      fc.integer({ min: 1, max: 14 }), fc.integer({ min: 1, max: 80 }), fc.integer({ min: 0, max: 600 }),
      fc.integer({ min: 0, max: 2 ** 31 - 1 }), fc.constantFrom(0, 0.02, 0.2), fc.boolean(),
      (m, n, k, seed, specialRate, roundBf16) => {
        const rng = makeRng(seed)
        const x = mixedF32(m * k, rng, specialRate)
        const w = mixedF32(n * k, rng, specialRate)
        const wb = bf16Codes(n * k, rng, 4)
        const opts = { order, roundBf16 }
        return bitReport(matmulF32(x, m, k, w, n, undefined, opts), reference.matmulF32(x, m, k, w, n, undefined, opts)) === 'identical' &&
          bitReport(matmulBf16(x, m, k, wb, n, undefined, opts), reference.matmulBf16(x, m, k, wb, n, undefined, opts)) === 'identical'
      }), { numRuns: 80 })
  })
})

describe('sequential-fma: batch and thread invariance', () => {
  it('every row of an m=33 call equals the one-row call, on 1, 2, 3 and 7 threads', () => {
    expectBatchAndThreadInvariance(order, 62)
  })
})

describe('sequential-fma: what it is and is not', () => {
  it('stays within its error bound: each product meets at most k roundings', () => {
    const rng = makeRng(63)
    const m = 7
    const k = 999
    const n = 40
    const x = wideF32(m * k, rng)
    const wb = bf16Codes(n * k, rng, 1)
    const y = matmulBf16(x, m, k, wb, n, undefined, { order })
    const bound = gamma(k)
    let worst = 0
    for (let i = 0; i < m; i++) {
      for (let j = 0; j < n; j++) {
        let exact = 0
        let abs = 0
        for (let p = 0; p < k; p++) {
          const t = x[i * k + p] * bf16ToF32(wb[j * k + p])
          exact += t
          abs += Math.abs(t)
        }
        const err = Math.abs(y[i * n + j] - exact)
        worst = Math.max(worst, err / (bound * abs))
        expect(err, `y[${i}, ${j}]`).toBeLessThanOrEqual(bound * abs * (1 + 1e-6) + 1e-300)
      }
    }
    console.log(`sequential-fma: worst error ${worst.toFixed(4)} of the gamma_k bound`)
  })

  it('is another order than lanes8-fma: a constructed case, and most outputs of f32 data', () => {
    // 2^24 at index 0 and 1 at indices 1 and 9: the chain adds each 1 to 2^24 and ties to even
    // (2^24); lanes8-fma's lane 1 holds 1 + 1 = 2 before the tree, which gives 2^24 + 2.
    const x = new Float32Array(16)
    x[0] = 2 ** 24; x[1] = 1; x[9] = 1
    const w = new Float32Array(16).fill(1)
    expect(matmulF32(x, 1, 16, w, 1, undefined, { order })[0]).toBe(2 ** 24)
    expect(reference.matmulF32(x, 1, 16, w, 1, undefined, { order })[0]).toBe(2 ** 24)
    expect(matmulF32(x, 1, 16, w, 1, undefined, { order: 'lanes8-fma' })[0]).toBe(2 ** 24 + 2)
    const rng = makeRng(64)
    const m = 10
    const k = 500
    const n = 48
    const xs = wideF32(m * k, rng)
    const ws = uniformF32(n * k, rng)
    const seq = matmulF32(xs, m, k, ws, n, undefined, { order })
    const lanes = matmulF32(xs, m, k, ws, n, undefined, { order: 'lanes8-fma' })
    let differ = 0
    for (let i = 0; i < seq.length; i++) if (!Object.is(seq[i], lanes[i])) differ++
    expect(differ).toBeGreaterThan(seq.length / 2)
  })
})

describe('sequential-fma over W packed once (matmulPacked)', () => {
  const shapes: Array<[number, number, number]> = [[1, 300, 70], [1, 1031, 203], [2, 257, 33], [6, 256, 15], [13, 513, 193], [33, 100, 400], [3, 0, 17], [1, 9, 16]]
  it('packs as the reference does, both formats, rows past n zero', () => {
    const rng = makeRng(65)
    for (const [, k, n] of shapes) {
      const w = uniformF32(n * k, rng)
      const wb = bf16Codes(n * k, rng)
      const p = packSequentialFma(w, n, k)
      const pb = packSequentialFma(wb, n, k)
      expect(p.data.length).toBe(packedLength(n, k))
      expect(Array.from(p.data)).toEqual(Array.from(reference.packSequentialFma(w, n, k).data))
      expect(Array.from(pb.data)).toEqual(Array.from(reference.packSequentialFma(wb, n, k).data))
      expect([p.format, pb.format]).toEqual(['f32', 'bf16'])
      if (n % 16 !== 0 && k > 0) expect(p.data[(Math.floor(n / 16) * k + k - 1) * 16 + 15]).toBe(0)
    }
  })

  it('gives the bits of the unpacked sequential-fma product, and of its reference, on 1, 2 and 3 threads', () => {
    const rng = makeRng(66)
    for (const [m, k, n] of shapes) {
      const x = mixedF32(m * k, rng, 0.02)
      const w = uniformF32(n * k, rng, 0.5)
      const wb = bf16Codes(n * k, rng, 0.5)
      const p = packSequentialFma(w, n, k)
      const pb = packSequentialFma(wb, n, k)
      for (const roundBf16 of [false, true]) {
        const want = matmulF32(x, m, k, w, n, undefined, { order, roundBf16 })
        const wantB = matmulBf16(x, m, k, wb, n, undefined, { order, roundBf16 })
        for (const threads of [1, 2, 3]) {
          setKernelThreads(threads)
          expect(bitReport(matmulPacked(x, m, k, p, undefined, { roundBf16 }), want), `f32 ${m}x${k}x${n} t${threads}`).toBe('identical')
          expect(bitReport(matmulPacked(x, m, k, pb, undefined, { roundBf16 }), wantB), `bf16 ${m}x${k}x${n} t${threads}`).toBe('identical')
        }
        setKernelThreads(defaultThreads)
        expect(bitReport(reference.matmulPacked(x, m, k, pb, undefined, { roundBf16 }), wantB), `reference ${m}x${k}x${n}`).toBe('identical')
      }
    }
  })

  it('refuses a packed weight that does not fit, and options it does not have', () => {
    const p = packSequentialFma(new Float32Array(20 * 8), 20, 8)
    expect(() => matmulPacked(new Float32Array(9), 1, 9, p)).toThrow('matmulPacked: packed.k is 8, but x rows have k = 9')
    expect(() => matmulPacked(new Float32Array(8), 1, 8, { ...p, data: p.data.subarray(1) })).toThrow('matmulPacked: packed.data has 255 elements, expected ceil(n / 16) * 16 * k = 256')
    expect(() => matmulPacked(new Float32Array(8), 1, 8, p, undefined, { order: 'lanes8' } as never)).toThrow('matmulPacked: opts.order is not an option')
    expect(() => matmulPacked(new Float32Array(8), 1, 8, {} as never)).toThrow('matmulPacked: packed must be a PackedWeight from packSequentialFma')
    expect(() => packSequentialFma(new Float32Array(7), 2, 4)).toThrow(/packSequentialFma: w has 7 elements/)
  })
})
