// The f32 profile against transformers' fp32 DeepseekV4ForCausalLM (harness/fixtures, made on a
// CUDA machine with TF32 off): attention inputs, every cache tensor, logits and greedy tokens.
// Tolerance: relative error ||ours - ref|| / ||ref|| <= 1e-5 per tensor. Both sides are fp32 but
// sum in different orders (our 8-lane kernel order, cuBLAS's own) and use different exp/rsqrt
// implementations, so bit equality is impossible; measured errors are ~1e-6 or below.
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { viewAs } from '../../src/formats/safetensors/index.ts'
import { DeepseekV4Engine, type ModelCache } from '../../src/model/engine/index.ts'
import { argmaxRow, readFixture, relError, staleMessage, tinyCheckpoint, type Fixture } from './helpers.ts'

const TOLERANCE = 1e-5

interface Run {
  fx: Fixture
  oneshot: ModelCache
  oneshotInputs: Float32Array[]
  logitsTail: Float32Array
  chunked: ModelCache
  chunkedInputs: Float32Array[]
  logitsLast: Float32Array
  greedy: number[]
}

let dispose = () => {}
let digest = ''
const runs = new Map<string, Run>()

function concat (parts: Float32Array[]): Float32Array {
  const out = new Float32Array(parts.reduce((a, p) => a + p.length, 0))
  let o = 0
  for (const p of parts) {
    out.set(p, o)
    o += p.length
  }
  return out
}

async function run (engine: DeepseekV4Engine, name: string): Promise<Run> {
  const fx = await readFixture(name)
  const layers = engine.config.numHiddenLayers
  const collect = () => {
    const parts: Float32Array[][] = Array.from({ length: layers }, () => [])
    return { parts, hook: (layer: number, _start: number, rows: Float32Array) => { parts[layer].push(rows.slice()) } }
  }
  const a = collect()
  const oneshot = engine.newCache()
  const tail = engine.prefill(fx.ids, oneshot, { logits: { tail: 64 }, attnInputHook: a.hook })
  const b = collect()
  const chunked = engine.newCache()
  engine.prefill(fx.ids.slice(0, fx.split), chunked, { attnInputHook: b.hook, logits: 'none' })
  const last = engine.prefill(fx.ids.slice(fx.split), chunked, { attnInputHook: b.hook })
  return {
    fx, oneshot, oneshotInputs: a.parts.map(concat), logitsTail: tail.logits, chunked, chunkedInputs: b.parts.map(concat),
    logitsLast: last.logits, greedy: engine.greedy(fx.ids, fx.greedy.length),
  }
}

beforeAll(async () => {
  const made = await tinyCheckpoint()
  dispose = made.dispose
  digest = made.digest
  const engine = DeepseekV4Engine.fromCheckpoint(made.ckpt, 'f32')
  for (const name of ['ref-tiny-t301-f32', 'ref-tiny-t1100-f32']) runs.set(name, await run(engine, name))
})
afterAll(() => dispose())

function checkCaches (r: Run, prefix: 'oneshot' | 'chunked'): Array<[string, number]> {
  const cache = prefix === 'oneshot' ? r.oneshot : r.chunked
  const ours = cache.tensors(prefix)
  const theirs = [...r.fx.tensors.keys()].filter((n) => n.startsWith(`${prefix}.layers.`) && !n.endsWith('.attn_input'))
  expect([...ours.keys()].sort()).toEqual(theirs.sort())
  const errors: Array<[string, number]> = []
  for (const [name, t] of ours) {
    const ref = r.fx.tensors.get(name)!
    expect(t.shape, name).toEqual(ref.shape)
    if (t.dtype === 'I64') {
      expect(t.data[0], name).toBe(viewAs(ref, 'I64')[0])
      continue
    }
    if (t.data.length === 0) continue
    errors.push([name, relError(t.data, r.fx.f32(name))])
  }
  console.log(`${r.fx.metadata.tokens} tokens, ${prefix} caches vs transformers fp32 (relative error):\n` +
    errors.map(([n, e]) => `  ${n.padEnd(48)} ${e.toExponential(2)}`).join('\n'))
  for (const [name, e] of errors) expect(e, name).toBeLessThanOrEqual(TOLERANCE)
  return errors
}

describe('the fixtures describe the checkpoint make-checkpoint writes today', () => {
  it('records the digest of a fresh tiny seed-1 checkpoint', () => {
    for (const [name, r] of runs) expect(r.fx.metadata.checkpoint_sha256, staleMessage(name)).toBe(digest)
  })
})

describe('f32 attention inputs match transformers fp32 (T = 301)', () => {
  it('every layer, one-shot and chunked at 130, within 1e-5', () => {
    const r = runs.get('ref-tiny-t301-f32')!
    const lines: string[] = []
    for (const prefix of ['oneshot', 'chunked'] as const) {
      const inputs = prefix === 'oneshot' ? r.oneshotInputs : r.chunkedInputs
      inputs.forEach((x, layer) => {
        const e = relError(x, r.fx.f32(`${prefix}.layers.${layer}.attn_input`))
        lines.push(`  ${prefix}.layers.${layer}.attn_input ${e.toExponential(2)}`)
        expect(e, `${prefix} layer ${layer}`).toBeLessThanOrEqual(TOLERANCE)
      })
    }
    console.log('attention inputs vs transformers fp32:\n' + lines.join('\n'))
  })
})

describe('f32 caches after a one-shot prefill match transformers fp32', () => {
  it('T = 301: every tensor, same names and shapes, within 1e-5', () => {
    checkCaches(runs.get('ref-tiny-t301-f32')!, 'oneshot')
  })
  it('T = 1100 (past the original YaRN window): every tensor within 1e-5', () => {
    checkCaches(runs.get('ref-tiny-t1100-f32')!, 'oneshot')
  })
})

describe('f32 caches after a two-chunk prefill match transformers fp32', () => {
  it('T = 301 split at 130: every tensor within 1e-5', () => {
    checkCaches(runs.get('ref-tiny-t301-f32')!, 'chunked')
  })
  it('T = 1100 split at 1030: every tensor within 1e-5', () => {
    checkCaches(runs.get('ref-tiny-t1100-f32')!, 'chunked')
  })
})

describe('f32 logits match transformers fp32', () => {
  it('the last 64 positions of the one-shot prefill and the last of the chunked one, within 1e-5, same argmax', () => {
    for (const [name, r] of runs) {
      const tail = relError(r.logitsTail, r.fx.f32('oneshot.logits_tail'))
      const last = relError(r.logitsLast, r.fx.f32('chunked.logits_last'))
      console.log(`${name}: logits_tail ${tail.toExponential(2)}, chunked logits_last ${last.toExponential(2)}`)
      expect(tail, name).toBeLessThanOrEqual(TOLERANCE)
      expect(last, name).toBeLessThanOrEqual(TOLERANCE)
      const vocab = r.logitsLast.length
      const ref = r.fx.f32('oneshot.logits_tail')
      for (let row = 0; row < 64; row++) expect(argmaxRow(r.logitsTail, row, vocab), `${name} row ${row}`).toBe(argmaxRow(ref, row, vocab))
    }
  })
})

describe('f32 greedy decoding matches transformers fp32', () => {
  it('the same 12 tokens after the 301- and 1100-token prompts', () => {
    for (const [name, r] of runs) expect(r.greedy, name).toEqual(r.fx.greedy)
  })
})
