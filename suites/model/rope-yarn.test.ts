// YaRN frequency tables: the correction range, the ramp, and which tables must (not) agree.
import { describe, expect, it } from 'vitest'
import { f32ToBits } from '../../src/numerics/bits.ts'
import { deepseekV4FlashConfigJson, parseDeepseekV4Config } from '../../src/model/config.ts'
import type { RopeParams } from '../../src/model/config.ts'
import { ropeInvFreq, ropeTable, yarnCorrectionRange } from '../../src/model/rope.ts'

const flash = parseDeepseekV4Config(deepseekV4FlashConfigJson())
const flashCompress = flash.rope.compress
const plainOf = (p: RopeParams): RopeParams => ({ ...p, ropeType: 'default', factor: 1, originalMaxPositionEmbeddings: null, attentionFactor: 1 })
const U = 2 ** -24 // fp32 unit roundoff

// Bits of a Float32Array, for exact comparisons.
const bits = (a: Float32Array) => new Uint32Array(a.buffer, a.byteOffset, a.length)

describe('plain inverse frequencies are 1 / theta^(2k/dim) to within fp32 rounding', () => {
  it('agrees with the double-precision value to 2 units of 2^-24 relative, for theta 10000 and 160000', () => {
    // Two fp32 roundings (theta^x, then its reciprocal; the exponent 2k/64 is exact) each add at
    // most 2^-24 relative error, so 2 units bound it (plus a negligible second-order term).
    for (const theta of [10000, 160000]) {
      const inv = ropeInvFreq({ ...plainOf(flashCompress), theta })
      expect(inv).toHaveLength(32)
      for (let k = 0; k < 32; k++) {
        const exact = theta ** (-(2 * k) / 64)
        expect(Math.abs(inv[k] / exact - 1), `theta ${theta} k ${k}`).toBeLessThanOrEqual(2 * U * (1 + 1e-6))
      }
      expect(inv[0]).toBe(1)
    }
  })
})

describe('V4-Flash compress rope: theta 160000, L 65536, beta 32/1, dim 64', () => {
  it('has correction range low 15, high 25', () => {
    expect(yarnCorrectionRange(flashCompress)).toEqual({ low: 15, high: 25 })
  })

  it('leaves pairs 0..15 unchanged and divides pairs 25..31 by 16, bit for bit', () => {
    const plain = ropeInvFreq(plainOf(flashCompress))
    const yarn = ropeInvFreq(flashCompress)
    for (let k = 0; k <= 15; k++) expect(Object.is(yarn[k], plain[k]), `k ${k}`).toBe(true)
    // 16 is a power of two: f / 16 is exact, and the blend with weight 0 adds an exact zero.
    for (let k = 25; k <= 31; k++) expect(Object.is(yarn[k], plain[k] / 16), `k ${k}`).toBe(true)
  })

  it('blends pairs 16..24 by 1 - (15/16)(k - 15)/10: k=16 x0.90625, k=20 x0.53125, k=24 x0.15625', () => {
    const plain = ropeInvFreq(plainOf(flashCompress))
    const yarn = ropeInvFreq(flashCompress)
    expect(1 - (15 / 16) * (16 - 15) / 10).toBe(0.90625)
    expect(1 - (15 / 16) * (20 - 15) / 10).toBe(0.53125)
    expect(1 - (15 / 16) * (24 - 15) / 10).toBe(0.15625)
    for (let k = 16; k <= 24; k++) {
      const multiplier = 1 - (15 / 16) * (k - 15) / 10
      // Within fp32 rounding: the ramp, smooth, 1 - smooth, two products and the sum each round
      // once; measured worst is about 2 units of 2^-24 relative, the bound asserted is 4.
      const relative = Math.abs(yarn[k] / plain[k] / multiplier - 1)
      expect(relative, `k ${k}`).toBeLessThanOrEqual(4 * U)
      expect(yarn[k]).not.toBe(plain[k])
    }
  })

  it('uses the DeepSeek reference formula (f / factor), which equals transformers 1 / (factor * base^x) bit for bit for power-of-two factors', () => {
    // transformers: inv = interp * (1 - smooth) + extrap * smooth with interp = 1 / (factor * base^x),
    // smooth = 1 - ramp, every tensor op in fp32. Checked over several geometries, not just V4-Flash's.
    const f = Math.fround
    for (const theta of [10000, 160000, 1e6]) {
      for (const L of [1024, 4096, 8192, 65536]) {
        for (const factor of [4, 16, 32]) {
          const p = { ...flashCompress, theta, originalMaxPositionEmbeddings: L, factor }
          const yarn = ropeInvFreq(p)
          const { low, high } = yarnCorrectionRange(p)!
          for (let k = 0; k < 32; k++) {
            const base = f(Math.pow(f(theta), f(2 * k / 64)))
            const extrap = f(1 / base)
            const interp = f(1 / f(factor * base))
            const ramp = Math.min(1, Math.max(0, f(f(k - low) / f(high - low))))
            const smooth = f(1 - ramp)
            const hf = f(f(interp * f(1 - smooth)) + f(extrap * smooth))
            expect(f32ToBits(yarn[k]), `theta ${theta} L ${L} factor ${factor} k ${k}`).toBe(f32ToBits(hf))
          }
        }
      }
    }
  })
})

