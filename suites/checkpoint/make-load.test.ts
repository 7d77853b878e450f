// make-checkpoint -> loadCheckpoint: every parameter comes back with its shape, dtype and exact bits;
// files are deterministic; the values are non-trivial where transformers' init would leave them trivial.
import { describe, it, expect, beforeAll, afterAll } from 'vitest'
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import {
  expectedParameters, initialValues, loadCheckpoint, makeCheckpoint, presetConfig, type LoadedCheckpoint, type ParamSpec,
} from '../../src/model/checkpoint/index.ts'
import { bytesOf, hashFiles, removeDir, tempDir } from './helpers.ts'

const cfg = presetConfig('tiny')
const specs = expectedParameters(cfg)
const dirs: string[] = []
let single: string
let loaded: LoadedCheckpoint

beforeAll(async () => {
  single = tempDir('tiny-seed1')
  dirs.push(single)
  await makeCheckpoint({ preset: 'tiny', seed: 1, out: single })
  loaded = await loadCheckpoint(single)
})

afterAll(() => dirs.forEach(removeDir))

const withRole = (...roles: ParamSpec['role'][]) => specs.filter((s) => roles.includes(s.role))

describe('a made checkpoint loads with every expected parameter intact', () => {
  it('holds exactly the expected tensors, each with its shape and dtype', () => {
    expect(loaded.weights.names().sort()).toEqual(specs.map((s) => s.name).sort())
    for (const s of specs) {
      expect(loaded.weights.shape(s.name), s.name).toEqual(s.shape)
      expect(loaded.weights.get(s.name).dtype, s.name).toBe(s.dtype)
    }
  })

  it('holds bit for bit the values initialValues gives for seed 1', () => {
    for (const s of specs) {
      const want = bytesOf(initialValues(s, 1))
      const got = loaded.weights.get(s.name).data
      expect(Buffer.compare(Buffer.from(got), Buffer.from(want)), s.name).toBe(0)
    }
  })

  it('reads the config and tokenizer back', () => {
    expect(loaded.config).toEqual(cfg)
    expect(loaded.tokenizer?.vocabSize).toBe(512)
    expect(loaded.tokenizer?.decode(loaded.tokenizer.encode('round trip'))).toBe('round trip')
  })

  it('writes float-typed config fields as floats (transformers validates them strictly)', () => {
    const text = readFileSync(join(single, 'config.json'), 'utf8')
    expect(text).toContain('"swiglu_limit": 10.0')
    expect(text).toContain('"attention_dropout": 0.0')
    expect(text).toContain('"router_jitter_noise": 0.0')
    expect(text).toContain('"attention_factor": 1.0')
    const json = JSON.parse(text)
    expect(json.architectures).toEqual(['DeepseekV4ForCausalLM'])
    expect([json.dtype, json.torch_dtype]).toEqual(['bfloat16', 'bfloat16'])
    expect(JSON.parse(readFileSync(join(single, 'generation_config.json'), 'utf8'))).toMatchObject({ bos_token_id: 0, eos_token_id: 1, pad_token_id: 4 })
  })

  it('tags the safetensors file with {"format": "pt"}', () => {
    const bytes = readFileSync(join(single, 'model.safetensors'))
    const headerLength = Number(bytes.readBigUInt64LE(0))
    const header = JSON.parse(bytes.subarray(8, 8 + headerLength).toString('utf8'))
    expect(header.__metadata__).toEqual({ format: 'pt' })
  })
})

describe('typed accessors', () => {
  it('decode BF16 to float32 and view F32 and I64 directly', () => {
    const w = loaded.weights
    const codes = w.bf16('lm_head.weight')
    const values = w.f32('lm_head.weight')
    expect(values[5]).toBe(new Float32Array(new Uint32Array([codes[5] << 16]).buffer)[0])
    expect(w.f32('model.norm.weight').length).toBe(256)
    expect(w.i64('model.layers.0.mlp.gate.tid2eid').length).toBe(1024)
  })

  it('refuse the wrong dtype and unknown names with a CheckpointError naming the tensor', () => {
    const w = loaded.weights
    expect(() => w.bf16('model.norm.weight')).toThrow(/model\.norm\.weight: expected a BF16 tensor, found F32/)
    expect(() => w.i64('lm_head.weight')).toThrow(/lm_head\.weight: expected an I64 tensor/)
    expect(() => w.f32('model.layers.0.mlp.gate.tid2eid')).toThrow(/expected an F32 or BF16 tensor/)
    expect(() => w.get('nope')).toThrow(/tensor nope: not in this checkpoint/)
  })
})

describe('same preset and seed give byte-identical files; another seed does not', () => {
  it('hashes every file identically across two makes, and differently for seed 2 (weights only)', async () => {
    const again = tempDir('tiny-seed1b')
    const other = tempDir('tiny-seed2')
    dirs.push(again, other)
    await makeCheckpoint({ preset: 'tiny', seed: 1, out: again })
    await makeCheckpoint({ preset: 'tiny', seed: 2, out: other })
    const a = hashFiles(single)
    expect(Object.keys(a)).toEqual(['config.json', 'generation_config.json', 'model.safetensors', 'special_tokens_map.json', 'tokenizer.json', 'tokenizer_config.json'])
    expect(hashFiles(again)).toEqual(a)
    const b = hashFiles(other)
    expect(b['model.safetensors']).not.toBe(a['model.safetensors'])
    for (const f of Object.keys(a).filter((f) => f !== 'model.safetensors')) expect(b[f], f).toBe(a[f])
  })
})

