// Bad input is refused with a NumericsError that names the kernel, the argument and the problem,
// and the native binding itself refuses sizes that would read or write outside a buffer.
import { describe, it, expect } from 'vitest'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { NumericsError, PdBridgeError } from '../../src/errors.ts'
import { loadNativeKernels, matmulBf16, matmulF32, reference, rmsNorm, setKernelThreads } from '../../src/kernels/index.ts'
import { EXPECTED_ABI_VERSION, poolFromEnv, threadsFromEnv } from '../../src/kernels/native.ts'

const F = (n: number) => new Float32Array(n)

/** Calls `fn` and returns the NumericsError it throws (fails the test if it throws anything else). */
function numericsError (fn: () => unknown): NumericsError {
  try {
    fn()
  } catch (err) {
    expect(err).toBeInstanceOf(NumericsError)
    return err as NumericsError
  }
  throw new Error('expected a NumericsError, nothing was thrown')
}

describe('matmul: size and type errors', () => {
  const cases: Array<[string, (mm: typeof matmulF32) => unknown, RegExp]> = [
    ['x length', (mm) => mm(F(11), 3, 4, F(8), 2), /x has 11 elements, expected \[m, k\] = 3 x 4 = 12/],
    ['w length', (mm) => mm(F(12), 3, 4, F(9), 2), /w has 9 elements, expected \[n, k\] = 2 x 4 = 8/],
    ['out length', (mm) => mm(F(12), 3, 4, F(8), 2, F(5)), /out has 5 elements, expected \[m, n\] = 3 x 2 = 6/],
    ['negative m', (mm) => mm(F(0), -1, 0, F(0), 0), /m must be a non-negative integer, got -1/],
    ['fractional k', (mm) => mm(F(3), 2, 1.5, F(3), 2), /k must be a non-negative integer, got 1.5/],
    ['NaN n', (mm) => mm(F(4), 1, 4, F(4), NaN), /n must be a non-negative integer, got NaN/],
    ['x type', (mm) => mm(new Float64Array(4) as unknown as Float32Array, 1, 4, F(4), 1), /x must be a Float32Array, got Float64Array/],
    ['out type', (mm) => mm(F(4), 1, 4, F(4), 1, [0] as unknown as Float32Array), /out must be a Float32Array, got Array/],
    ['roundBf16 type', (mm) => mm(F(4), 1, 4, F(4), 1, undefined, { roundBf16: 'yes' as unknown as boolean }), /opts.roundBf16 must be a boolean, got string/],
  ]
  for (const [name, call, message] of cases) {
    it(`refuses a bad ${name} in matmulF32 and its reference`, () => {
      expect(numericsError(() => call(matmulF32)).message).toMatch(new RegExp('^matmulF32: ' + message.source))
      expect(numericsError(() => call(reference.matmulF32)).message).toMatch(new RegExp('^reference.matmulF32: ' + message.source))
    })
  }

  it('refuses float32 weights in matmulBf16 and bf16 codes in matmulF32', () => {
    expect(numericsError(() => matmulBf16(F(4), 1, 4, F(4) as unknown as Uint16Array, 1)).message)
      .toBe('matmulBf16: w must be a Uint16Array, got Float32Array')
    expect(numericsError(() => matmulF32(F(4), 1, 4, new Uint16Array(4) as unknown as Float32Array, 1)).message)
      .toBe('matmulF32: w must be a Float32Array, got Uint16Array')
  })

  it('refuses an output that overlaps x or w', () => {
    const shared = F(20)
    const x = shared.subarray(0, 8)
    const w = shared.subarray(8, 16)
    expect(numericsError(() => matmulF32(x, 2, 4, w, 2, shared.subarray(6, 10))).message).toMatch(/out overlaps x/)
    expect(numericsError(() => matmulF32(x, 2, 4, w, 2, shared.subarray(15, 19))).message).toMatch(/out overlaps w/)
    // Adjacent, not overlapping: accepted.
    expect(matmulF32(x, 2, 4, w, 2, shared.subarray(16, 20))).toHaveLength(4)
  })

  it('accepts empty shapes: m = 0 or n = 0 gives an empty result, k = 0 gives +0s', () => {
    expect(matmulF32(F(0), 0, 5, F(10), 2)).toHaveLength(0)
    expect(matmulF32(F(10), 2, 5, F(0), 0)).toHaveLength(0)
    const y = matmulF32(F(0), 2, 0, F(0), 3, F(6).fill(7))
    expect(Array.from(new Uint32Array(y.buffer))).toEqual([0, 0, 0, 0, 0, 0])
  })
})

