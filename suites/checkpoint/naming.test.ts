// The naming table against transformers itself, and every layout the loader accepts giving the same
// internal tensors. The reference is harness/fixtures/hf-saved-names-tiny.json: a tiny-preset model
// saved by transformers 5.17's save_pretrained, each saved tensor matched on the CUDA machine to the
// in-memory tensor (and slice) it equals (harness/hf_saved_checkpoint.py names). Nothing in it comes
// from our table.
import { readFileSync } from 'node:fs'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { ShardedCheckpoint, type Tensor } from '../../src/formats/safetensors/index.ts'
import {
  deepseekLayout, deepseekName, expectedParameters, loadCheckpoint, makeCheckpoint, makeTensors, presetConfig,
  sourceNames, toDeepseekTensors,
} from '../../src/model/checkpoint/index.ts'
import { removeDir, tempDir } from './helpers.ts'

interface SavedEntry { name: string, shape: number[], dtype: string, from: string | null, how: string }
const saved = JSON.parse(readFileSync(new URL('../../harness/fixtures/hf-saved-names-tiny.json', import.meta.url), 'utf8')) as
  { transformers: string, saved: SavedEntry[], config_from: string }

const cfg = presetConfig('tiny')
let dir: string

beforeAll(async () => {
  dir = tempDir('naming')
  await makeCheckpoint({ preset: 'tiny', seed: 1, out: dir, force: true })
})
afterAll(() => removeDir(dir))

describe('make-checkpoint writes exactly the tensors save_pretrained writes', () => {
  it('the same 210 names with the same shapes as transformers 5.17 saved for the tiny config', async () => {
    expect(saved.transformers).toBe('5.17.0')
    const ckpt = await ShardedCheckpoint.open(dir)
    try {
      const ours = Object.fromEntries(ckpt.names().map((n) => [n, ckpt.info(n).shape]))
      const theirs = Object.fromEntries(saved.saved.map((e) => [e.name, e.shape]))
      expect(Object.keys(ours).sort()).toEqual(Object.keys(theirs).sort())
      expect(ours).toEqual(theirs)
      expect(Object.keys(ours)).toHaveLength(210)
    }
    finally {
      await ckpt.close()
    }
  })
})

describe('every entry of the table is what transformers does', () => {
  it('each saved name maps to the in-memory tensor (and expert slice) transformers saved it from', () => {
    const known = sourceNames(cfg)
    let wholes = 0
    let parts = 0
    for (const e of saved.saved) {
      expect(e.from, `${e.name}: the probe matched it to no in-memory tensor`).not.toBeNull()
      const s = known.get(e.name)
      expect(s?.namings, e.name).toContain('deepseek')
      expect(s?.internal, e.name).toBe(e.from)
      if (e.how === 'identical') {
        expect(s?.expert, e.name).toBeUndefined()
        wholes++
        continue
      }
      // '[e]' is the whole expert slab (down_proj <- w2); '[e, :h]' / '[e, h:]' the gate / up halves.
      const m = /^\[(\d+)(?:, (:?)(\d+)(:?))?\]$/.exec(e.how)
      expect(m, `${e.name}: relation ${e.how}`).not.toBeNull()
      expect(s?.expert, e.name).toBe(Number(m![1]))
      expect(s?.part, e.name).toBe(m![2] === ':' ? 0 : m![4] === ':' ? 1 : 0)
      parts++
    }
    expect(wholes).toBe(114)
    expect(parts).toBe(96) // 4 layers x 8 experts x (w1, w2, w3)
  })

  it('round-trips: deepseekName and the layout invert sourceNames for every tensor of tiny and small', () => {
    for (const preset of ['tiny', 'small']) {
      const c = presetConfig(preset)
      const known = sourceNames(c)
      const specs = expectedParameters(c)
      for (const spec of specs) {
        expect(known.get(spec.name)?.internal, spec.name).toBe(spec.name)
      }
      const layout = deepseekLayout(c)
      for (const t of layout) {
        const s = known.get(t.name)
        expect(s?.internal, t.name).toBe(t.internal)
        if (t.expert === undefined) expect(deepseekName(t.internal)).toBe(t.name)
        else expect(s?.expert, t.name).toBe(t.expert)
      }
      // Every internal tensor is covered by the layout, its elements exactly once.
      const elements = new Map<string, number>()
      for (const t of layout) elements.set(t.internal, (elements.get(t.internal) ?? 0) + t.shape.reduce((a, b) => a * b, 1))
      for (const spec of specs) expect(elements.get(spec.name), spec.name).toBe(spec.shape.reduce((a, b) => a * b, 1))
    }
  })
})

describe('DeepSeek names load to the same internal tensors as transformers names', () => {
  it('make-checkpoint output (DeepSeek names, per-expert) gives makeTensors bit for bit, and says which naming it read', async () => {
    const loaded = await loadCheckpoint(dir)
    const want = makeTensors(cfg, 1)
    expect(loaded.source).toMatchObject({ naming: 'deepseek', hubSpelling: false, perExpert: true })
    expect(loaded.weights.size).toBe(want.size)
    for (const [name, t] of want) expectSameTensor(loaded.weights.get(name), t, name)
  })

  it('toDeepseekTensors splits gate_up_proj[e] into w1 = the first inter rows and w3 = the rest, down_proj[e] = w2', () => {
    const internal = makeTensors(cfg, 1)
    const out = toDeepseekTensors(cfg, internal)
    const gateUp = internal.get('model.layers.2.mlp.experts.gate_up_proj')!
    const rowBytes = 256 * 2
    const expert = 5
    const w1 = out.get('model.layers.2.ffn.experts.5.w1.weight')!
    const w3 = out.get('model.layers.2.ffn.experts.5.w3.weight')!
    expect(w1.shape).toEqual([128, 256])
    expect(Buffer.from(w1.data)).toEqual(Buffer.from(gateUp.data.subarray(expert * 256 * rowBytes, (expert * 256 + 128) * rowBytes)))
    expect(Buffer.from(w3.data)).toEqual(Buffer.from(gateUp.data.subarray((expert * 256 + 128) * rowBytes, (expert + 1) * 256 * rowBytes)))
  })
})

function expectSameTensor (got: Tensor, want: Tensor, name: string): void {
  expect(got.dtype, name).toBe(want.dtype)
  expect(got.shape, name).toEqual(want.shape)
  expect(Buffer.compare(Buffer.from(got.data), Buffer.from(want.data)), name).toBe(0)
}
