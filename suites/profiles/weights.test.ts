import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { CheckpointError, ConfigError, NumericsError } from '../../src/errors.ts'
import { tensorFrom, type Tensor } from '../../src/formats/safetensors/index.ts'
import { matmulF32, reference } from '../../src/kernels/index.ts'
import { expectedParameters, loadCheckpoint, makeCheckpoint, presetConfig, WeightStore } from '../../src/model/checkpoint/index.ts'
import type { DeepseekV4Config } from '../../src/model/config.ts'
import { getProfile, PROFILE_NAMES, type NumericsProfile } from '../../src/model/profiles/index.ts'
import { exactBf16Codes as bf16Codes } from '../../src/kernels/index.ts'
import { parseLinearName, prepareWeights, type PreparedWeights } from '../../src/model/weights/index.ts'
import {
  decodeBf16, dequantizeFp8BlockWeight, dequantizeMxfp4, dequantizeMxfp8, E2M1_VALUES, E4M3_VALUES, E8M0_VALUES,
  encodeBf16, quantizeFp8BlockWeight, quantizeMxfp4, quantizeMxfp8, roundBf16, ue8m0BlockScale, E4M3_AMAX_FLOOR,
  E2M1_AMAX_FLOOR, f32ToBits,
} from '../../src/numerics/index.ts'

const bitsOf = (x: Float32Array) => new Uint32Array(x.buffer, x.byteOffset, x.length)
function sameBits (a: Float32Array, b: Float32Array): boolean {
  if (a.length !== b.length) return false
  const x = bitsOf(a); const y = bitsOf(b)
  for (let i = 0; i < x.length; i++) if (x[i] !== y[i]) return false
  return true
}

let dir: string
let store: WeightStore
let cfg: DeepseekV4Config

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'pd-bridge-profiles-'))
  await makeCheckpoint({ preset: 'tiny', seed: 1, out: dir })
  const loaded = await loadCheckpoint(dir)
  store = loaded.weights
  cfg = loaded.config
})

afterAll(() => rmSync(dir, { recursive: true, force: true }))

/** Every linear name the engine can ask for: 2-D linears, the embedding as tied head, each expert. */
function linearNames (): string[] {
  const names: string[] = []
  for (const spec of expectedParameters(cfg)) {
    if (spec.role === 'linear' || spec.role === 'embedding') names.push(spec.name)
    if (spec.role === 'expert-linear') for (let e = 0; e < spec.shape[0]; e++) names.push(`${spec.name}[${e}]`)
  }
  return names
}

/** The checkpoint's float32 values of a linear name (one expert's slice for `name[e]`). */
function checkpointValues (name: string): { values: Float32Array, rows: number, cols: number } {
  const parsed = parseLinearName(name)!
  const shape = store.shape(parsed.tensor)
  const [rows, cols] = shape.slice(-2)
  const e = parsed.expert ?? 0
  return { values: decodeBf16(store.bf16(parsed.tensor).subarray(e * rows * cols, (e + 1) * rows * cols)), rows, cols }
}

/** What src/numerics makes of the same weights in `format`. */
function numericsValues (name: string, format: string): Float32Array {
  const { values, rows, cols } = checkpointValues(name)
  switch (format) {
    case 'mxfp8': return dequantizeMxfp8(quantizeMxfp8(values))
    case 'mxfp4': return dequantizeMxfp4(quantizeMxfp4(values))
    case 'fp8-block128': return dequantizeFp8BlockWeight(quantizeFp8BlockWeight(values, rows, cols, 'ue8m0'))
    default: return values
  }
}

function randomRows (m: number, k: number, seed: number): Float32Array {
  const x = new Float32Array(m * k)
  let s = seed >>> 0
  for (let i = 0; i < x.length; i++) {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0
    x[i] = roundBf16((s / 2 ** 32 - 0.5) * 4)
  }
  return x
}