describe('rmsNorm: size and value errors', () => {
  const cases: Array<[string, (rn: typeof rmsNorm) => unknown, RegExp]> = [
    ['d of 0', (rn) => rn(F(0), 0, 0, F(0), 1e-6), /d must be at least 1, got 0/],
    ['x length', (rn) => rn(F(7), 2, 4, F(4), 1e-6), /x has 7 elements, expected \[rows, d\] = 2 x 4 = 8/],
    ['weight length', (rn) => rn(F(8), 2, 4, F(3), 1e-6), /weight has 3 elements, expected \[d\] = 1 x 4 = 4/],
    ['negative eps', (rn) => rn(F(4), 1, 4, F(4), -1e-6), /eps must be a finite number >= 0, got -0.000001/],
    ['NaN eps', (rn) => rn(F(4), 1, 4, F(4), NaN), /eps must be a finite number >= 0, got NaN/],
    ['infinite eps', (rn) => rn(F(4), 1, 4, F(4), Infinity), /eps must be a finite number >= 0, got Infinity/],
    ['out length', (rn) => rn(F(4), 1, 4, F(4), 0, F(3)), /out has 3 elements, expected \[rows, d\] = 1 x 4 = 4/],
  ]
  for (const [name, call, message] of cases) {
    it(`refuses a bad ${name} in rmsNorm and its reference`, () => {
      expect(numericsError(() => call(rmsNorm)).message).toMatch(new RegExp('^rmsNorm: ' + message.source))
      expect(numericsError(() => call(reference.rmsNorm)).message).toMatch(new RegExp('^reference.rmsNorm: ' + message.source))
    })
  }

  it('refuses an output that is the input (no in-place normalisation)', () => {
    const x = F(4).fill(1)
    expect(numericsError(() => rmsNorm(x, 1, 4, F(4), 0, x)).message).toBe('rmsNorm: out overlaps x in memory; pass a separate output buffer')
  })

  it('accepts rows = 0', () => {
    expect(rmsNorm(F(0), 0, 4, F(4), 1e-6)).toHaveLength(0)
  })
})

describe('setKernelThreads: bad counts', () => {
  it('refuses 0, 1.5 and 2000 threads', () => {
    for (const n of [0, 1.5, 2000]) {
      expect(numericsError(() => setKernelThreads(n)).message).toMatch(/^setKernelThreads: n must be an integer from 1 to 1024, got /)
    }
  })
})

describe('native binding: its own checks stop out-of-bounds access', () => {
  const raw = loadNativeKernels()

  it('throws RangeError on lengths that do not match the sizes', () => {
    expect(() => raw.matmulF32(F(3), 2, 2, F(4), 2, F(4), false)).toThrow(RangeError)
    expect(() => raw.matmulF32(F(3), 2, 2, F(4), 2, F(4), false)).toThrow('x has 3 elements, expected m x k = 2 x 2')
    expect(() => raw.matmulBf16(F(4), 2, 2, new Uint16Array(3), 2, F(4), false)).toThrow('w has 3 elements')
    expect(() => raw.matmulF32(F(4), 2, 2, F(4), 2, F(3), false)).toThrow('out has 3 elements')
    expect(() => raw.rmsNorm(F(8), 2, 4, F(3), 0, F(8))).toThrow('weight has 3 elements')
    expect(() => raw.rmsNorm(F(0), 0, 0, F(0), 0, F(0))).toThrow('d must be at least 1')
  })

  it('throws RangeError when m x n overflows instead of wrapping to a small size', () => {
    // m = n = 2^50, k = 0: x and w may be empty, and m * n wraps to 0 in 64 bits.
    expect(() => raw.matmulF32(F(0), 2 ** 50, 0, F(0), 2 ** 50, F(0), false)).toThrow(RangeError)
  })

  it('throws TypeError on wrong array types and on sizes that are not integers', () => {
    expect(() => raw.matmulF32(new Float64Array(4) as unknown as Float32Array, 2, 2, F(4), 2, F(4), false)).toThrow(TypeError)
    expect(() => raw.matmulBf16(F(4), 2, 2, F(4) as unknown as Uint16Array, 2, F(4), false)).toThrow(TypeError)
    expect(() => raw.matmulF32(F(4), '2' as unknown as number, 2, F(4), 2, F(4), false)).toThrow(TypeError)
    expect(() => raw.matmulF32(F(4), 2.5, 2, F(4), 2, F(4), false)).toThrow(RangeError)
  })

  it('refuses an order code that names no order (0 lanes8, 1 blocks128, 2 lanes8-fma, 3 sequential-fma, 4 sequential-fma packed)', () => {
    expect(() => raw.matmulF32(F(4), 2, 2, F(4), 2, F(4), false, 5)).toThrow('order must be a matmul order code (0 lanes8, 1 blocks128, 2 lanes8-fma, 3 sequential-fma, 4 sequential-fma packed)')
    // Code 4 reads W in whole strips of 16 rows: a row-major W of n x k is refused, not read past its end.
    expect(() => raw.matmulF32(F(4), 2, 2, F(4), 2, F(4), false, 4)).toThrow('w has 4 elements, expected ceil(n / 16) * 16 x k (packed) = 16 x 2')
    expect(() => raw.packStripsF32(F(4), 2, 2, F(4))).toThrow('out has 4 elements, expected ceil(n / 16) * 16 x k = 16 x 2')
    expect(() => raw.matmulBf16(F(4), 2, 2, new Uint16Array(4), 2, F(4), false, 7)).toThrow(RangeError)
    expect(() => raw.matmulF32(F(4), 2, 2, F(4), 2, F(4), false, -1)).toThrow(RangeError)
    expect(() => raw.matmulF32(F(4), 2, 2, F(4), 2, F(4), false, true as unknown as number)).toThrow(TypeError)
  })
})