describe('for a factor that is not a power of two the table follows the DeepSeek reference', () => {
  it('computes (f / factor), which is not always transformers 1 / (factor * base^x)', () => {
    const f = Math.fround
    let differsFromHf = 0
    for (const factor of [3, 10, 40]) {
      const p = { ...flashCompress, factor }
      const yarn = ropeInvFreq(p)
      const { low, high } = yarnCorrectionRange(p)!
      for (let k = 0; k < 32; k++) {
        const base = f(Math.pow(f(160000), f(2 * k / 64)))
        const extrap = f(1 / base)
        const ramp = Math.min(1, Math.max(0, f(f(k - low) / f(high - low))))
        const smooth = f(1 - ramp)
        const blend = (interp: number) => f(f(interp * f(1 - smooth)) + f(extrap * smooth))
        expect(f32ToBits(yarn[k]), `factor ${factor} k ${k}`).toBe(f32ToBits(blend(f(extrap / factor))))
        if (!Object.is(yarn[k], blend(f(1 / f(factor * base))))) differsFromHf++
      }
    }
    // The two formulas part by an ulp on some pairs: an engine built on transformers' formula with
    // such a factor would not share this table bit for bit.
    expect(differsFromHf).toBeGreaterThan(0)
  })
})

describe('a small original window (L = 1024) moves the ramp', () => {
  it('has low 4, high 14, derived by hand', () => {
    // cd(beta) = 64 * ln(1024 / (beta * 2 pi)) / (2 * ln 160000), ln 160000 = 11.98293:
    //   cd(32) = 64 * ln(5.09296) / 23.96586 = 64 * 1.62786 / 23.96586 = 4.347  -> floor 4
    //   cd(1)  = 64 * ln(162.975) / 23.96586 = 64 * 5.09360 / 23.96586 = 13.602 -> ceil 14
    // So pairs 0..4 keep f, pairs 14..31 get f / 16, pairs 5..13 blend with ramp (k - 4) / 10.
    const p = { ...flashCompress, originalMaxPositionEmbeddings: 1024 }
    expect(yarnCorrectionRange(p)).toEqual({ low: 4, high: 14 })
    const plain = ropeInvFreq(plainOf(p))
    const yarn = ropeInvFreq(p)
    for (let k = 0; k <= 4; k++) expect(Object.is(yarn[k], plain[k]), `k ${k}`).toBe(true)
    for (let k = 14; k <= 31; k++) expect(Object.is(yarn[k], plain[k] / 16), `k ${k}`).toBe(true)
    for (let k = 5; k <= 13; k++) {
      const multiplier = 1 - (15 / 16) * (k - 4) / 10
      expect(Math.abs(yarn[k] / plain[k] / multiplier - 1), `k ${k}`).toBeLessThanOrEqual(4 * U)
    }
  })

  it('without truncation uses the fractional range', () => {
    const p = { ...flashCompress, originalMaxPositionEmbeddings: 1024, truncate: false }
    const range = yarnCorrectionRange(p)!
    expect(range.low).toBeCloseTo(4.3471, 4)
    expect(range.high).toBeCloseTo(13.6023, 4)
    expect(bits(ropeInvFreq(p))).not.toEqual(bits(ropeInvFreq({ ...p, truncate: true })))
  })

  it('nudges high by 0.001 when low == high (L = 6 puts both at 0): pair 0 keeps f, the rest get f / 16', () => {
    // cd(1) = 64 * ln(6 / 2pi) / (2 ln 160000) = -0.123 -> ceil 0; cd(32) < 0 -> floor < 0 -> max 0.
    const p = { ...flashCompress, originalMaxPositionEmbeddings: 6 }
    const range = yarnCorrectionRange(p)!
    expect(Object.is(range.low, 0) && Object.is(range.high, 0)).toBe(true)
    const plain = ropeInvFreq(plainOf(p))
    const yarn = ropeInvFreq(p)
    expect(Object.is(yarn[0], plain[0])).toBe(true)
    for (let k = 1; k < 32; k++) expect(Object.is(yarn[k], plain[k] / 16), `k ${k}`).toBe(true)
  })
})

