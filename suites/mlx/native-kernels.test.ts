// The mlx-cpu cache math's native kernels (native/src/mlx_cpu*.cc) against their TypeScript
// references (src/numerics/mlx-cpu/quantized-matmul.ts, pooling.ts, rope.ts), bit for bit: every
// rounding-point mask, hard inputs (NaN of any payload, ±inf, ±0, subnormals, MLX's NaN e4m3 codes
// 0x7F/0xFF, scale bytes 0 and 255), every ISA variant of the matmuls this CPU runs, 1, 2, 3 and 7
// threads on calls large enough to be split (minParallelWork), and a row alone equal to the same
// row computed among others (batch invariance). Every call, a single row too, takes the checked,
// unchecked or avx512-bf16 path by what its x (scanned by the call) and its weight (scanned once,
// when prepared) hold (native/src/mlx_cpu_isa.h): each is checked here, with inputs chosen to force
// each.
import { readFileSync } from 'node:fs'
import { afterAll, describe, expect, it } from 'vitest'
import { loadNativeKernels } from '../../src/kernels/native.ts'
import {
  affineDequantized, affineMatmul, bf16, MLX_CPU, mxfp8Matmul, type AffineWeight, type Mxfp8Weight, type RoundingPoints, type RoundTo,
} from '../../src/numerics/mlx-cpu/index.ts'
import {
  affineFromStrips, affineMatmulNative, mlxCpuKernelIsa, mxfp8FromStrips, mlxCpuLastMatmulPath, mlxPoolNative, mlxRopeRowsNative, mxfp8MatmulNative, prepareAffine, prepareMxfp8,
} from '../../src/kernels/mlx-cpu.ts'
import { overlapCompress, simpleCompress } from '../../src/numerics/mlx-cpu/pooling.ts'
import { mlxRopeRow } from '../../src/numerics/mlx-cpu/rope.ts'

const addon = loadNativeKernels()
const threadsBefore = addon.getThreads()
const isaBefore = mlxCpuKernelIsa()
afterAll(() => { addon.setThreads(threadsBefore); mlxCpuKernelIsa(isaBefore) })
/** The matmuls' ISA variants this build and CPU run (portable everywhere). */
const ISAS = addon.isas

/** A 32-bit LCG, so every run draws the same inputs. */
function lcg (seed: number): () => number {
  let s = seed >>> 0
  return () => { s = (Math.imul(s, 1103515245) + 12345) >>> 0; return s }
}

const SPECIAL = [NaN, Infinity, -Infinity, 0, -0, 2 ** -130, -(2 ** -133), 3.4e38, 1, -1]
/** NaNs the literal NaN is not: large payloads (whose bf16 rounding would carry into the sign), negative, signalling. */
const NAN_BITS = [0x7fffffff, 0xffffffff, 0x7f800001, 0xffc00000, 0x7fff8000]