describe('prepareWeights: every linear resolves under every profile', () => {
  it('has the tensor shape, the group format, and a bf16 container on the tiny checkpoint', () => {
    for (const p of PROFILE_NAMES) {
      const w = prepareWeights(store, cfg, getProfile(p))
      for (const name of linearNames()) {
        const l = w.linear(name)
        const { rows, cols } = checkpointValues(name)
        expect([l.outFeatures, l.inFeatures], name).toEqual([rows, cols])
        expect(l.format, `${p} ${name}`).toBe(getProfile(p).weights[l.group])
        expect(l.container, `${p} ${name}`).toBe('bf16')
        expect(w.linear(name)).toBe(l)
      }
    }
  })

  it('puts names into the documented groups', () => {
    const group = (n: string) => parseLinearName(n)?.group
    expect(group('model.layers.1.self_attn.q_b_proj.weight')).toBe('attention')
    expect(group('model.layers.1.self_attn.compressor.kv_proj.weight')).toBe('compressor')
    expect(group('model.layers.1.self_attn.compressor.indexer.gate_proj.weight')).toBe('compressor')
    expect(group('model.layers.1.self_attn.compressor.indexer.q_b_proj.weight')).toBe('indexerQ')
    expect(group('model.layers.1.self_attn.compressor.indexer.scorer.weights_proj.weight')).toBe('indexerQ')
    expect(group('model.layers.0.mlp.gate.weight')).toBe('router')
    expect(group('model.layers.0.mlp.experts.down_proj[7]')).toBe('experts')
    expect(group('model.layers.0.mlp.shared_experts.up_proj.weight')).toBe('sharedExperts')
    expect(group('lm_head.weight')).toBe('lmHead')
    expect(group('model.embed_tokens.weight')).toBe('lmHead')
    expect(group('model.layers.0.self_attn.q_a_norm.weight')).toBeUndefined()
    expect(group('model.layers.0.mlp.experts.down_proj[01]')).toBeUndefined()
  })
})

describe('prepareWeights f32: the widened checkpoint bits', () => {
  it('holds every linear, vector and embedding row at its exact checkpoint value', () => {
    const w = prepareWeights(store, cfg, getProfile('f32'))
    for (const name of linearNames()) {
      if (!sameBits(w.linear(name).values(), checkpointValues(name).values)) throw new Error(`f32 ${name} differs`)
    }
    for (const spec of expectedParameters(cfg)) {
      if (spec.dtype === 'F32') expect(sameBits(w.vector(spec.name), store.f32(spec.name)), spec.name).toBe(true)
    }
    const emb = decodeBf16(store.bf16('model.embed_tokens.weight'))
    const row = new Float32Array(cfg.hiddenSize)
    for (const t of [0, 1, 77, cfg.vocabSize - 1]) {
      expect(sameBits(w.embedding(t, row), emb.subarray(t * cfg.hiddenSize, (t + 1) * cfg.hiddenSize))).toBe(true)
    }
  })
})

describe('prepareWeights hf-bf16: every parameter bf16', () => {
  it('keeps bf16 linears as they are and rounds F32 vectors to bf16', () => {
    const w = prepareWeights(store, cfg, getProfile('hf-bf16'))
    for (const name of linearNames()) expect(sameBits(w.linear(name).values(), checkpointValues(name).values), name).toBe(true)
    let changed = 0
    for (const spec of expectedParameters(cfg).filter((s) => s.dtype === 'F32')) {
      const raw = store.f32(spec.name)
      const v = w.vector(spec.name)
      expect(sameBits(v, raw.map(roundBf16)), spec.name).toBe(true)
      if (!sameBits(v, raw)) changed++
    }
    // The hc parameters, sinks and biases hold non-bf16 values, so the rounding is visible.
    expect(changed).toBeGreaterThan(10)
  })
})

