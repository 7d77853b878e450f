// The mlx-cpu cache math's native kernels (native/src/mlx_cpu.cc) against their TypeScript
// references (src/numerics/mlx-cpu/quantized-matmul.ts), bit for bit: every rounding-point mask,
// hard inputs (NaN, ±inf, ±0, subnormals, MLX's NaN e4m3 codes 0x7F/0xFF, scale bytes 0 and 255),
// and 1, 2, 3 and 7 threads on a call large enough to be split (minParallelWork).
import { afterAll, describe, expect, it } from 'vitest'
import { loadNativeKernels } from '../../src/kernels/native.ts'
import {
  affineDequantized, affineMatmul, bf16, MLX_CPU, mxfp8Matmul, type AffineWeight, type Mxfp8Weight, type RoundingPoints, type RoundTo,
} from '../../src/numerics/mlx-cpu/index.ts'
import { affineMatmulNative, mxfp8MatmulNative, prepareAffine, prepareMxfp8 } from '../../src/kernels/mlx-cpu.ts'

const addon = loadNativeKernels()
const threadsBefore = addon.getThreads()
afterAll(() => addon.setThreads(threadsBefore))

/** A 32-bit LCG, so every run draws the same inputs. */
function lcg (seed: number): () => number {
  let s = seed >>> 0
  return () => { s = (Math.imul(s, 1103515245) + 12345) >>> 0; return s }
}

const SPECIAL = [NaN, Infinity, -Infinity, 0, -0, 2 ** -130, -(2 ** -133), 3.4e38, 1, -1]

/** bf16 activations: mostly N-ish values of several scales, one in 50 a special value. */
function activations (n: number, seed: number, specials: boolean): Float32Array {
  const r = lcg(seed)
  const x = new Float32Array(n)
  for (let i = 0; i < n; i++) {
    const u = r()
    x[i] = specials && u % 50 === 0 ? SPECIAL[(u >>> 8) % SPECIAL.length] : bf16(((u >>> 8) / 2 ** 24 - 0.5) * 2 ** ((u % 17) - 8))
  }
  return x
}

function mxWeight (n: number, k: number, seed: number, specials: boolean): Mxfp8Weight {
  const r = lcg(seed)
  const codes = Uint8Array.from({ length: n * k }, () => r() >>> 24)
  // Scales near 127 keep most products finite; with specials, 0 and 255 appear too.
  const scales = Uint8Array.from({ length: n * (k / 32) }, () => {
    const u = r()
    return specials && u % 13 === 0 ? [0, 255, 1, 254][(u >>> 8) % 4] : 120 + ((u >>> 16) % 14)
  })
  return { codes, scales, n, k }
}

function affineWeight (n: number, k: number, seed: number): AffineWeight {
  const r = lcg(seed)
  const g = n * (k / 64)
  return {
    codes: Uint8Array.from({ length: n * k }, () => r() >>> 24),
    scales: Float32Array.from({ length: g }, () => bf16((r() >>> 8) / 2 ** 24 * 0.01)),
    biases: Float32Array.from({ length: g }, () => bf16(((r() >>> 8) / 2 ** 24 - 0.5) * 0.5)),
    n, k, groupSize: 64,
  }
}

/** Elements whose float32 bits differ. */
function differing (a: Float32Array, b: Float32Array): number {
  expect(a.length).toBe(b.length)
  const ua = new Uint32Array(a.buffer, a.byteOffset, a.length)
  const ub = new Uint32Array(b.buffer, b.byteOffset, b.length)
  let d = 0
  for (let i = 0; i < ua.length; i++) if (ua[i] !== ub[i]) d++
  return d
}

function points (mask: number): RoundingPoints {
  const at = (bit: number): RoundTo => (mask & bit) !== 0 ? 'bf16' : 'f32'
  return { ...MLX_CPU, quantizedMatmul: { product: at(1), sum: at(2), scaled: at(4), dequantized: 'bf16' } }
}

describe('mlx-cpu quantized matmuls: native = TypeScript reference, bit for bit', () => {
  it('mxfp8 g32 and affine 8-bit g64, every rounding mask, hard inputs', () => {
    const m = 3
    const k = 256
    const n = 41
    const x = activations(m * k, 1, true)
    const mx = mxWeight(n, k, 2, true)
    const af = affineWeight(n, k, 3)
    const bad: string[] = []
    for (let mask = 0; mask < 8; mask++) {
      const p = points(mask)
      const d = differing(mxfp8MatmulNative(x, m, prepareMxfp8(mx), p), mxfp8Matmul(x, m, mx, p))
      if (d !== 0) bad.push(`mxfp8 mask ${mask}: ${d}/${m * n}`)
      if (mask < 4) {
        const e = differing(affineMatmulNative(x, m, prepareAffine(af, p), p), affineMatmul(x, m, af, p))
        if (e !== 0) bad.push(`affine mask ${mask}: ${e}/${m * n}`)
      }
    }
    expect(bad).toEqual([])
    // The hard inputs did reach the outputs: some are NaN or infinite.
    const out = mxfp8MatmulNative(x, m, prepareMxfp8(mx))
    expect(out.some((v) => !Number.isFinite(v))).toBe(true)
  })

  it('at 1, 2, 3 and 7 threads on calls past minParallelWork: the same bits', () => {
    const m = 24
    const k = 512
    const n = 96
    expect(m * n * k).toBeGreaterThan((addon as unknown as { minParallelWork: number }).minParallelWork)
    const x = activations(m * k, 4, false)
    const mx = mxWeight(n, k, 5, false)
    const af = affineWeight(n, k, 6)
    const deq = affineDequantized(af)
    const refMx = mxfp8Matmul(x, m, mx)
    const refAf = affineMatmul(x, m, af, MLX_CPU, deq)
    const pmx = prepareMxfp8(mx)
    const paf = prepareAffine(af, MLX_CPU, deq)
    const bad: string[] = []
    for (const t of [1, 2, 3, 7]) {
      addon.setThreads(t)
      const a = differing(mxfp8MatmulNative(x, m, pmx), refMx)
      const b = differing(affineMatmulNative(x, m, paf), refAf)
      if (a + b !== 0) bad.push(`${t} threads: mxfp8 ${a}, affine ${b}`)
    }
    expect(bad).toEqual([])
  })

  it('refuses mismatched sizes before any work', () => {
    const mx = prepareMxfp8(mxWeight(4, 64, 7, false))
    expect(() => mxfp8MatmulNative(new Float32Array(10), 1, mx)).toThrow(/x holds 10 values, fewer than 1 x 64/)
    const af = affineWeight(4, 64, 8)
    expect(() => prepareAffine(af, MLX_CPU, new Float32Array(3))).toThrow(/dequantized weight holds 3 values, not 4 x 64/)
    // The addon's own checks, past the TypeScript ones: a weight of the wrong size is a RangeError, not a read outside it.
    const raw = (loadNativeKernels() as unknown as { mlxAffineMatmul: (...a: unknown[]) => unknown }).mlxAffineMatmul
    expect(() => raw(new Float32Array(64), 1, 64, new Float32Array(100), 4, 3, new Float32Array(4))).toThrow(/wt has 100 elements, expected k x n = 64 x 4/)
  })
})