describe('loadNativeKernels: a missing or stale addon', () => {
  it('names the path and says to run npm run build:native when the addon is missing', () => {
    const path = join(tmpdir(), 'pdb-no-such-dir', 'pdb_kernels.node')
    expect(() => loadNativeKernels(path)).toThrow(PdBridgeError)
    expect(() => loadNativeKernels(path)).toThrow(`native kernels ${path} is not built: run npm run build:native`)
  })

  it('refuses a module with another ABI version as a stale build', () => {
    const dir = mkdtempSync(join(tmpdir(), 'pdb-kernels-'))
    const path = join(dir, 'stale.cjs')
    try {
      writeFileSync(path, 'module.exports = { abiVersion: 1 }\n')
      expect(() => loadNativeKernels(path)).toThrow(`ABI version 1, expected ${EXPECTED_ABI_VERSION} (stale build): run npm run build:native`)
      expect(EXPECTED_ABI_VERSION).toBe(loadNativeKernels().abiVersion)
    } finally {
      rmSync(dir, { recursive: true, force: true })
    }
  })
})

describe('PD_KERNEL_THREADS', () => {
  it('reads a thread count from 1 to 1024 and refuses anything else by name', () => {
    expect(threadsFromEnv({})).toBeUndefined()
    expect(threadsFromEnv({ PD_KERNEL_THREADS: '' })).toBeUndefined()
    expect(threadsFromEnv({ PD_KERNEL_THREADS: '1' })).toBe(1)
    expect(threadsFromEnv({ PD_KERNEL_THREADS: '16' })).toBe(16)
    expect(threadsFromEnv({ PD_KERNEL_THREADS: '1024' })).toBe(1024)
    for (const bad of ['0', '1025', '-2', '2.5', 'two', ' 4', '99999']) {
      expect(() => threadsFromEnv({ PD_KERNEL_THREADS: bad })).toThrow(new PdBridgeError(`PD_KERNEL_THREADS: ${JSON.stringify(bad)} is not an integer from 1 to 1024`))
    }
  })
})

describe('PD_KERNEL_POOL', () => {
  it('takes on, off or nothing and refuses anything else by name', () => {
    expect(poolFromEnv({})).toBeUndefined()
    expect(poolFromEnv({ PD_KERNEL_POOL: '' })).toBeUndefined()
    expect(poolFromEnv({ PD_KERNEL_POOL: 'on' })).toBe('on')
    expect(poolFromEnv({ PD_KERNEL_POOL: 'off' })).toBe('off')
    for (const bad of ['ON', '1', 'yes', 'auto']) {
      expect(() => poolFromEnv({ PD_KERNEL_POOL: bad })).toThrow(new PdBridgeError(`PD_KERNEL_POOL: ${JSON.stringify(bad)} is not on or off (or unset)`))
    }
  })
})
