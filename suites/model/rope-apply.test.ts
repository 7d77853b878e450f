// cos/sin tables, the interleaved rotation kernel, and the rope fingerprint.
import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import { NumericsError } from '../../src/errors.ts'
import { deepseekV4FlashConfigJson, parseDeepseekV4Config } from '../../src/model/config.ts'
import { applyRopeInterleaved, ropeFingerprint, ropeInvFreq, ropeTable } from '../../src/model/rope.ts'

const flash = parseDeepseekV4Config(deepseekV4FlashConfigJson())
const compress = flash.rope.compress
const main = flash.rope.main
const U = 2 ** -24
const bits = (a: Float32Array) => new Uint32Array(a.buffer, a.byteOffset, a.length)

describe('ropeTable holds fp32 cos/sin of fp32 angles, one row per position', () => {
  it('row 0 is cos 1, sin 0 on every pair', () => {
    const { cos, sin } = ropeTable(compress, 1)
    expect(cos).toHaveLength(32)
    for (let k = 0; k < 32; k++) {
      expect(cos[k]).toBe(1)
      expect(Object.is(sin[k], 0)).toBe(true)
    }
  })

  it('pair 0 (frequency exactly 1) has angle = position', () => {
    const { cos, sin } = ropeTable(main, 1000)
    for (const pos of [1, 2, 3, 100, 999]) {
      expect(cos[pos * 32]).toBe(Math.fround(Math.cos(pos)))
      expect(sin[pos * 32]).toBe(Math.fround(Math.sin(pos)))
    }
  })

  it('a window {start, count} is exactly the matching rows of the table from 0 (chunk invariance)', () => {
    const whole = ropeTable(compress, 3000)
    for (const [start, count] of [[0, 5], [127, 130], [2048, 952], [2999, 1]]) {
      const part = ropeTable(compress, { start, count })
      expect(bits(part.cos)).toEqual(bits(whole.cos.subarray(start * 32, (start + count) * 32)))
      expect(bits(part.sin)).toEqual(bits(whole.sin.subarray(start * 32, (start + count) * 32)))
    }
  })

  it('a position is rounded to fp32 first, as transformers does: 2^24 + 1 gives the row of 2^24', () => {
    const t = ropeTable(compress, { start: 2 ** 24, count: 2 })
    expect(bits(t.cos.subarray(0, 32))).toEqual(bits(t.cos.subarray(32, 64)))
  })

  it('every (cos, sin) pair has unit norm to within fp32 rounding', () => {
    // cos and sin each round once (2^-24 relative), so cos^2 + sin^2 is within 2 * 2^-24 of 1 (+ double rounding noise).
    const { cos, sin } = ropeTable(compress, { start: 65000, count: 1000 })
    let worst = 0
    for (let i = 0; i < cos.length; i++) worst = Math.max(worst, Math.abs(cos[i] * cos[i] + sin[i] * sin[i] - 1))
    expect(worst).toBeLessThanOrEqual(2.01 * U)
    expect(worst).toBeGreaterThan(0)
  })

  it('refuses negative or fractional positions', () => {
    expect(() => ropeTable(compress, -1)).toThrow(NumericsError)
    expect(() => ropeTable(compress, { start: 1.5, count: 2 })).toThrow(/non-negative integers/)
  })
})