describe('prepareWeights decoder and prefill: src/numerics quantise -> dequantise of the same weights', () => {
  for (const p of ['decoder', 'prefill'] as const) {
    it(`${p}: every linear equals numerics' round trip of its checkpoint values`, () => {
      const profile = getProfile(p)
      const w = prepareWeights(store, cfg, profile)
      const touched = new Set<string>()
      for (const name of linearNames()) {
        const l = w.linear(name)
        const want = numericsValues(name, l.format)
        if (!sameBits(l.values(), want)) throw new Error(`${p} ${name} (${l.format}) differs from src/numerics`)
        if (!sameBits(want, checkpointValues(name).values)) touched.add(l.format)
      }
      // The quantised formats really changed values; the bf16 groups did not.
      expect([...touched].sort()).toEqual(p === 'decoder' ? ['mxfp4', 'mxfp8'] : ['fp8-block128'])
    })
  }
})

describe('Linear.apply: matmulF32 on the dequantised weights, bit for bit', () => {
  it('matches the native and reference matmulF32 in the profile order, for m = 1 and m = 5', () => {
    const names = [
      'model.layers.1.self_attn.q_a_proj.weight', 'model.layers.1.self_attn.o_b_proj.weight',
      'model.layers.1.self_attn.compressor.indexer.kv_proj.weight', 'model.layers.2.mlp.gate.weight',
      'model.layers.2.mlp.experts.gate_up_proj[3]', 'model.layers.2.mlp.experts.down_proj[7]',
      'model.layers.3.mlp.shared_experts.down_proj.weight', 'lm_head.weight',
    ]
    for (const p of PROFILE_NAMES) {
      const order = { order: getProfile(p).matmulOrder }
      const w = prepareWeights(store, cfg, getProfile(p))
      for (const name of names) {
        const l = w.linear(name)
        for (const m of [1, 5]) {
          const x = randomRows(m, l.inFeatures, m * 31 + name.length)
          const got = l.apply(x, m)
          const dq = l.values()
          expect(sameBits(got, matmulF32(x, m, l.inFeatures, dq, l.outFeatures, undefined, order)), `${p} ${name}`).toBe(true)
          expect(sameBits(got, reference.matmulF32(x, m, l.inFeatures, dq, l.outFeatures, undefined, order)), `${p} ${name}`).toBe(true)
          const out = new Float32Array(m * l.outFeatures)
          expect(l.apply(x, m, out)).toBe(out)
          expect(sameBits(out, got)).toBe(true)
        }
      }
    }
  })

  it('a profile in the sequential-fma order multiplies through W packed once, with the bits of the unpacked order', () => {
    const profile = { ...getProfile('decoder'), name: 'decoder-seq', matmulOrder: 'sequential-fma' } as const
    const w = prepareWeights(store, cfg, profile)
    const order = { order: 'sequential-fma' } as const
    for (const name of ['model.layers.1.self_attn.q_a_proj.weight', 'model.layers.1.self_attn.o_a_proj.weight', 'lm_head.weight']) {
      const l = w.linear(name)
      for (const m of [1, 7]) {
        const x = randomRows(m, l.inFeatures, m * 17 + name.length)
        expect(sameBits(l.apply(x, m), reference.matmulF32(x, m, l.inFeatures, l.values(), l.outFeatures, undefined, order)), `${name} m=${m}`).toBe(true)
      }
      // Row blocks on a strip boundary take the packed path, others the unpacked one: same bits.
      for (const [first, count] of [[16, 16], [0, 20], [3, 9]]) {
        const b = l.rowBlock(first, count)
        const x = randomRows(2, l.inFeatures, first + count)
        const dq = l.values().subarray(first * l.inFeatures, (first + count) * l.inFeatures)
        expect(sameBits(b.apply(x, 2), matmulF32(x, 2, l.inFeatures, dq, count, undefined, order)), `${name} rows ${first}+${count}`).toBe(true)
      }
    }
  })

  it('prefill really sums in blocks of 128 (k = 256 gives other bits than lanes8)', () => {
    const l = prepareWeights(store, cfg, getProfile('prefill')).linear('model.layers.1.self_attn.q_a_proj.weight')
    expect(l.inFeatures).toBeGreaterThan(128)
    const x = randomRows(4, l.inFeatures, 5)
    const lanes8 = matmulF32(x, 4, l.inFeatures, l.values(), l.outFeatures)
    expect(sameBits(l.apply(x, 4), lanes8)).toBe(false)
  })
})