describe('the correction range floors low and ceils high (hand-derived for three more geometries)', () => {
  it('matches cd(beta) = 64 * ln(L / (beta * 2 pi)) / (2 ln theta), floored / ceiled', () => {
    // theta 10000 (2 ln theta = 18.42068), L 8192:  cd(32) = 64 * 3.70730 / 18.42068 = 12.880 -> 12
    //                                                cd(1)  = 64 * 7.17304 / 18.42068 = 24.922 -> 25
    // theta 10000, L 65536:                          cd(32) = 64 * 5.78674 / 18.42068 = 20.105 -> 20
    //                                                cd(1)  = 64 * 9.25248 / 18.42068 = 32.146 -> 33
    //   (high is capped at dim - 1 = 63, not at the last pair 31, so 33 stands)
    // theta 1e6 (2 ln theta = 27.63102), L 4096:     cd(32) = 64 * 3.01415 / 27.63102 = 6.981  -> 6
    //                                                cd(1)  = 64 * 6.47989 / 27.63102 = 15.009 -> 16
    const cases: Array<[number, number, number, number]> = [[10000, 8192, 12, 25], [10000, 65536, 20, 33], [1e6, 4096, 6, 16]]
    for (const [theta, L, low, high] of cases) {
      expect(yarnCorrectionRange({ ...flashCompress, theta, originalMaxPositionEmbeddings: L }), `theta ${theta} L ${L}`).toEqual({ low, high })
    }
  })
})

describe('main layers (rope_type default) have no YaRN', () => {
  it('builds the plain theta-10000 table', () => {
    const main = flash.rope.main
    expect(yarnCorrectionRange(main)).toBeNull()
    const inv = ropeInvFreq(main)
    expect(bits(inv)).toEqual(bits(ropeInvFreq({ ...flashCompress, theta: 10000, originalMaxPositionEmbeddings: null })))
    expect(inv[31]).not.toBe(ropeInvFreq(plainOf(flashCompress))[31])
  })
})

