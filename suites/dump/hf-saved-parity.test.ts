// A checkpoint made entirely by transformers (harness/fixtures/hf-saved: random init with every
// parameter non-trivial, bf16 weights and fp32 kept modules, written by save_pretrained with
// DeepSeek's names; harness/hf_saved_checkpoint.py make) loads here unchanged, and `pd-bridge dump`
// in f32 matches transformers' own fp32 run on that saved directory (loaded fresh, TF32 off:
// ref-hfsaved-*.safetensors): within 1e-5 relative per tensor, integers and greedy tokens identical.
// T = 301 sits inside the compress rope's original window (512); T = 777 is past it, under YaRN.
// Both sides are fp32 but sum in different orders, so this comparison is tolerance-based: the worst
// relative error per tensor class is printed.
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { viewAs, type Tensor } from '../../src/formats/safetensors/index.ts'
import { checkpointDigest, loadCheckpoint } from '../../src/model/checkpoint/index.ts'
import { relError } from '../engine/helpers.ts'
import { cli, fixturePath, readDump } from './helpers.ts'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'

const TOLERANCE = 1e-5
const MODEL = fixturePath('hf-saved')
const CASES = [
  { name: 't301', tokens: 'tokens-301.json', split: 130, attnInputs: true, reference: 'ref-hfsaved-t301-f32.safetensors', tensors: 88 },
  { name: 't777', tokens: 'tokens-777.json', split: 600, attnInputs: false, reference: 'ref-hfsaved-t777-f32.safetensors', tensors: 78 },
] as const

let scratch: string
const dumps = new Map<string, { ours: Awaited<ReturnType<typeof readDump>>, theirs: Awaited<ReturnType<typeof readDump>> }>()

beforeAll(async () => {
  scratch = mkdtempSync(join(tmpdir(), 'pd-bridge-hf-saved-'))
  await Promise.all(CASES.map(async (c) => {
    const out = join(scratch, `${c.name}.safetensors`)
    const r = await cli('dump', '--model', MODEL, '--tokens', fixturePath(c.tokens), '--profile', 'f32', '--split', String(c.split),
      '--greedy', '12', ...(c.attnInputs ? [] : ['--no-attn-inputs']), '--out', out)
    if (r.code !== 0) throw new Error(`pd-bridge dump failed (${r.code}): ${r.stderr}`)
    dumps.set(c.name, { ours: await readDump(out), theirs: await readDump(fixturePath(c.reference)) })
  }))
})
afterAll(() => rmSync(scratch, { recursive: true, force: true }))

describe('the transformers-saved directory loads unchanged', () => {
  it('DeepSeek names, one tensor per expert, bf16 weights with fp32 kept modules, as transformers 5.17 wrote it', async () => {
    const loaded = await loadCheckpoint(MODEL)
    expect(loaded.source).toMatchObject({ naming: 'deepseek', hubSpelling: false, perExpert: true, formats: { BF16: 123, F32: 75, I64: 1 } })
    expect(loaded.config.numHiddenLayers).toBe(5)
    expect(loaded.config.layerTypes).toEqual(['sliding_attention', 'compressed_sparse_attention', 'heavily_compressed_attention', 'compressed_sparse_attention', 'heavily_compressed_attention'])
  })

  it('the references were made from exactly this directory', async () => {
    const digest = await checkpointDigest(MODEL)
    for (const c of CASES) {
      const { ours, theirs } = dumps.get(c.name)!
      expect(theirs.metadata, c.name).toMatchObject({ transformers: '5.17.0', dtype: 'float32', tf32: 'off', checkpoint_sha256: digest })
      expect(ours.metadata.checkpoint_sha256, c.name).toBe(digest)
    }
  })
})

describe.each(CASES)('dump f32 vs transformers fp32 on the saved checkpoint ($name)', (c) => {
  it('the same tensor names, dtypes and shapes', () => {
    const { ours, theirs } = dumps.get(c.name)!
    expect([...ours.tensors.keys()].sort()).toEqual([...theirs.tensors.keys()].sort())
    expect(theirs.tensors.size).toBe(c.tensors)
    for (const [name, ref] of theirs.tensors) {
      expect(ours.tensors.get(name)!.dtype, name).toBe(ref.dtype)
      expect(ours.tensors.get(name)!.shape, name).toEqual(ref.shape)
    }
  })

  it('every float tensor within 1e-5 relative (worst per class printed); integers and 12 greedy tokens identical', () => {
    const { ours, theirs } = dumps.get(c.name)!
    const worst = new Map<string, { name: string, error: number }>()
    for (const [name, ref] of theirs.tensors) {
      const t = ours.tensors.get(name) as Tensor
      if (ref.dtype === 'I64') {
        expect(Array.from(viewAs(t, 'I64')), name).toEqual(Array.from(viewAs(ref, 'I64')))
        continue
      }
      const error = relError(viewAs(t, 'F32'), viewAs(ref, 'F32'))
      expect(error, name).toBeLessThanOrEqual(TOLERANCE)
      const cls = name.replace(/^(oneshot|chunked)\./, '').replace(/^layers\.\d+\./, '')
      if ((worst.get(cls)?.error ?? -1) < error) worst.set(cls, { name, error })
    }
    expect(viewAs(ours.tensors.get('greedy')!, 'I64').length).toBe(12)
    console.log(`pd-bridge dump (f32) vs transformers fp32 on the transformers-saved checkpoint, ${c.name}, worst relative error per class:\n` +
      [...worst].sort().map(([cls, w]) => `  ${cls.padEnd(28)} ${w.error.toExponential(2)}  (${w.name})`).join('\n'))
  })
})