describe('the bf16 container holds MX and ue8m0-fp8 values exactly', () => {
  // A nonzero finite float32 is a bf16 value iff its low 16 bits are zero.
  const isBf16 = (v: number) => (f32ToBits(v) & 0xffff) === 0

  it('e4m3 code x scale is bf16-exact for every scale code >= 3, and not always below', () => {
    for (let s = 0; s < 255; s++) {
      let exact = true
      for (let c = 0; c < 256; c++) {
        const v = Math.fround(E4M3_VALUES[c] * E8M0_VALUES[s])
        if (v === v && !isBf16(v)) exact = false
      }
      expect(exact, `scale code ${s}`).toBe(s >= 3)
    }
  })

  it('e2m1 code x scale is bf16-exact for every code and scale code', () => {
    for (let s = 0; s < 255; s++) {
      for (let c = 0; c < 16; c++) expect(isBf16(Math.fround(E2M1_VALUES[c] * E8M0_VALUES[s]))).toBe(true)
    }
  })

  it('the quantisers never pick a scale code below 105 (fp8) or 1 (fp4)', () => {
    expect(ue8m0BlockScale(0, 448, E4M3_AMAX_FLOOR)).toBe(105)
    expect(ue8m0BlockScale(2 ** -149, 448, E4M3_AMAX_FLOOR)).toBe(105)
    expect(ue8m0BlockScale(0, 6, E2M1_AMAX_FLOOR)).toBe(1)
    expect(ue8m0BlockScale(2 ** -149, 6, E2M1_AMAX_FLOOR)).toBe(1)
  })

  it('bf16Codes gives codes for exact values (NaN of either sign) and null for one inexact value', () => {
    const exact = new Float32Array([1.5, -0, 2 ** -133, roundBf16(-3e38), Infinity])
    const nanBits = new Uint32Array([0x7fc00000, 0xffc00001])
    const withNan = new Float32Array([...exact, ...new Float32Array(nanBits.buffer)])
    const codes = bf16Codes(withNan)!
    expect([...codes.subarray(0, 5)]).toEqual([...encodeBf16(exact)])
    expect([...codes.subarray(5)]).toEqual([0x7fc0, 0xffc0])
    expect(bf16Codes(new Float32Array([1, 2 ** -136]))).toBeNull()
    expect(bf16Codes(new Float32Array([1, Math.fround(1.1)]))).toBeNull()
  })
})

describe('prepareWeights on F32 linear weights (the fallback container)', () => {
  // A store where one attention weight is F32 with values bf16 cannot hold.
  function storeWithF32Linear (): { store: WeightStore, name: string, values: Float32Array } {
    const tiny = presetConfig('tiny')
    const name = 'model.layers.0.self_attn.q_a_proj.weight'
    const values = new Float32Array(tiny.qLoraRank * tiny.hiddenSize).map((_, i) => Math.fround(Math.sin(i) / 7))
    return { store: new WeightStore(new Map<string, Tensor>([[name, tensorFrom('F32', [tiny.qLoraRank, tiny.hiddenSize], values)]])), name, values }
  }

  it('f32 keeps a float32 container with the exact values; hf-bf16 rounds to nearest even', () => {
    const { store: s, name, values } = storeWithF32Linear()
    const f32 = prepareWeights(s, presetConfig('tiny'), getProfile('f32')).linear(name)
    expect(f32.container).toBe('f32')
    expect(sameBits(f32.values(), values)).toBe(true)
    const x = randomRows(2, f32.inFeatures, 9)
    expect(sameBits(f32.apply(x, 2), matmulF32(x, 2, f32.inFeatures, values, f32.outFeatures))).toBe(true)
    const hf = prepareWeights(s, presetConfig('tiny'), getProfile('hf-bf16')).linear(name)
    expect(hf.container).toBe('bf16')
    expect(sameBits(hf.values(), values.map(roundBf16))).toBe(true)
  })

  it('quantised formats start from the float32 values, not a bf16 rounding of them', () => {
    const { store: s, name, values } = storeWithF32Linear()
    const l = prepareWeights(s, presetConfig('tiny'), getProfile('decoder')).linear(name)
    expect(sameBits(l.values(), dequantizeMxfp8(quantizeMxfp8(values)))).toBe(true)
  })
})