describe('a sharded make loads to the same weights as the single file', () => {
  it('splits into shards + index and every tensor matches bit for bit', async () => {
    const sharded = tempDir('tiny-sharded')
    dirs.push(sharded)
    const made = await makeCheckpoint({ preset: 'tiny', seed: 1, out: sharded, maxShardBytes: 2_000_000 })
    expect(made.files).toContain('model.safetensors.index.json')
    expect(made.files.filter((f) => /^model-\d{5}-of-\d{5}\.safetensors$/.test(f)).length).toBeGreaterThan(3)
    expect(made.files).not.toContain('model.safetensors')
    const other = await loadCheckpoint(sharded)
    expect(other.weights.names().sort()).toEqual(loaded.weights.names().sort())
    for (const name of loaded.weights.names()) {
      expect(Buffer.compare(Buffer.from(other.weights.get(name).data), Buffer.from(loaded.weights.get(name).data)), name).toBe(0)
    }
  })
})

describe('every parameter transformers would init trivially is non-trivial here', () => {
  it('sinks, position biases, hc base/scale and correction biases are neither zero nor constant', () => {
    const list = withRole('sink', 'position-bias', 'hc-base', 'hc-scale', 'correction-bias')
    // 4 sinks; position biases: 2 per CSA layer (compressor, indexer) x 2 + 1 HCA; hc base and
    // scale: 2 sites x 4 layers + hc_head each; 3 top-k routers.
    expect(list.length).toBe(4 + 5 + 9 + 9 + 3)
    for (const s of list) {
      const v = loaded.weights.f32(s.name)
      if (s.name.endsWith('hc_head.hc_scale')) {
        // A single scalar cannot vary; it must still differ from transformers' init value of 1.
        expect(v[0], s.name).not.toBe(1)
        continue
      }
      expect(Math.min(...v) < Math.max(...v), s.name).toBe(true)
      expect(v.some((x) => x === 0), s.name).toBe(false)
    }
  })

  it('tid2eid rows hold distinct expert ids in [0, n_routed_experts), covering every expert', () => {
    const ids = loaded.weights.i64('model.layers.0.mlp.gate.tid2eid')
    const k = cfg.numExpertsPerTok
    const used = new Set<bigint>()
    const rows = new Set<string>()
    for (let r = 0; r < cfg.vocabSize; r++) {
      const row = Array.from(ids.subarray(r * k, r * k + k))
      expect(new Set(row).size, `row ${r}`).toBe(k)
      for (const id of row) {
        expect(id >= 0n && id < BigInt(cfg.nRoutedExperts), `row ${r}`).toBe(true)
        used.add(id)
      }
      rows.add(row.join(','))
    }
    expect(used.size).toBe(cfg.nRoutedExperts)
    expect(rows.size).toBeGreaterThan(20)
  })

  it('norm weights sit near 1, vary, and are bf16-representable although stored as F32', () => {
    for (const s of withRole('norm')) {
      const v = loaded.weights.f32(s.name)
      const bits = new Uint32Array(v.buffer, v.byteOffset, v.length)
      expect(bits.every((b) => (b & 0xffff) === 0), s.name).toBe(true)
      expect(Math.min(...v) < Math.max(...v), s.name).toBe(true)
      // 1 + 0.05 N: 0.5..1.5 is a 10-sigma band.
      expect(v.every((x) => x > 0.5 && x < 1.5), s.name).toBe(true)
    }
  })

  it('biases, sinks and hc parameters keep full fp32 precision', () => {
    for (const s of withRole('sink', 'position-bias', 'hc-base', 'hc-fn', 'correction-bias')) {
      const v = loaded.weights.f32(s.name)
      const bits = new Uint32Array(v.buffer, v.byteOffset, v.length)
      expect(bits.some((b) => (b & 0xffff) !== 0), s.name).toBe(true)
    }
  })
})

describe('weights have the documented scale (std 1/sqrt(fan_in), embeddings std 1)', () => {
  it('matches within 5% on every matrix of at least 8192 entries', () => {
    // The sample std of n normals has relative error ~1/sqrt(2n) <= 0.8% here, so 5% is > 6 sigma.
    for (const s of withRole('linear', 'expert-linear', 'embedding', 'hc-fn')) {
      const v = loaded.weights.f32(s.name)
      if (v.length < 8192) continue
      let sumSq = 0
      for (const x of v) sumSq += x * x
      const std = Math.sqrt(sumSq / v.length)
      const want = s.role === 'embedding' ? 1 : 1 / Math.sqrt(s.shape[s.shape.length - 1])
      expect(Math.abs(std / want - 1), s.name).toBeLessThan(0.05)
    }
  })
})
