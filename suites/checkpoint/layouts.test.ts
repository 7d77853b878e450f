// Every checkpoint layout the loader reads, built from the same tiny seed-1 weights: the values it
// hands the engine are the stored ones (bit for bit, or exactly widened), whatever the naming, the
// expert layout, the sharding or the dtype; and every malformed or foreign one gets one clear error.
import { writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { CheckpointError } from '../../src/errors.ts'
import { tensorFrom, viewAs, writeShardedCheckpoint, type Tensor } from '../../src/formats/safetensors/index.ts'
import {
  checkpointConfigJson, HUB_GLOBAL_ALIASES, loadCheckpoint, makeTensors, presetConfig, toDeepseekTensors,
} from '../../src/model/checkpoint/index.ts'
import { decodeBf16 } from '../../src/numerics/bf16.ts'
import { decodeF16, encodeF16 } from '../../src/numerics/f16.ts'
import { dequantizeFp8BlockWeight, quantizeFp8BlockWeight } from '../../src/numerics/fp8-block-weight.ts'
import { cli } from '../dump/helpers.ts'
import { removeDir, tempDir } from './helpers.ts'

const cfg = presetConfig('tiny')
const dirs: string[] = []
let internal: Map<string, Tensor>
let deepseek: Map<string, Tensor>

beforeAll(() => {
  internal = makeTensors(cfg, 1)
  deepseek = toDeepseekTensors(cfg, internal)
})
afterAll(() => dirs.forEach(removeDir))

async function writeDir (tensors: ReadonlyMap<string, Tensor>, maxShardBytes?: number): Promise<string> {
  const dir = tempDir('layout')
  dirs.push(dir)
  await writeShardedCheckpoint(dir, new Map(tensors), { metadata: { format: 'pt' }, maxShardBytes })
  writeFileSync(join(dir, 'config.json'), checkpointConfigJson(cfg))
  return dir
}

async function loadError (tensors: ReadonlyMap<string, Tensor>): Promise<CheckpointError> {
  const err = await loadCheckpoint(await writeDir(tensors)).then(() => null, (e: unknown) => e)
  expect(err).toBeInstanceOf(CheckpointError)
  return err as CheckpointError
}

function f32Of (t: Tensor): Float32Array {
  return t.dtype === 'F32' ? viewAs(t, 'F32') : decodeBf16(viewAs(t, 'BF16'))
}

function renamed (tensors: ReadonlyMap<string, Tensor>, rename: (name: string) => string): Map<string, Tensor> {
  return new Map([...tensors].map(([n, t]) => [rename(n), t]))
}

async function expectInternal (dir: string, compare: (name: string, got: Tensor, want: Tensor) => void = sameBits): Promise<void> {
  const loaded = await loadCheckpoint(dir)
  expect(loaded.weights.size).toBe(internal.size)
  for (const [name, want] of internal) compare(name, loaded.weights.get(name), want)
}

function bytes (v: Float32Array): Buffer {
  return Buffer.from(v.buffer, v.byteOffset, v.byteLength)
}

function sameBits (name: string, got: Tensor, want: Tensor): void {
  expect(got.dtype, name).toBe(want.dtype)
  expect(got.shape, name).toEqual(want.shape)
  expect(Buffer.compare(Buffer.from(got.data), Buffer.from(want.data)), name).toBe(0)
}

describe('namings and layouts', () => {
  it('transformers module names with stacked experts (the internal layout itself)', async () => {
    const dir = await writeDir(internal)
    await expectInternal(dir)
    expect((await loadCheckpoint(dir)).source).toMatchObject({ naming: 'transformers', perExpert: false })
  })

  it("the hub's original spellings: layers without model., embed.weight, norm.weight, hc_head_fn/base/scale", async () => {
    const back = Object.fromEntries(Object.entries(HUB_GLOBAL_ALIASES).map(([hub, name]) => [name, hub]))
    const hub = renamed(deepseek, (n) => back[n] ?? n.replace(/^model\.layers\./, 'layers.'))
    expect(hub.has('embed.weight') && hub.has('layers.0.attn.wq_a.weight') && hub.has('head.weight')).toBe(true)
    const dir = await writeDir(hub)
    await expectInternal(dir)
    expect((await loadCheckpoint(dir)).source).toMatchObject({ naming: 'deepseek', hubSpelling: true, perExpert: true })
  })

  it("transformers names with one tensor per expert (mlp.experts.E.gate_proj / up_proj / down_proj)", async () => {
    const perExpert = new Map([...internal].filter(([n]) => !n.includes('.mlp.experts.')))
    for (const [name, t] of deepseek) {
      const m = /^model\.layers\.(\d+)\.ffn\.experts\.(\d+)\.(w[123])\.weight$/.exec(name)
      if (m === null) continue
      const leaf = { w1: 'gate_proj', w3: 'up_proj', w2: 'down_proj' }[m[3]]!
      perExpert.set(`model.layers.${m[1]}.mlp.experts.${m[2]}.${leaf}.weight`, t)
    }
    const dir = await writeDir(perExpert)
    await expectInternal(dir)
    expect((await loadCheckpoint(dir)).source).toMatchObject({ naming: 'transformers', perExpert: true })
  })

  it('sharded with model.safetensors.index.json, DeepSeek names', async () => {
    await expectInternal(await writeDir(deepseek, 1_500_000))
  })

  it('every float tensor stored as F32 (what save_pretrained writes for an fp32 model): the same values', async () => {
    const f32 = new Map([...deepseek].map(([n, t]) => [n, t.dtype === 'BF16' ? tensorFrom('F32', t.shape, decodeBf16(viewAs(t, 'BF16'))) : t]))
    await expectInternal(await writeDir(f32), (name, got, want) => {
      expect(got.dtype, name).toBe(want.dtype === 'I64' ? 'I64' : 'F32')
      if (want.dtype !== 'I64') expect(Buffer.compare(bytes(f32Of(got)), bytes(f32Of(want))), name).toBe(0)
    })
  })

  it('F16 tensors are widened exactly to F32; I32 hash routes to I64', async () => {
    const name = 'model.layers.1.attn.wq_a.weight'
    const codes = encodeF16(f32Of(deepseek.get(name)!))
    const tensors = new Map(deepseek)
    tensors.set(name, tensorFrom('F16', deepseek.get(name)!.shape, codes))
    const ids = viewAs(deepseek.get('model.layers.0.ffn.gate.tid2eid')!, 'I64')
    tensors.set('model.layers.0.ffn.gate.tid2eid', tensorFrom('I32', [512, 2], Int32Array.from(ids, (x) => Number(x))))
    const loaded = await loadCheckpoint(await writeDir(tensors))
    const got = loaded.weights.get('model.layers.1.self_attn.q_a_proj.weight')
    expect(got.dtype).toBe('F32')
    expect(Buffer.compare(bytes(viewAs(got, 'F32')), bytes(decodeF16(codes)))).toBe(0)
    sameBits('tid2eid', loaded.weights.get('model.layers.0.mlp.gate.tid2eid'), internal.get('model.layers.0.mlp.gate.tid2eid')!)
    expect(loaded.source.formats).toMatchObject({ F16: 1, I32: 1 })
  })

  it('fp8 e4m3 weights with 128x128 block scales: DeepSeek `.scale` (ue8m0) and `weight_scale_inv` (float32), dequantised exactly', async () => {
    const tensors = new Map(deepseek)
    const expected = new Map<string, Float32Array>()
    const quantize = (name: string, format: 'ue8m0' | 'f32', scaleName: string, internalName: string) => {
      const t = deepseek.get(name)!
      const [rows, cols] = t.shape
      const q = quantizeFp8BlockWeight(f32Of(t), rows, cols, format)
      tensors.set(name, tensorFrom('F8_E4M3', t.shape, q.codes))
      tensors.set(scaleName, format === 'ue8m0' ? tensorFrom('F8_E8M0', [Math.ceil(rows / 128), Math.ceil(cols / 128)], q.scales) : tensorFrom('F32', [Math.ceil(rows / 128), Math.ceil(cols / 128)], q.scales as Float32Array))
      expected.set(internalName, dequantizeFp8BlockWeight(q))
    }
    quantize('model.layers.1.attn.wq_b.weight', 'ue8m0', 'model.layers.1.attn.wq_b.scale', 'model.layers.1.self_attn.q_b_proj.weight')
    quantize('model.layers.2.attn.wo_b.weight', 'f32', 'model.layers.2.attn.wo_b.weight_scale_inv', 'model.layers.2.self_attn.o_b_proj.weight')
    quantize('model.layers.3.ffn.experts.2.w1.weight', 'ue8m0', 'model.layers.3.ffn.experts.2.w1.scale', '')
    const loaded = await loadCheckpoint(await writeDir(tensors))
    for (const [name, values] of expected) {
      if (name === '') continue
      const got = loaded.weights.get(name)
      expect(got.dtype, name).toBe('F32')
      expect(Buffer.compare(bytes(viewAs(got, 'F32')), bytes(values)), name).toBe(0)
    }
    // An fp8 expert part makes its whole stacked tensor F32; the other parts keep their values.
    const gateUp = loaded.weights.get('model.layers.3.mlp.experts.gate_up_proj')
    expect(gateUp.dtype).toBe('F32')
    const want = f32Of(internal.get('model.layers.3.mlp.experts.gate_up_proj')!)
    const got = viewAs(gateUp, 'F32')
    const w1 = dequantizeFp8BlockWeight(quantizeFp8BlockWeight(f32Of(deepseek.get('model.layers.3.ffn.experts.2.w1.weight')!), 128, 256, 'ue8m0'))
    const start = 2 * 256 * 256
    expect(Buffer.compare(bytes(got.subarray(start, start + 128 * 256)), bytes(w1))).toBe(0)
    expect(Buffer.compare(bytes(got.subarray(0, start)), bytes(want.subarray(0, start)))).toBe(0)
    expect(loaded.source.formats).toMatchObject({ 'F8_E4M3+ue8m0': 2, 'F8_E4M3+f32': 1 })
  })
})

describe('malformed and foreign checkpoints: one clear error each', () => {
  it('an unknown name, with the closest expected name', async () => {
    const tensors = renamed(deepseek, (n) => n === 'model.layers.1.attn.wq_a.weight' ? 'model.layers.1.attn.wqa.weight' : n)
    const err = await loadError(tensors)
    expect(err.tensor).toBe('model.layers.1.attn.wqa.weight')
    expect(err.message).toContain('unexpected: not a tensor this config implies under DeepSeek (save_pretrained / hub) names (closest expected name: model.layers.1.attn.wq_a.weight)')
  })

  it('both namings mixed', async () => {
    const tensors = new Map(deepseek)
    tensors.delete('model.layers.2.attn.attn_sink')
    tensors.set('model.layers.2.self_attn.sinks', internal.get('model.layers.2.self_attn.sinks')!)
    const err = await loadError(tensors)
    expect(err.message).toMatch(/mixes both namings: this is a DeepSeek name, but model\.layers\.2\.self_attn\.sinks is a transformers module name \(\d+ DeepSeek-only and 1 transformers-only names\); a checkpoint uses one/)
  })

  it('a missing tensor and a missing expert part are named as the file would spell them', async () => {
    const noSink = new Map(deepseek)
    noSink.delete('model.layers.2.attn.attn_sink')
    expect((await loadError(noSink)).message).toContain('tensor model.layers.2.attn.attn_sink: missing from the checkpoint')
    const noPart = new Map(deepseek)
    noPart.delete('model.layers.1.ffn.experts.6.w3.weight')
    expect((await loadError(noPart)).message).toContain('tensor model.layers.1.ffn.experts.6.w3.weight: missing from the checkpoint')
  })

  it('a wrong shape, and an expert given both stacked and per expert', async () => {
    const bad = new Map(deepseek)
    bad.set('model.layers.1.ffn.experts.0.w2.weight', tensorFrom('BF16', [256, 64], new Uint16Array(256 * 64)))
    expect((await loadError(bad)).message).toContain('tensor model.layers.1.ffn.experts.0.w2.weight: wrong shape: expected [256, 128], found [256, 64]')
    const twice = new Map(internal)
    twice.set('model.layers.1.mlp.experts.0.down_proj.weight', deepseek.get('model.layers.1.ffn.experts.0.w2.weight')!)
    expect((await loadError(twice)).message).toContain('tensor model.layers.1.mlp.experts.down_proj: given twice: as this tensor and as per-expert tensors (model.layers.1.mlp.experts.0.down_proj.weight, ...)')
  })

  it('an fp8 weight without its scale, or with a scale of the wrong shape', async () => {
    const t = deepseek.get('model.layers.1.attn.wq_b.weight')!
    const q = quantizeFp8BlockWeight(f32Of(t), 512, 128, 'ue8m0')
    const noScale = new Map(deepseek)
    noScale.set('model.layers.1.attn.wq_b.weight', tensorFrom('F8_E4M3', [512, 128], q.codes))
    expect((await loadError(noScale)).message).toContain('tensor model.layers.1.attn.wq_b.weight: is F8_E4M3 but has no block-scale tensor (model.layers.1.attn.wq_b.scale or model.layers.1.attn.wq_b.weight_scale_inv)')
    const badScale = new Map(noScale)
    badScale.set('model.layers.1.attn.wq_b.scale', tensorFrom('F8_E8M0', [2, 2], new Uint8Array(4)))
    expect((await loadError(badScale)).message).toContain('tensor model.layers.1.attn.wq_b.scale: wrong shape: a 128x128 block scale of [512, 128] is [4, 1], found [2, 2]')
  })

  it('pd-bridge dump on a malformed checkpoint: exit 2, one line, no stack trace', async () => {
    const tensors = renamed(deepseek, (n) => n === 'head.weight' ? 'lm_head.weight' : n)
    const dir = await writeDir(tensors)
    const r = await cli('dump', '--model', dir, '--tokens', new URL('../../harness/fixtures/tokens-301.json', import.meta.url).pathname,
      '--profile', 'f32', '--out', join(dir, 'never.safetensors'))
    expect(r.code).toBe(2)
    expect(r.stderr).toMatch(/^pd-bridge: [^\n]+\n$/)
    expect(r.stderr).toContain('mixes both namings')
    expect(r.stderr).not.toContain('    at ')
  })
})