describe('prepareWeights: vectors, tid2eid and the embedding', () => {
  it('vector() is a float32 copy, not a view of the checkpoint', () => {
    const w = prepareWeights(store, cfg, getProfile('f32'))
    const v = w.vector('model.layers.0.self_attn.sinks')
    expect(v.buffer).not.toBe(store.f32('model.layers.0.self_attn.sinks').buffer)
    expect(w.vector('model.layers.0.self_attn.sinks')).toBe(v)
  })

  it('tid2eid is the checkpoint table as Int32Array', () => {
    const w = prepareWeights(store, cfg, getProfile('decoder'))
    const t = w.tid2eid(0)
    expect([...t]).toEqual([...store.i64('model.layers.0.mlp.gate.tid2eid')].map(Number))
    expect(t.length).toBe(cfg.vocabSize * cfg.numExpertsPerTok)
  })

  it('embedding rows come from the embedding group format (bf16 in every quantised profile)', () => {
    for (const p of ['decoder', 'prefill'] as const) {
      const w = prepareWeights(store, cfg, getProfile(p))
      const head = w.linear('model.embed_tokens.weight').values()
      const row = w.embedding(5, new Float32Array(cfg.hiddenSize))
      expect(sameBits(row, head.subarray(5 * cfg.hiddenSize, 6 * cfg.hiddenSize))).toBe(true)
    }
  })

  it('an mxfp8 embedding gives the dequantised row', () => {
    const custom: NumericsProfile = { ...getProfile('decoder'), name: 'mx-embedding', weights: { ...getProfile('decoder').weights, embedding: 'mxfp8' } }
    const w = prepareWeights(store, cfg, custom)
    const want = dequantizeMxfp8(quantizeMxfp8(decodeBf16(store.bf16('model.embed_tokens.weight'))))
    const row = w.embedding(cfg.vocabSize - 1, new Float32Array(cfg.hiddenSize))
    expect(sameBits(row, want.subarray((cfg.vocabSize - 1) * cfg.hiddenSize))).toBe(true)
  })
})

