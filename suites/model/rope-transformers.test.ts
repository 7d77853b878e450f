// External truth: what transformers 5.17 (torch 2.11, CPU) built for the same configs, recorded on
// the lent H200 machine by the probe in docs/model-config.md (fixtures/hf-rope-probe.json).
import { readFileSync } from 'node:fs'
import { describe, expect, it } from 'vitest'
import { deepseekV4FlashConfigJson, parseDeepseekV4Config, toHfConfigJson } from '../../src/model/config.ts'
import type { RopeParams } from '../../src/model/config.ts'
import { ropeInvFreq, ropeTable, yarnCorrectionRange } from '../../src/model/rope.ts'

interface ProbedRope { attentionScaling: number, invFreqBits: number[], positions: number[], cosBits: number[][], sinBits: number[][] }
interface Probed { savedJson: Record<string, unknown>, main: ProbedRope, compress: ProbedRope }
const probe = JSON.parse(readFileSync(new URL('./fixtures/hf-rope-probe.json', import.meta.url), 'utf8')) as
  { versions: string[], configs: Record<'example' | 'flash' | 'f10' | 'trap', Probed> }

const int32Bits = (a: Float32Array) => Array.from(new Int32Array(a.buffer, a.byteOffset, a.length))
const yarn = (L: number, factor = 16) => ({ type: 'yarn', factor, original_max_position_embeddings: L, beta_fast: 32, beta_slow: 1 })
const flashLegacy = () => {
  const json = deepseekV4FlashConfigJson()
  delete json.torch_dtype
  return json
}
// The inputs the probe gave transformers, in our parser.
const sources: Record<'example' | 'flash' | 'f10', Record<string, unknown>> = {
  example: { model_type: 'deepseek_v4', vocab_size: 512, hidden_size: 256, num_hidden_layers: 4, compress_ratios: [0, 4, 128, 4], rope_scaling: yarn(1024) },
  flash: flashLegacy(),
  f10: { ...flashLegacy(), rope_scaling: yarn(65536, 10) },
}

describe('the probe fixture is what it says', () => {
  it('was recorded with transformers 5.17.0', () => {
    expect(probe.versions[0]).toBe('5.17.0')
  })
})

describe('configs transformers saved parse to the config we derive from its inputs', () => {
  it('holds for the example, V4-Flash and a factor-10 variant', () => {
    for (const name of ['example', 'flash', 'f10'] as const) {
      expect(parseDeepseekV4Config(probe.configs[name].savedJson), name).toEqual(parseDeepseekV4Config(sources[name]))
    }
  })

  it('toHfConfigJson writes the keys transformers wrote for V4-Flash (bar the legacy type echo)', () => {
    const saved = structuredClone(probe.configs.flash.savedJson) as { rope_parameters: { compress: Record<string, unknown> } }
    delete saved.rope_parameters.compress.type
    expect(toHfConfigJson(parseDeepseekV4Config(sources.flash))).toEqual(saved)
  })
})

describe('inverse frequencies equal transformers bit for bit', () => {
  it('for main and compress of the example and V4-Flash', () => {
    for (const name of ['example', 'flash'] as const) {
      const cfg = parseDeepseekV4Config(sources[name])
      for (const kind of ['main', 'compress'] as const) {
        expect(int32Bits(ropeInvFreq(cfg.rope[kind])), `${name} ${kind}`).toEqual(probe.configs[name][kind].invFreqBits)
        expect(cfg.rope[kind].attentionFactor).toBe(probe.configs[name][kind].attentionScaling)
      }
    }
  })

  it('for factor 10 they part where the reference f / 10 and transformers 1 / (10 * base^x) round differently', () => {
    const p = parseDeepseekV4Config(sources.f10).rope.compress
    const ours = int32Bits(ropeInvFreq(p))
    const theirs = probe.configs.f10.compress.invFreqBits
    // Re-derive transformers' formula here; it must reproduce every one of its 32 values.
    const f = Math.fround
    const { low, high } = yarnCorrectionRange(p)!
    const hf = new Float32Array(32)
    for (let k = 0; k < 32; k++) {
      const base = f(Math.pow(f(160000), f(2 * k / 64)))
      const ramp = Math.min(1, Math.max(0, f(f(k - low) / f(high - low))))
      const smooth = f(1 - ramp)
      hf[k] = f(f(f(1 / f(10 * base)) * f(1 - smooth)) + f(f(1 / base) * smooth))
    }
    expect(int32Bits(hf)).toEqual(theirs)
    const differing = ours.map((bits, k) => bits !== theirs[k] ? k : -1).filter(k => k >= 0)
    expect(differing.length).toBeGreaterThan(0)
    for (const k of differing) expect(k).toBeGreaterThanOrEqual(16) // only ramp/scaled pairs involve the factor
    expect(int32Bits(ropeInvFreq(parseDeepseekV4Config(sources.f10).rope.main))).toEqual(probe.configs.f10.main.invFreqBits)
  })
})