/** x with a few of NAN_BITS written over its first row. */
function withNanPayloads (x: Float32Array): Float32Array {
  const u = new Uint32Array(x.buffer, x.byteOffset, x.length)
  NAN_BITS.forEach((b, i) => { u[7 * i + 3] = b })
  return x
}

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
  it('mxfp8 g32 and affine 8-bit g64, every rounding mask, hard inputs, every ISA variant', () => {
    // 6 rows (a 4-row tile and 2 single rows), 89 columns (whole 64-column units, vectors and single columns).
    const m = 6
    const k = 256
    const n = 89
    const x = withNanPayloads(activations(m * k, 1, true))
    const mx = mxWeight(n, k, 2, true)
    const af = affineWeight(n, k, 3)
    const pmx = prepareMxfp8(mx)
    const paf = Array.from({ length: 4 }, (_, mask) => prepareAffine(af, points(mask)))
    const refMx = Array.from({ length: 8 }, (_, mask) => mxfp8Matmul(x, m, mx, points(mask)))
    const refAf = Array.from({ length: 4 }, (_, mask) => affineMatmul(x, m, af, points(mask)))
    const bad: string[] = []
    expect(ISAS).toContain('portable')
    for (const isa of ISAS) {
      expect(mlxCpuKernelIsa(isa)).toBe(isa)
      for (let mask = 0; mask < 8; mask++) {
        const p = points(mask)
        const d = differing(mxfp8MatmulNative(x, m, pmx, p), refMx[mask])
        if (d !== 0) bad.push(`${isa} mxfp8 mask ${mask}: ${d}/${m * n}`)
        if (mask < 4) {
          const e = differing(affineMatmulNative(x, m, paf[mask], p), refAf[mask])
          if (e !== 0) bad.push(`${isa} affine mask ${mask}: ${e}/${m * n}`)
        }
      }
    }
    mlxCpuKernelIsa(isaBefore)
    expect(bad).toEqual([])
    // The hard inputs did reach the outputs: some are NaN or infinite.
    const out = mxfp8MatmulNative(x, m, prepareMxfp8(mx))
    expect(out.some((v) => !Number.isFinite(v))).toBe(true)
  })

  it('the paths of every call, 13 rows or a decode step\'s one: checked, unchecked, avx512-bf16 by what x and the weight\'s one scan hold, each the reference\'s bits, every mask and ISA', () => {
    // 13 rows: three 4-row tiles and a row; 1 row: a decode step. x is scanned by every call, the
    // weights once, when prepared (PreparedMxfp8/PreparedAffine.scan).
    const k = 256
    const n = 89
    const stripAt = (j: number, i: number): number => { const j0 = j - (j % 64); return j0 * k + i * Math.min(64, n - j0) + (j - j0) }
    // Hard values that are neither denormal nor NaNs that could carry: NaN payloads with bits 16-21
    // not all set, ±inf, ±0, the largest magnitudes.
    const hard = [0x7fc00000, 0x7f800001, 0xffc00000, 0x7fc12345, 0xff800100, 0x7fbe0000, 0x7f800000, 0xff800000, 0, 0x80000000, 0x7f7f0000, 0xff7f0000]
    const mx = mxWeight(n, k, 22, false)
    mx.codes[5] = 0x7f // MLX's 480
    const af = affineWeight(n, k, 23)
    const pmx = prepareMxfp8(mx)
    // The affine weight with one NaN (the reference's literal NaN), so that a prepared copy can hold
    // a NaN whose payload would carry at the same place (written into the strips, then scanned:
    // affineFromStrips).
    const nanAt = { col: 70, row: 101 }
    const deq = Array.from({ length: 4 }, (_, mask) => {
      const d = affineDequantized(af, points(mask))
      d[nanAt.col * k + nanAt.row] = NaN
      return d
    })
    const paf = deq.map((d, mask) => prepareAffine(af, points(mask), d))
    const pafBad = paf.map((p) => {
      const wt = p.wt.slice()
      new Uint32Array(wt.buffer)[stripAt(nanAt.col, nanAt.row)] = 0xffffffff
      return affineFromStrips(wt, n, k)
    })
    // A weight whose column 30 is denormal (±2^-142 to ±5·2^-142): that column's products and sums
    // are denormal, which the avx512-bf16 roundings would flush to zero; the scan's smallest
    // magnitude (a denormal counts as 2^-149) rules that path out.
    const tinyCol = 30
    const deqTiny = deq.map((d) => {
      const c = d.slice()
      for (let i = 0; i < k; i++) c[tinyCol * k + i] = (i % 2 === 0 ? 1 : -1) * (1 + (i % 5)) * 2 ** -142
      return c
    })
    const pafTiny = deqTiny.map((d, mask) => prepareAffine(af, points(mask), d))
    // Scale bytes 0 and 1 (2^-127, a denormal scale, and 2^-126): scaled sums could be denormal.
    const mxSmallScale = { ...mx, scales: mx.scales.map((s, i) => (i % 11 === 0 ? i % 2 : s)) }
    const pmxSmallScale = prepareMxfp8(mxSmallScale)
    expect(pafBad[3].scan[0]).toBe(0)
    expect(paf[3].scan[0]).toBe(1)
    expect(pafTiny[3].scan[1]).toBe(-149)
    const bf16Cpu = process.platform === 'linux' && readFileSync('/proc/cpuinfo', 'utf8').includes('avx512_bf16')
    const fast = (isa: string, mask: number, full: number): string => (mask === full && isa === 'avx512' && bf16Cpu ? 'avx512-bf16' : 'unchecked')
    const bad: string[] = []
    const paths = new Set<string>()
    for (const m of [13, 1]) {
      // Without the hard values (the denormal-column case: an infinity in a row would make its sum infinite).
      const xClean = activations(m * k, 21, false)
      const x = xClean.slice()
      hard.forEach((b, i) => { new Uint32Array(x.buffer)[(37 * i + 5) % (m * k)] = b })
      const row = (r: number): number => (r % m) * k
      const xWith = (edit: (u: Uint32Array) => void): Float32Array => { const c = x.slice(); edit(new Uint32Array(c.buffer)); return c }
      // A NaN in x that could carry; x with a row of denormals and zeros only (its outputs are
      // denormal sums, which a denormal-flushing rounding would make 0); x whose smallest nonzero
      // value is 2^-115 (products down to 2^-124: partial sums could be denormal).
      const xCarry = xWith((u) => { u[row(3) + 40] = 0x7fff8000 })
      const xDenormal = xWith((u) => { for (let i = 0; i < k; i++) u[row(2) + i] = i % 3 === 0 ? 0 : (0x00010000 * (1 + (i % 50))) | (i % 2 === 0 ? 0x80000000 : 0) })
      const xTiny = xWith((u) => { u[row(7) + 9] = 0x06000000 })
      const cases: { what: string, x: Float32Array, mx: Mxfp8Weight, pmx: typeof pmx, deq: Float32Array[], paf: typeof paf, path: (isa: string, mask: number, full: number) => string }[] = [
        { what: 'normal', x, mx, pmx, deq, paf, path: fast },
        { what: 'x NaN that could carry', x: xCarry, mx, pmx, deq, paf, path: () => 'checked' },
        { what: 'weight NaN that could carry', x, mx, pmx, deq, paf: pafBad, path: (isa, mask, full) => (full === 3 ? 'checked' : fast(isa, mask, full)) },
        { what: 'weight column of denormals', x: xClean, mx, pmx, deq: deqTiny, paf: pafTiny, path: (isa, mask, full) => (full === 3 ? 'unchecked' : fast(isa, mask, full)) },
        { what: 'x denormal row', x: xDenormal, mx, pmx, deq, paf, path: () => 'unchecked' },
        { what: 'x down to 2^-115', x: xTiny, mx, pmx, deq, paf, path: () => 'unchecked' },
        { what: 'scale bytes 0 and 1', x, mx: mxSmallScale, pmx: pmxSmallScale, deq, paf, path: (isa, mask, full) => (full === 7 ? 'unchecked' : fast(isa, mask, full)) },
      ]
      for (const c of cases) {
        const refMx = Array.from({ length: 8 }, (_, mask) => mxfp8Matmul(c.x, m, c.mx, points(mask)))
        const refAf = Array.from({ length: 4 }, (_, mask) => affineMatmul(c.x, m, af, points(mask), c.deq[mask]))
        for (const isa of ISAS) {
          mlxCpuKernelIsa(isa)
          for (let mask = 0; mask < 8; mask++) {
            const d = differing(mxfp8MatmulNative(c.x, m, c.pmx, points(mask)), refMx[mask])
            const path = mlxCpuLastMatmulPath()
            paths.add(path)
            if (d !== 0) bad.push(`m=${m} ${c.what} ${isa} mxfp8 mask ${mask} (${path}): ${d}/${m * n}`)
            if (path !== c.path(isa, mask, 7)) bad.push(`m=${m} ${c.what} ${isa} mxfp8 mask ${mask}: took ${path}`)
            if (mask < 4) {
              const e = differing(affineMatmulNative(c.x, m, c.paf[mask], points(mask)), refAf[mask])
              const p = mlxCpuLastMatmulPath()
              if (e !== 0) bad.push(`m=${m} ${c.what} ${isa} affine mask ${mask} (${p}): ${e}/${m * n}`)
              if (p !== c.path(isa, mask, 3)) bad.push(`m=${m} ${c.what} ${isa} affine mask ${mask}: took ${p}`)
            }
          }
        }
      }
      mlxCpuKernelIsa(isaBefore)
      expect(bad).toEqual([])
      // The hard values reached the outputs, the NaN weight its column, the denormal row and the
      // denormal column denormal outputs (what the avx512-bf16 roundings would have flushed).
      expect(mxfp8MatmulNative(x, m, pmx).some((v) => !Number.isFinite(v))).toBe(true)
      expect(affineMatmulNative(x, m, pafBad[3]).filter((_, i) => i % n === nanAt.col).every((v) => Number.isNaN(v))).toBe(true)
      expect(affineMatmulNative(xDenormal, m, paf[3]).slice((2 % m) * n, (2 % m + 1) * n).some((v) => v !== 0 && Math.abs(v) < 2 ** -126)).toBe(true)
      expect(affineMatmulNative(xClean, m, pafTiny[3]).filter((_, i) => i % n === tinyCol).some((v) => v !== 0 && Math.abs(v) < 2 ** -126)).toBe(true)
    }
    expect([...paths].sort()).toEqual(bf16Cpu && ISAS.includes('avx512') ? ['avx512-bf16', 'checked', 'unchecked'] : ['checked', 'unchecked'])
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
    for (const isa of ISAS) {
      mlxCpuKernelIsa(isa)
      for (const t of [1, 2, 3, 7]) {
        addon.setThreads(t)
        const a = differing(mxfp8MatmulNative(x, m, pmx), refMx)
        const b = differing(affineMatmulNative(x, m, paf), refAf)
        if (a + b !== 0) bad.push(`${isa}, ${t} threads: mxfp8 ${a}, affine ${b}`)
      }
    }
    mlxCpuKernelIsa(isaBefore)
    addon.setThreads(threadsBefore)
    expect(bad).toEqual([])
  })

  it('batch invariance: each row alone gives the bits it gives among 24', () => {
    const m = 24
    const k = 128
    const n = 70
    const x = activations(m * k, 9, false)
    const pmx = prepareMxfp8(mxWeight(n, k, 10, false))
    const paf = prepareAffine(affineWeight(n, k, 11))
    const allMx = mxfp8MatmulNative(x, m, pmx)
    const allAf = affineMatmulNative(x, m, paf)
    let d = 0
    for (const r of [0, 3, 4, 13, 22, 23]) {
      const row = x.slice(r * k, (r + 1) * k)
      d += differing(mxfp8MatmulNative(row, 1, pmx), allMx.slice(r * n, (r + 1) * n))
      d += differing(affineMatmulNative(row, 1, paf), allAf.slice(r * n, (r + 1) * n))
    }
    expect(d).toBe(0)
  })

  it('refuses an ISA this build or CPU does not run, keeping the one chosen', () => {
    const before = mlxCpuKernelIsa()
    expect(() => mlxCpuKernelIsa('sse9' as never)).toThrow(/sse9 is not an ISA this build and CPU run/)
    expect(mlxCpuKernelIsa()).toBe(before)
  })

  it('refuses mismatched sizes before any work', () => {
    const mx = prepareMxfp8(mxWeight(4, 64, 7, false))
    expect(() => mxfp8MatmulNative(new Float32Array(10), 1, mx)).toThrow(/x holds 10 values, fewer than 1 x 64/)
    const af = affineWeight(4, 64, 8)
    expect(() => prepareAffine(af, MLX_CPU, new Float32Array(3))).toThrow(/dequantized weight holds 3 values, not 4 x 64/)
    // The addon's own checks, past the TypeScript ones: a weight of the wrong size is a RangeError, not a read outside it.
    expect(() => affineFromStrips(new Float32Array(100), 4, 64)).toThrow(/prepared weight holds 100 values, not 4 x 64/)
    expect(() => mxfp8FromStrips(new Float32Array(256), new Float32Array(4), 4, 64)).toThrow(/holds 256 values and 4 scales, not 4 x 64 and 4 x 2/)
    expect(() => mxfp8FromStrips(new Float32Array(4 * 40), new Float32Array(4), 4, 40)).toThrow(/k a multiple of the group, 32/)
    // The addon's own checks, past the TypeScript ones: a weight of the wrong size is a RangeError,
    // not a read outside it; a scan no scan could give is refused.
    const native = loadNativeKernels() as unknown as { mlxAffineMatmul: (...a: unknown[]) => unknown, mlxScanWeights: (wt: Float32Array) => Int32Array }
    const raw = native.mlxAffineMatmul
    const scan = native.mlxScanWeights(new Float32Array(256))
    expect(Array.from(scan)).toEqual([1, 1000, 1000])
    expect(() => raw(new Float32Array(64), 1, 64, new Float32Array(100), 4, scan, 3, new Float32Array(4))).toThrow(/wt has 100 elements, expected k x n = 64 x 4/)
    expect(() => raw(new Float32Array(64), 1, 64, new Float32Array(256), 4, new Int32Array(2), 3, new Float32Array(4))).toThrow(/scan must be mlxScanWeights' 3 values/)
    expect(() => raw(new Float32Array(64), 1, 64, new Float32Array(256), 4, Int32Array.of(1, -200, 1000), 3, new Float32Array(4))).toThrow(/an exponent no float32 has/)
    expect(() => raw(new Float32Array(64), 1, 64, new Float32Array(256), 4, Int32Array.of(2, 0, 1000), 3, new Float32Array(4))).toThrow(/scan must be mlxScanWeights' 3 values/)
  })
})