describe('prepareWeights: bad names and arguments give clear errors', () => {
  let w: PreparedWeights
  beforeAll(() => { w = prepareWeights(store, cfg, getProfile('decoder')) })

  function errorOf (f: () => unknown): Error {
    try { f() } catch (e) { return e as Error }
    throw new Error('expected an error')
  }

  it('names the tensor and the problem for linear()', () => {
    const cases: Array<[string, RegExp]> = [
      ['model.layers.0.self_attn.q_a_norm.weight', /q_a_norm.weight: is not a linear weight of DeepSeek-V4 \(use vector\(\)/],
      ['model.layers.9.self_attn.q_a_proj.weight', /model.layers.9.self_attn.q_a_proj.weight: not in this checkpoint/],
      ['nonsense', /tensor nonsense: is not a linear weight of DeepSeek-V4 and not in this checkpoint/],
      ['model.layers.0.mlp.experts.down_proj', /is a 3-D expert tensor: address one expert as name\[e\]/],
      ['model.layers.0.mlp.experts.down_proj[8]', /expert 8 is out of range: the tensor holds 8 experts/],
      ['model.layers.0.self_attn.compressor.kv_proj.weight', /not in this checkpoint/],
    ]
    for (const [name, message] of cases) {
      const err = errorOf(() => w.linear(name))
      expect(err, name).toBeInstanceOf(CheckpointError)
      expect(err.message, name).toMatch(message)
      expect(err.message).toContain(dir)
    }
  })

  it('refuses linears and the embedding in vector(), and unknown vectors', () => {
    expect(errorOf(() => w.vector('model.layers.0.mlp.gate.weight')).message).toMatch(/is a linear weight \(group router\): use linear\(\)/)
    expect(errorOf(() => w.vector('model.layers.0.mlp.experts.gate_up_proj')).message).toMatch(/group experts/)
    expect(errorOf(() => w.vector('model.embed_tokens.weight')).message).toMatch(/is the embedding: use embedding/)
    expect(errorOf(() => w.vector('model.layers.0.mlp.gate.tid2eid')).message).toMatch(/expected an F32 or BF16 tensor/)
    expect(errorOf(() => w.vector('model.nope'))).toBeInstanceOf(CheckpointError)
  })

  it('refuses tid2eid for moe layers and layers that do not exist', () => {
    expect(errorOf(() => w.tid2eid(1)).message).toMatch(/layer 1 is a moe layer: only hash_moe layers/)
    expect(errorOf(() => w.tid2eid(4)).message).toMatch(/layer 4 is not a layer index in \[0, 4\)/)
    expect(errorOf(() => w.tid2eid(-1))).toBeInstanceOf(CheckpointError)
    expect(errorOf(() => w.tid2eid(0.5))).toBeInstanceOf(CheckpointError)
  })

  it('refuses bad token ids and output buffers in embedding()', () => {
    const row = new Float32Array(cfg.hiddenSize)
    expect(errorOf(() => w.embedding(cfg.vocabSize, row)).message).toMatch(/token id 512 is outside the vocabulary \[0, 512\)/)
    expect(errorOf(() => w.embedding(-1, row))).toBeInstanceOf(CheckpointError)
    expect(errorOf(() => w.embedding(1.5, row))).toBeInstanceOf(CheckpointError)
    expect(errorOf(() => w.embedding(1, new Float32Array(3)))).toBeInstanceOf(NumericsError)
    expect(errorOf(() => w.embedding(1, [] as unknown as Float32Array)).message).toMatch(/out must be a Float32Array of hidden_size = 256 values/)
  })

  it('refuses an MX format on an input dim that is not a multiple of 32', () => {
    const tiny = presetConfig('tiny')
    const name = 'model.layers.0.self_attn.q_a_proj.weight'
    const s = new WeightStore(new Map<string, Tensor>([[name, tensorFrom('BF16', [4, 48], new Uint16Array(192))]]))
    const err = errorOf(() => prepareWeights(s, tiny, getProfile('decoder')).linear(name))
    expect(err).toBeInstanceOf(CheckpointError)
    expect(err.message).toMatch(/mxfp8 needs the input dim to be a multiple of 32, but it is 48/)
    // fp8 128x128 tiles take any shape (partial edge tiles).
    expect(prepareWeights(s, tiny, getProfile('prefill')).linear(name).inFeatures).toBe(48)
  })

  it('refuses a weight of the wrong rank or dtype', () => {
    const tiny = presetConfig('tiny')
    const name = 'model.layers.0.self_attn.q_a_proj.weight'
    const oneD = new WeightStore(new Map<string, Tensor>([[name, tensorFrom('BF16', [8], new Uint16Array(8))]]))
    expect(errorOf(() => prepareWeights(oneD, tiny, getProfile('f32')).linear(name)).message).toMatch(/expected a 2-D weight, found shape \[8\]/)
    const ints = new WeightStore(new Map<string, Tensor>([[name, tensorFrom('I64', [2, 2], new BigInt64Array(4))]]))
    expect(errorOf(() => prepareWeights(ints, tiny, getProfile('f32')).linear(name)).message).toMatch(/expected a BF16 or F32 weight, found I64/)
  })

  it('refuses a profile with an unknown format or order (ConfigError)', () => {
    const bad = { ...getProfile('f32'), weights: { ...getProfile('f32').weights, experts: 'int4' } } as unknown as NumericsProfile
    const err = errorOf(() => prepareWeights(store, cfg, bad))
    expect(err).toBeInstanceOf(ConfigError)
    expect(err.message).toMatch(/profile f32: weights.experts: unknown weight format "int4"/)
    const order = { ...getProfile('f32'), matmulOrder: 'pairs' } as unknown as NumericsProfile
    expect(errorOf(() => prepareWeights(store, cfg, order))).toBeInstanceOf(ConfigError)
  })
})
