// The forms --tokens accepts: a JSON array, a safetensors file with input_ids I64 (the reference
// fixture itself) or I32 of any shape (flattened), and a file without a telling extension. Each
// dump must equal the JSON dump bit for bit: the same engine on the same ids.
import { copyFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { tensorFrom, viewAs, writeSafetensors, type Tensor } from '../../src/formats/safetensors/index.ts'
import { cli, fixturePath, readDump, sameBits, scratchWithTinyCheckpoint } from './helpers.ts'

const ids: number[] = (await import(fixturePath('tokens-301.json'), { with: { type: 'json' } })).default

let scratch: Awaited<ReturnType<typeof scratchWithTinyCheckpoint>>
let baseline: Map<string, Tensor>

async function dump (tokens: string, out: string, ...extra: string[]): Promise<Map<string, Tensor>> {
  const r = await cli('dump', '--model', scratch.model, '--tokens', tokens, '--profile', 'f32', '--out', join(scratch.dir, out), ...extra)
  if (r.code !== 0) throw new Error(`pd-bridge dump --tokens ${tokens} failed (${r.code}): ${r.stderr}`)
  return (await readDump(join(scratch.dir, out))).tensors
}

function differences (a: Map<string, Tensor>, b: Map<string, Tensor>): string[] {
  const names = new Set([...a.keys(), ...b.keys()])
  return [...names].filter((n) => a.get(n) === undefined || b.get(n) === undefined || !sameBits(a.get(n)!, b.get(n)!))
}

beforeAll(async () => {
  scratch = await scratchWithTinyCheckpoint('tokens')
  baseline = await dump(fixturePath('tokens-301.json'), 'json.safetensors')
})
afterAll(() => scratch?.dispose())

describe('--tokens as a JSON array', () => {
  it('dumps input_ids I64 [301] holding exactly the array, one-shot tensors only without --split/--greedy', () => {
    expect(baseline.get('input_ids')!.shape).toEqual([301])
    expect(Array.from(viewAs(baseline.get('input_ids')!, 'I64'), Number)).toEqual(ids)
    expect([...baseline.keys()].filter((n) => !n.startsWith('oneshot.') && n !== 'input_ids')).toEqual([])
    expect(baseline.get('oneshot.logits_tail')!.shape).toEqual([64, 512])
  })
})

describe('--tokens as a safetensors file with input_ids I64', () => {
  it('the transformers reference file itself gives the same dump, bit for bit', async () => {
    expect(differences(await dump(fixturePath('ref-tiny-t301-f32.safetensors'), 'i64.safetensors'), baseline)).toEqual([])
  })
})

describe('--tokens as a safetensors file with input_ids I32 of shape [1, T]', () => {
  it('is flattened and gives the same dump, bit for bit', async () => {
    const path = join(scratch.dir, 'ids-i32.safetensors')
    await writeSafetensors(path, { input_ids: tensorFrom('I32', [1, ids.length], Int32Array.from(ids)), other: tensorFrom('F32', [1], new Float32Array(1)) })
    expect(differences(await dump(path, 'i32.safetensors'), baseline)).toEqual([])
  })
})

describe('--tokens without a .json or .safetensors extension', () => {
  it('reads JSON when the text starts with [ and safetensors otherwise', async () => {
    const json = join(scratch.dir, 'prompt.ids')
    writeFileSync(json, `  ${JSON.stringify(ids)}\n`)
    expect(differences(await dump(json, 'sniff-json.safetensors'), baseline)).toEqual([])
    const st = join(scratch.dir, 'prompt.bin')
    copyFileSync(fixturePath('ref-tiny-t301-f32.safetensors'), st)
    expect(differences(await dump(st, 'sniff-st.safetensors'), baseline)).toEqual([])
  })
})

describe('--no-attn-inputs and --force', () => {
  it('leaves out exactly the attn_input tensors, replaces an existing --out, and changes nothing else', async () => {
    const out = 'json.safetensors' // the baseline's file, replaced
    const slim = await dump(fixturePath('tokens-301.json'), out, '--no-attn-inputs', '--force')
    const dropped = [...baseline.keys()].filter((n) => !slim.has(n))
    expect(dropped.sort()).toEqual([0, 1, 2, 3].map((i) => `oneshot.layers.${i}.attn_input`))
    expect(differences(slim, new Map([...baseline].filter(([n]) => !dropped.includes(n))))).toEqual([])
    expect((await readDump(join(scratch.dir, out))).metadata.attn_inputs).toBe('no')
  })
})