/** Pooling points with the mask's bits: 1 gate + ape, 2 weights, 4 product, 8 sum. */
function poolPoints (mask: number): RoundingPoints {
  const at = (bit: number): RoundTo => (mask & bit) !== 0 ? 'bf16' : 'f32'
  return { ...MLX_CPU, pooling: { overlapGate: at(1), simpleGate: at(1), weights: at(2), product: at(4), sum: at(8) } }
}

/** Gate logits: spread wide enough that the softmax's exp meets both of its cut-offs (±88). */
function gates (n: number, seed: number, specials: boolean): Float32Array {
  const r = lcg(seed)
  return Float32Array.from({ length: n }, () => {
    const u = r()
    return specials && u % 97 === 0 ? SPECIAL[(u >>> 8) % SPECIAL.length] : bf16(((u >>> 8) / 2 ** 24 - 0.5) * 2 ** ((u % 9) - 1))
  })
}

describe('mlx-cpu pooling and rope: native = TypeScript reference, bit for bit', () => {
  it('overlap (ratio 4) and simple (ratio 128) pooling, every rounding mask, hard inputs', () => {
    const bad: string[] = []
    for (const [ratio, overlap, windows, dim] of [[4, true, 6, 24], [128, false, 2, 12]] as const) {
      const width = overlap ? 2 * dim : dim
      const kv = activations(windows * ratio * width, 20 + ratio, true)
      const gate = gates(windows * ratio * width, 21 + ratio, true)
      const ape = gates(ratio * width, 22 + ratio, false)
      let nonFinite = 0
      for (let mask = 0; mask < 16; mask++) {
        const p = poolPoints(mask)
        const ref = overlap ? overlapCompress(kv, gate, ape, windows, ratio, dim, p) : simpleCompress(kv, gate, ape, windows, ratio, dim, p)
        const d = differing(mlxPoolNative(kv, gate, ape, windows, ratio, dim, overlap, p), ref)
        if (d !== 0) bad.push(`ratio ${ratio} mask ${mask}: ${d}/${ref.length}`)
        nonFinite += ref.filter((v) => !Number.isFinite(v)).length
      }
      // The specials reached some outputs, not all.
      expect(nonFinite).toBeGreaterThan(0)
      expect(nonFinite).toBeLessThan(16 * windows * dim)
    }
    expect(bad).toEqual([])
  })

  it('pooling and rope at 1, 2, 3 and 7 threads on calls past minParallelWork: the same bits', () => {
    const [windows, ratio, dim] = [3, 128, 48]
    const kv = activations(windows * ratio * dim, 30, false)
    const gate = gates(windows * ratio * dim, 31, false)
    const ape = gates(ratio * dim, 32, false)
    const refPool = simpleCompress(kv, gate, ape, windows, ratio, dim)
    const [rows, d] = [300, 128]
    const x = activations(rows * d, 33, false)
    // Inverse frequencies as the model's: a few +inf freqs (inv 0) first, then falling powers.
    const inv = Float32Array.from({ length: d / 2 }, (_, i) => i < 4 ? 0 : Math.fround(10000 ** (-i / 64)))
    const refRope = x.slice()
    for (let r = 0; r < rows; r++) mlxRopeRow(refRope, r * d, inv, 5000 + r)
    const bad: string[] = []
    for (const t of [1, 2, 3, 7]) {
      addon.setThreads(t)
      const a = differing(mlxPoolNative(kv, gate, ape, windows, ratio, dim, false), refPool)
      const b = differing(mlxRopeRowsNative(x.slice(), rows, d, inv, 5000), refRope)
      if (a + b !== 0) bad.push(`${t} threads: pool ${a}, rope ${b}`)
    }
    addon.setThreads(threadsBefore)
    expect(bad).toEqual([])
  })

  it('rope, every rounding mask, special rows; an angle past 2^23 is refused before any row changes', () => {
    const d = 64
    const rows = 9
    const x = activations(rows * d, 40, true)
    const inv = Float32Array.from({ length: d / 2 }, (_, i) => i < 2 ? 0 : Math.fround(160000 ** (-i / 32)))
    const bad: string[] = []
    for (let mask = 0; mask < 8; mask++) {
      const at = (bit: number): RoundTo => (mask & bit) !== 0 ? 'bf16' : 'f32'
      const p: RoundingPoints = { ...MLX_CPU, rope: { tables: at(1), product: at(2), result: at(4) } }
      const ref = x.slice()
      for (let r = 0; r < rows; r++) mlxRopeRow(ref, r * d, inv, 1_000_000 + r, p)
      const e = differing(mlxRopeRowsNative(x.slice(), rows, d, inv, 1_000_000, p), ref)
      if (e !== 0) bad.push(`mask ${mask}: ${e}/${ref.length}`)
    }
    expect(bad).toEqual([])
    const y = x.slice()
    expect(() => mlxRopeRowsNative(y, rows, d, Float32Array.of(0, 1), 2 ** 23)).toThrow(/past 2\^23/)
    expect(differing(y, x)).toBe(0)
  })

  it('refuses pooling and rope inputs of the wrong size before any work', () => {
    const kv = new Float32Array(2 * 4 * 8)
    expect(() => mlxPoolNative(kv, kv, new Float32Array(3), 2, 4, 4, true)).toThrow(/ape holds 3 values, not 4 x 8/)
    expect(() => mlxPoolNative(kv, new Float32Array(5), new Float32Array(32), 2, 4, 4, true)).toThrow(/kv and gate hold 64 and 5 values, fewer than 8 x 8/)
    expect(() => mlxRopeRowsNative(new Float32Array(10), 1, 16, new Float32Array(8), 0)).toThrow(/x holds 10 values, fewer than 1 x 16/)
    // The addon's own checks, past the TypeScript ones.
    const raw = (loadNativeKernels() as unknown as { mlxPool: (...a: unknown[]) => unknown, mlxRopeRows: (...a: unknown[]) => unknown })
    expect(() => raw.mlxPool(kv, kv, new Float32Array(32), 2, 300, 4, true, 15, new Float32Array(8))).toThrow(/ratio must be 1 to 512/)
    expect(() => raw.mlxRopeRows(new Float32Array(16), 1, 16, new Float32Array(9), 0, 7)).toThrow(/inv has 9 frequencies, more than d\/2 = 8/)
  })
})