describe('YaRN is applied whenever originalMaxPositionEmbeddings is set, whatever the length', () => {
  it('the rope type label does not switch it: only originalMaxPositionEmbeddings does', () => {
    const labelledDefault = { ...flashCompress, ropeType: 'default' as const }
    expect(bits(ropeInvFreq(labelledDefault))).toEqual(bits(ropeInvFreq(flashCompress)))
  })

  it('factor 16 vs 32: different angles at every position > 0 on pairs 16..31, identical on 0..15', () => {
    const p16 = flashCompress
    const p32 = { ...flashCompress, factor: 32 }
    const inv16 = ropeInvFreq(p16)
    const inv32 = ropeInvFreq(p32)
    const f = Math.fround
    const positions: number[] = []
    for (let pos = 1; pos <= 70000; pos++) positions.push(pos)
    for (const pos of [131071, 524288, 1048575]) positions.push(pos)
    const wrong: string[] = []
    for (const pos of positions) {
      for (let k = 0; k < 32; k++) {
        const same = Object.is(f(f(pos) * inv16[k]), f(f(pos) * inv32[k]))
        if (same !== (k <= 15)) wrong.push(`pos ${pos} k ${k}`)
      }
    }
    expect(wrong.slice(0, 5)).toEqual([])
    // The tables themselves: position 0 is identical, and row 1 differs on every scaled pair.
    const t16 = ropeTable(p16, 2)
    const t32 = ropeTable(p32, 2)
    for (let k = 0; k < 32; k++) {
      expect(t16.cos[k]).toBe(t32.cos[k])
      expect(Object.is(t16.sin[32 + k], t32.sin[32 + k])).toBe(k <= 15)
    }
  })

  it('factor 1 equals plain rope bit for bit for the V4-Flash geometry', () => {
    const one = { ...flashCompress, factor: 1 }
    expect(bits(ropeInvFreq(one))).toEqual(bits(ropeInvFreq(plainOf(flashCompress))))
  })

  it('factor 1 is only within 1 ulp of plain rope in general: the fp32 blend can round a ramp pair', () => {
    // theta 10000, L 65536: low 20, high 33, so pairs 21..31 are on the ramp; pair 29 comes out
    // 1 ulp off. Exact outside the ramp.
    const p = { ...flashCompress, theta: 10000, factor: 1 }
    const { low, high } = yarnCorrectionRange(p)!
    const one = ropeInvFreq(p)
    const plain = ropeInvFreq(plainOf(p))
    let differing = 0
    for (let k = 0; k < 32; k++) {
      const ulps = Math.abs(f32ToBits(one[k]) - f32ToBits(plain[k]))
      if (k <= low || k >= high) expect(ulps, `k ${k}`).toBe(0)
      else expect(ulps, `k ${k}`).toBeLessThanOrEqual(1)
      differing += ulps
    }
    expect(differing).toBeGreaterThan(0)
  })
})

describe('the mscale trap: a hand-written nested yarn dict without attention_factor', () => {
  const nestedWith = (compress: Record<string, unknown>) => parseDeepseekV4Config({
    model_type: 'deepseek_v4',
    num_hidden_layers: 2,
    layer_types: ['sliding_attention', 'compressed_sparse_attention'],
    rope_parameters: { main: { rope_type: 'default', rope_theta: 10000, partial_rotary_factor: 0.125 }, compress },
  })
  const yarnDict = { rope_type: 'yarn', rope_theta: 160000, factor: 16, original_max_position_embeddings: 65536 }

  it('gets transformers computed 0.1 * ln(16) + 1, where the flat legacy style gets 1.0', () => {
    const trapped = nestedWith(yarnDict).rope.compress
    expect(trapped.attentionFactor).toBe(0.1 * Math.log(16) + 1)
    expect(trapped.attentionFactor).toBeCloseTo(1.2773, 4)
    expect(flashCompress.attentionFactor).toBe(1)
  })

  it('scales cos and sin by it, so the table differs from the legacy one', () => {
    const trapped = ropeTable(nestedWith(yarnDict).rope.compress, 3)
    const right = ropeTable(flashCompress, 3)
    const scale = Math.fround(0.1 * Math.log(16) + 1)
    for (let i = 0; i < right.cos.length; i++) {
      expect(Object.is(trapped.cos[i], Math.fround(right.cos[i] * scale))).toBe(true)
      expect(Object.is(trapped.sin[i], Math.fround(right.sin[i] * scale))).toBe(true)
    }
    expect(trapped.cos[0]).not.toBe(right.cos[0])
  })

  it('an explicit attention_factor, or mscale == mscale_all_dim, avoids it', () => {
    expect(nestedWith({ ...yarnDict, attention_factor: 1 }).rope.compress.attentionFactor).toBe(1)
    expect(nestedWith({ ...yarnDict, mscale: 1, mscale_all_dim: 1 }).rope.compress.attentionFactor).toBe(1)
    expect(nestedWith({ ...yarnDict, factor: 1 }).rope.compress.attentionFactor).toBe(1)
  })

  it('an explicit attention_factor in a flat dict is kept (transformers only fills a missing one)', () => {
    const cfg = parseDeepseekV4Config({ ...deepseekV4FlashConfigJson(), rope_scaling: { type: 'yarn', factor: 16, original_max_position_embeddings: 65536, attention_factor: 0.5 } })
    expect(cfg.rope.compress.attentionFactor).toBe(0.5)
  })
})