describe('applyRopeInterleaved rotates the pairs of the rope slice in place', () => {
  it('a 90-degree table (cos 0, sin 1) maps (a, b) to (-b, a) exactly and leaves the other channels alone', () => {
    const cos = new Float32Array(4)
    const sin = new Float32Array(4).fill(1)
    const x = Float32Array.from([7.25, -3.5, 1.5, 2.75, -0.125, 1e-3, 3e5, -8])
    const before = x.slice()
    applyRopeInterleaved(x, 2, 4, cos, sin, 1)
    expect(Array.from(x)).toEqual([7.25, -3.5, -2.75, 1.5, -Math.fround(1e-3), -0.125, 3e5, -8])
    expect(bits(x.subarray(0, 2))).toEqual(bits(before.subarray(0, 2)))
    expect(bits(x.subarray(6))).toEqual(bits(before.subarray(6)))
    // Four quarter turns are the identity, bit for bit; the inverse undoes one quarter turn exactly.
    for (let turn = 0; turn < 3; turn++) applyRopeInterleaved(x, 2, 4, cos, sin, 0)
    expect(bits(x)).toEqual(bits(before))
    applyRopeInterleaved(x, 2, 4, cos, sin, 0)
    applyRopeInterleaved(x, 2, 4, cos, sin, 0, true)
    expect(bits(x)).toEqual(bits(before))
  })

  it('computes (a*c - b*s, a*s + b*c) with every product and sum rounded to fp32', () => {
    const { cos, sin } = ropeTable(compress, 50)
    const x = Float32Array.from({ length: 64 }, (_, i) => Math.fround(Math.sin(i * 1.7) * 3))
    const y = x.slice()
    applyRopeInterleaved(y, 0, 64, cos, sin, 37)
    const f = Math.fround
    for (let k = 0; k < 32; k++) {
      const c = cos[37 * 32 + k]
      const s = sin[37 * 32 + k]
      const a = x[2 * k]
      const b = x[2 * k + 1]
      expect(Object.is(y[2 * k], f(f(a * c) - f(b * s)))).toBe(true)
      expect(Object.is(y[2 * k + 1], f(f(a * s) + f(b * c)))).toBe(true)
    }
  })

  it('rotate then inverse returns each pair to within 9 units of 2^-24 * max(|a|, |b|)', () => {
    // Bound: the forward pass errs by at most 2*sqrt(2)*u*m per component (two products, one sum,
    // |c| + |s| <= sqrt 2), the inverse carries that through (x sqrt 2) and adds 3*u*m of its own,
    // and the rounded table has |c^2 + s^2 - 1| <= 2u: 4 + 3 + 2 = 9 (u = 2^-24, m = max(|a|, |b|)).
    // Measured worst over these runs is about 3 ulp of m.
    const table = ropeTable(compress, { start: 1_040_000, count: 64 })
    const finite = fc.float({ min: Math.fround(-1e18), max: Math.fround(1e18), noNaN: true })
      .filter(v => v === 0 || Math.abs(v) >= 2 ** -60)
    fc.assert(fc.property(fc.array(finite, { minLength: 64, maxLength: 64 }), fc.integer({ min: 0, max: 63 }), (values, row) => {
      const x = Float32Array.from(values)
      const y = x.slice()
      applyRopeInterleaved(y, 0, 64, table.cos, table.sin, row)
      applyRopeInterleaved(y, 0, 64, table.cos, table.sin, row, true)
      for (let k = 0; k < 32; k++) {
        const m = Math.max(Math.abs(x[2 * k]), Math.abs(x[2 * k + 1]))
        if (Math.abs(y[2 * k] - x[2 * k]) > 9 * U * m) return false
        if (Math.abs(y[2 * k + 1] - x[2 * k + 1]) > 9 * U * m) return false
      }
      return true
    }), { seed: 20261130, numRuns: 3000 })
  })

  it('refuses a slice that does not fit, a row outside the table and an odd rope dim', () => {
    const { cos, sin } = ropeTable(compress, 2)
    const x = new Float32Array(64)
    expect(() => applyRopeInterleaved(x, 1, 64, cos, sin, 0)).toThrow(NumericsError)
    expect(() => applyRopeInterleaved(x, 0, 64, cos, sin, 2)).toThrow(/row 2 is outside a table of 2 rows/)
    expect(() => applyRopeInterleaved(x, 0, 63, cos, sin, 0)).toThrow(/positive even integer/)
    expect(() => applyRopeInterleaved(x, 0, 64, cos, sin.subarray(0, 32), 0)).toThrow(/must be equal multiples/)
  })
})

describe('ropeFingerprint identifies a geometry', () => {
  it('is a sha256 hex that equal parameters reproduce', () => {
    const fp = ropeFingerprint(compress, 1048576)
    expect(fp).toMatch(/^[0-9a-f]{64}$/)
    expect(ropeFingerprint({ ...compress }, 1048576)).toBe(fp)
    expect(ropeFingerprint(parseDeepseekV4Config(deepseekV4FlashConfigJson()).rope.compress, 1048576)).toBe(fp)
  })

  it('changes with factor, theta, original window, attention factor, maxPos and the rope kind', () => {
    const fp = ropeFingerprint(compress, 1048576)
    const variants = [
      ropeFingerprint({ ...compress, factor: 32 }, 1048576),
      ropeFingerprint({ ...compress, theta: 10000 }, 1048576),
      ropeFingerprint({ ...compress, originalMaxPositionEmbeddings: 32768 }, 1048576),
      ropeFingerprint({ ...compress, attentionFactor: 0.1 * Math.log(16) + 1 }, 1048576),
      ropeFingerprint(compress, 65536),
      ropeFingerprint(main, 1048576),
    ]
    expect(new Set([fp, ...variants]).size).toBe(variants.length + 1)
  })

  it('is pinned for V4-Flash: a change here changes every stored geometry, so update it only on purpose', () => {
    expect(ropeInvFreq(compress)[31]).toBe(Math.fround(ropeInvFreq({ ...compress, originalMaxPositionEmbeddings: null })[31] / 16))
    expect(ropeFingerprint(compress, 1048576)).toBe('82fe89c6590f30f385a9696faa611626810d31de864b2a4fd22745cce31aeae3')
    expect(ropeFingerprint(main, 1048576)).toBe('436526e17595a4feac32b7f892997d33c1d583676359b288d686777b8e487cc9')
  })
})