describe('cos/sin agree with torch to within 1 ulp', () => {
  it('at positions 0 .. 1048575 for the example and V4-Flash', () => {
    // Same fp32 angles (the frequencies are bit-equal and the angle is one fp32 product), but torch
    // evaluates cosf/sinf with its own vectorised CPU code and we use V8's fdlibm in double, rounded
    // once: the two round differently on about 5% of entries, never by more than 1 ulp.
    let differing = 0
    for (const name of ['example', 'flash'] as const) {
      const cfg = parseDeepseekV4Config(sources[name])
      for (const kind of ['main', 'compress'] as const) {
        const probed = probe.configs[name][kind]
        probed.positions.forEach((pos, row) => {
          const t = ropeTable(cfg.rope[kind], { start: pos, count: 1 })
          const cos = int32Bits(t.cos)
          const sin = int32Bits(t.sin)
          for (let k = 0; k < 32; k++) {
            expect(Math.abs(cos[k] - probed.cosBits[row][k]), `${name} ${kind} pos ${pos} k ${k}`).toBeLessThanOrEqual(1)
            expect(Math.abs(sin[k] - probed.sinBits[row][k]), `${name} ${kind} pos ${pos} k ${k}`).toBeLessThanOrEqual(1)
            differing += Number(cos[k] !== probed.cosBits[row][k]) + Number(sin[k] !== probed.sinBits[row][k])
          }
        })
      }
    }
    expect(differing).toBeGreaterThan(0)
  })
})

describe('transformers traps, as observed', () => {
  const trap = probe.configs.trap

  it('mscale trap: a nested yarn dict without attention_factor scales cos/sin by 0.1 ln 16 + 1', () => {
    const cfg = parseDeepseekV4Config({ ...trap.savedJson })
    expect(trap.compress.attentionScaling).toBe(cfg.rope.compress.attentionFactor)
    expect(cfg.rope.compress.attentionFactor).toBe(0.1 * Math.log(16) + 1)
    expect(int32Bits(ropeInvFreq(cfg.rope.compress))).toEqual(trap.compress.invFreqBits)
    const t = ropeTable(cfg.rope.compress, { start: 1000, count: 1 })
    const row = trap.compress.positions.indexOf(1000)
    for (let k = 0; k < 32; k++) expect(Math.abs(int32Bits(t.cos)[k] - trap.compress.cosBits[row][k])).toBeLessThanOrEqual(2)
  })

  it('partial_rotary_factor trap: the main table was built over 512 dims, though the saved file says 0.125', () => {
    expect(trap.main.invFreqBits).toHaveLength(256)
    const saved = trap.savedJson as { rope_parameters: { main: Record<string, unknown> } }
    expect(saved.rope_parameters.main.partial_rotary_factor).toBe(0.125)
    // What transformers computed is plain rope over dim 512 (theta^(-2k/512)). It equals ours except
    // at k = 222, where 10000^0.8671875 = 2942.7271762 lies 3.4e-6 above the midpoint of two fp32
    // values: we round the double pow correctly, torch's fp32 pow lands one ulp low.
    const full: RopeParams = { ...parseDeepseekV4Config(trap.savedJson).rope.main, ropeDim: 512, partialRotaryFactor: 1 }
    const ours = int32Bits(ropeInvFreq(full))
    const differing = ours.map((bits, k) => [k, bits - trap.main.invFreqBits[k]]).filter(([, d]) => d !== 0)
    expect(differing).toEqual([[222, -1]])
  })
})
