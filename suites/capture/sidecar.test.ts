// export-weights and loadSidecar: the sidecar holds exactly the kv-path weights, as the decoder
// holds them after its own quantisation; its JSON says what the hook needs; its fingerprint moves
// with the rope tables, the window, the profile and the weights; a stale or edited sidecar is refused.
import { cpSync, readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { exportWeights, loadSidecar, sidecarWeightSpecs, type Sidecar } from '../../src/capture/index.ts'
import { readSafetensors, serializeSafetensors, tensorFrom, viewAs, type Tensor } from '../../src/formats/safetensors/index.ts'
import { makeCheckpoint } from '../../src/model/checkpoint/index.ts'
import { Attention } from '../../src/model/engine/attention.ts'
import { getProfile } from '../../src/model/profiles/index.ts'
import { ropeFingerprint } from '../../src/model/rope.ts'
import { prepareWeights } from '../../src/model/weights/index.ts'
import { sha256Hex } from '../../src/wire/manifest.ts'
import { sidecarFingerprint, type SidecarJson } from '../../src/wire/sidecar-format.ts'
import { tinySetup, type TinySetup } from './helpers.ts'

let setup: TinySetup
let decoder: Sidecar
let hfBf16: Sidecar

beforeAll(async () => {
  setup = await tinySetup('sidecar')
  decoder = await exportWeights({ model: setup.ckptDir, profile: 'decoder', out: join(setup.root, 'decoder') })
  hfBf16 = await exportWeights({ model: setup.ckptDir, profile: 'hf-bf16', out: join(setup.root, 'hf-bf16') })
})
afterAll(() => setup.dispose())

function bitsEqual (a: Float32Array, b: Float32Array): boolean {
  return Buffer.compare(Buffer.from(a.buffer, a.byteOffset, a.byteLength), Buffer.from(b.buffer, b.byteOffset, b.byteLength)) === 0
}

async function weightsOf (s: Sidecar): Promise<Map<string, Tensor>> {
  return (await readSafetensors(join(s.dir, 'weights.safetensors'))).tensors
}

function widen (t: Tensor): Float32Array {
  if (t.dtype === 'F32') return viewAs(t, 'F32')
  const codes = viewAs(t, 'BF16')
  const out = new Float32Array(codes.length)
  new Uint32Array(out.buffer).forEach((_, i, a) => { a[i] = codes[i] << 16 })
  return out
}

describe('the sidecar holds exactly the kv-path weights', () => {
  it('28 tensors for tiny: kv_proj, kv_norm, and the compressor / indexer-compressor kv, gate, bias, norm', async () => {
    const names = [...(await weightsOf(decoder)).keys()].sort()
    expect(names).toEqual(sidecarWeightSpecs(decoder.json).map((s) => s.name).sort())
    expect(names.length).toBe(28)
    expect(names.filter((n) => /q_a_proj|q_b_proj|o_a_proj|o_b_proj|experts|sinks|embed|lm_head|weights_proj|mlp\./.test(n))).toEqual([])
    expect(names).toContain('model.layers.2.self_attn.compressor.position_bias')
    expect(names).toContain('model.layers.3.self_attn.compressor.indexer.gate_proj.weight')
    expect(names.filter((n) => n.startsWith('model.layers.0.'))).toEqual(['model.layers.0.self_attn.kv_norm.weight', 'model.layers.0.self_attn.kv_proj.weight'])
  })

  it('values are the decoder\'s held values: MXFP8 kv_proj, bf16 compressor projections, f32 vectors', async () => {
    const prepared = prepareWeights(setup.ckpt.weights, setup.ckpt.config, getProfile('decoder'))
    const tensors = await weightsOf(decoder)
    let quantisedDiffers = false
    for (const spec of sidecarWeightSpecs(decoder.json)) {
      const t = tensors.get(spec.name)!
      const held = spec.kind === 'linear' ? prepared.linear(spec.name).values() : prepared.vector(spec.name)
      expect(bitsEqual(widen(t), held), spec.name).toBe(true)
      if (spec.name.endsWith('self_attn.kv_proj.weight')) {
        expect(t.dtype).toBe('BF16')
        if (!bitsEqual(held, setup.ckpt.weights.f32(spec.name))) quantisedDiffers = true
      }
    }
    // MXFP8 changed the attention kv_proj values; the sidecar carries the changed ones.
    expect(quantisedDiffers).toBe(true)
  })

  it('hf-bf16 rounds the F32 vectors (position biases) to bf16, as that profile holds them', async () => {
    const name = 'model.layers.1.self_attn.compressor.position_bias'
    const ours = widen((await weightsOf(hfBf16)).get(name)!)
    const source = setup.ckpt.weights.f32(name)
    expect(bitsEqual(ours, source)).toBe(false)
    expect(new Uint32Array(ours.buffer).every((b) => (b & 0xffff) === 0)).toBe(true)
    expect(bitsEqual(widen((await weightsOf(decoder)).get(name)!), source)).toBe(true)
  })
})

describe('sidecar.json says what the hook needs', () => {
  it('profile, layers with types and ratios, rope per layer type, window, max positions, block size, fingerprints', () => {
    const j = decoder.json
    const cfg = setup.ckpt.config
    expect(j.profile).toEqual(JSON.parse(JSON.stringify(getProfile('decoder'))))
    expect(j.layers).toEqual([
      { index: 0, layerType: 'sliding_attention', compressRatio: 0 },
      { index: 1, layerType: 'compressed_sparse_attention', compressRatio: 4 },
      { index: 2, layerType: 'heavily_compressed_attention', compressRatio: 128 },
      { index: 3, layerType: 'compressed_sparse_attention', compressRatio: 4 },
    ])
    expect(j.ropeParameters.sliding_attention).toEqual(cfg.rope.main)
    expect(j.ropeParameters.compressed_sparse_attention).toEqual(cfg.rope.compress)
    expect(j.ropeParameters.heavily_compressed_attention).toEqual(cfg.rope.compress)
    expect(j.ropeFingerprints.compressed_sparse_attention).toBe(ropeFingerprint(cfg.rope.compress, 32768))
    expect([j.slidingWindow, j.maxPositionEmbeddings, j.blockSize]).toEqual([128, 32768, 2048])
    expect(decoder.fingerprint).toBe(sidecarFingerprint(j, j.weights.sha256))
    expect(decoder.fingerprint).toMatch(/^[0-9a-f]{64}$/)
  })
})

describe('the geometry fingerprint', () => {
  it('is the same for a re-export (byte-identical weights) and differs across profiles', async () => {
    const again = await exportWeights({ model: setup.ckptDir, profile: 'decoder', out: join(setup.root, 'decoder-again'), blockSize: 4096 })
    expect(again.json.weights.sha256).toBe(decoder.json.weights.sha256)
    expect(again.fingerprint).toBe(decoder.fingerprint)
    expect(again.json.blockSize).toBe(4096)
    expect(hfBf16.fingerprint).not.toBe(decoder.fingerprint)
  })

  it('moves with the YaRN factor (the effective compress table) and only that table', async () => {
    const other = join(setup.root, 'ckpt-factor16')
    cpSync(setup.ckptDir, other, { recursive: true })
    const cfg = JSON.parse(readFileSync(join(other, 'config.json'), 'utf8'))
    cfg.rope_parameters.compress.factor = 16
    writeFileSync(join(other, 'config.json'), JSON.stringify(cfg, null, 2))
    const s = await exportWeights({ model: other, profile: 'decoder', out: join(setup.root, 'decoder-factor16') })
    expect(s.json.weights.sha256).toBe(decoder.json.weights.sha256)
    expect(s.fingerprint).not.toBe(decoder.fingerprint)
    expect(s.json.ropeFingerprints.sliding_attention).toBe(decoder.json.ropeFingerprints.sliding_attention)
    expect(s.json.ropeFingerprints.compressed_sparse_attention).not.toBe(decoder.json.ropeFingerprints.compressed_sparse_attention)
  })

  it('moves with the weights under one geometry (another seed)', async () => {
    const seed2 = join(setup.root, 'ckpt-seed2')
    await makeCheckpoint({ preset: 'tiny', seed: 2, out: seed2 })
    const s = await exportWeights({ model: seed2, profile: 'decoder', out: join(setup.root, 'decoder-seed2') })
    expect(s.fingerprint).not.toBe(decoder.fingerprint)
  })
})

describe('loadSidecar refuses a stale or edited sidecar, naming the file and field', () => {
  function editedCopy (name: string, edit: (j: SidecarJson & Record<string, unknown>) => void): string {
    const dir = join(setup.root, `edited-${name}`)
    cpSync(decoder.dir, dir, { recursive: true })
    const j = JSON.parse(readFileSync(join(dir, 'sidecar.json'), 'utf8'))
    edit(j)
    writeFileSync(join(dir, 'sidecar.json'), JSON.stringify(j))
    return dir
  }

  it('a window edited without re-export: the fingerprint no longer matches', async () => {
    const dir = editedCopy('window', (j) => { j.slidingWindow = 256 })
    await expect(loadSidecar(dir)).rejects.toThrow(/sidecar\.json: fingerprint: is [0-9a-f]{64} but the geometry and weights give [0-9a-f]{64} \(edited or stale sidecar/)
  })

  it('a rope factor edited: the rope fingerprint of that layer type no longer matches', async () => {
    const dir = editedCopy('factor', (j) => {
      j.ropeParameters.compressed_sparse_attention.factor = 16
      j.ropeParameters.heavily_compressed_attention.factor = 16
    })
    await expect(loadSidecar(dir)).rejects.toThrow(/ropeFingerprints\.compressed_sparse_attention: is [0-9a-f]{64} but the rope parameters give/)
  })

  it('CSA and HCA with different compress tables, a ratio that contradicts its layer type, another format tag, an unknown key', async () => {
    await expect(loadSidecar(editedCopy('split', (j) => { j.ropeParameters.heavily_compressed_attention.factor = 16 }))).rejects.toThrow(/ropeParameters\.heavily_compressed_attention: differs from compressed_sparse_attention/)
    await expect(loadSidecar(editedCopy('ratio', (j) => { j.layers[2].compressRatio = 64 }))).rejects.toThrow(/layers\.2\.compressRatio: is 64, but a heavily_compressed_attention layer has ratio 128/)
    await expect(loadSidecar(editedCopy('format', (j) => { (j as Record<string, unknown>).format = 'pd-bridge-sidecar/2' }))).rejects.toThrow(/format: is "pd-bridge-sidecar\/2", this reader knows only pd-bridge-sidecar\/1/)
    await expect(loadSidecar(editedCopy('extra', (j) => { j.comment = 'hi' }))).rejects.toThrow(/sidecar\.json: \(root\): Unrecognized key/)
  })

  it('weights changed after export: size or digest mismatch', async () => {
    const dir = editedCopy('weights', () => {})
    const path = join(dir, 'weights.safetensors')
    const bytes = readFileSync(path)
    bytes[bytes.length - 1] ^= 1
    writeFileSync(path, bytes)
    await expect(loadSidecar(dir)).rejects.toThrow(/weights\.sha256: is [0-9a-f]{64} but .*weights\.safetensors hashes to/)
    writeFileSync(path, bytes.subarray(0, bytes.length - 2))
    await expect(loadSidecar(dir)).rejects.toThrow(/weights\.bytes: is \d+ but .* has \d+ bytes/)
  })

  it('a weights file with a tensor the kv path does not read, even with a matching digest', async () => {
    const dir = editedCopy('extra-tensor', () => {})
    const tensors = await weightsOf(decoder)
    tensors.set('model.layers.0.self_attn.q_a_proj.weight', tensorFrom('F32', [1, 1], new Float32Array(1)))
    const bytes = serializeSafetensors(tensors)
    writeFileSync(join(dir, 'weights.safetensors'), bytes)
    const j = JSON.parse(readFileSync(join(dir, 'sidecar.json'), 'utf8'))
    j.weights.bytes = bytes.length
    j.weights.sha256 = sha256Hex(bytes)
    writeFileSync(join(dir, 'sidecar.json'), JSON.stringify(j))
    await expect(loadSidecar(dir)).rejects.toThrow(/weights\.safetensors: tensor model\.layers\.0\.self_attn\.q_a_proj\.weight is not a kv-path weight/)
  })

  it('a directory without a sidecar', async () => {
    await expect(loadSidecar(join(setup.root, 'nowhere'))).rejects.toThrow(/sidecar\.json: \(file\): missing/)
  })
})

describe('the kv path reads nothing but the sidecar', () => {
  it('the query and output projections are absent, and say so if anything reads them', () => {
    const attention = decoder.kvPath.layers[1]
    if (!(attention instanceof Attention)) throw new Error('the decoder cache math builds the engine\'s Attention')
    const layer = attention.weights
    expect(() => layer.qA.apply(new Float32Array(256), 1)).toThrow(/model\.layers\.1\.self_attn\.q_a_proj\.weight is not in the sidecar; the kv path must not read it/)
    expect(() => layer.indexer!.weightsProj.apply(new Float32Array(256), 1)).toThrow(/not in the sidecar/)
  })
})
