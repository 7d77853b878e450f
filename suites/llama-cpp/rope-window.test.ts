// An independent check of our rope above the native window (issue #15, item 5): the needle preset
// bridged into llama.cpp. llama.cpp computes its rope from the GGUF's keys with its own code, so a
// table wrong on our side everywhere (a global YaRN factor error: it passes the window gate and our
// needle protocol, because both of our legs share it) must show here. A 8,192-token needle document
// (8x the compress rope's original window of 1,024): our f32 engine's cache as llama.cpp's sequence
// state, restored, the question's last token evaluated, 6 greedy tokens; against llama.cpp's own
// prefill of the same ids. Then the same with the compress rope's YaRN factor doubled in a copy of
// the config our engine computes the cache with: the restored state's logits must move well outside
// the true case's distance. (The needle's answer survives that error: the handcrafted circuit has an
// angle budget, docs/needle-checkpoint.md, so the answer alone could not tell.) The error's effect
// grows with position: measured 1.29e-6 (true) vs 8.8e-6 (x2) here at 8,162 tokens, and 7.8e-7 vs
// 1.28e-2 at 16,372 (a run by hand; 16K costs two minutes more than this suite's budget allows).
import { writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { LlamaCppModel } from '../../src/engines/llama-cpp/runner.ts'
import { buildLlamaCppState, ourCacheOf, readCheckedState, serializeLlamaCppState, stateGeometry } from '../../src/engines/llama-cpp/state/index.ts'
import { loadCheckpoint, makeCheckpoint, type LoadedCheckpoint } from '../../src/model/checkpoint/index.ts'
import type { DeepseekV4Config } from '../../src/model/config.ts'
import { DeepseekV4Engine } from '../../src/model/engine/index.ts'
import { exportGguf } from '../../src/model/gguf/export.ts'
import { loadTokenizer } from '../../src/model/tokenizer/index.ts'
import { buildNeedleDocument, NEEDLE_VALUES, type NeedleDocument } from '../../verify/needle/index.ts'
import { Checkpoints, relError } from './helpers.ts'

const TOKENS = 8192
const GREEDY = 6
/**
 * Tail-logit distance allowed between our restored state and llama.cpp's own prefill: measured
 * 1.29e-6 with the true rope, 8.8e-6 with the YaRN factor error (both sides deterministic: the same
 * ids, code and thread count give the same numbers). The check is this bound.
 */
const SAME_ROPE = 4e-6

const scratch = new Checkpoints()
let ckpt: LoadedCheckpoint
let llama: LlamaCppModel
let doc: NeedleDocument
let ids: number[]
let native: { last: Float32Array, greedy: number[] }
const printed: string[] = []

function ctx () {
  return { contextSize: ids.length + GREEDY + 8, kvCacheType: 'F32' as const, flashAttention: false, threads: 2 }
}

/** Our cache of all but the last prompt token, as llama.cpp's state, restored; the last token and the greedy picks. */
async function bridged (config: DeepseekV4Config, label: string): Promise<{ last: Float32Array, greedy: number[] }> {
  const engine = DeepseekV4Engine.fromCheckpoint({ ...ckpt, config }, 'f32')
  const T = ids.length - 1
  const cache = engine.newCache()
  engine.prefill(ids.slice(0, T), cache, { logits: 'none' })
  const g = stateGeometry(engine.config, { kvCacheType: 'F32', flashAttention: false })
  const file = join(scratch.dir, `${label}.state`)
  writeFileSync(file, serializeLlamaCppState(buildLlamaCppState(g, ourCacheOf(cache, ids.slice(0, T), (n) => ckpt.weights.f32(n)))))
  const s = await llama.session(ctx())
  try {
    await s.loadState(file, (b) => readCheckedState(b, g, file))
    const { logits } = await s.evaluate(ids.slice(T), 1)
    const last = logits.slice()
    return { last, greedy: await s.greedy(logits, GREEDY) }
  }
  finally {
    await s.dispose()
  }
}

beforeAll(async () => {
  const model = join(scratch.dir, 'needle')
  await makeCheckpoint({ preset: 'needle', seed: 1, out: model })
  const gguf = join(scratch.dir, 'needle.gguf')
  await exportGguf({ model, out: gguf, type: 'f32' })
  ckpt = await loadCheckpoint(model)
  const tokenizer = await loadTokenizer(model)
  doc = buildNeedleDocument({ seed: 20261202, targetTokens: TOKENS, needles: [{ key: 0, value: NEEDLE_VALUES[3], depth: 0.5 }], ask: 0, tokenizer })
  ids = doc.tokens ?? []
  llama = await LlamaCppModel.load(gguf)
  const s = await llama.session(ctx())
  try {
    const { logits } = await s.evaluate(ids, 1)
    native = { last: logits.slice(), greedy: await s.greedy(logits, GREEDY) }
  }
  finally {
    await s.dispose()
  }
})

afterAll(async () => {
  console.log(`needle into llama.cpp above the native window (${ids?.length} tokens, compress rope YaRN original ${ckpt?.config.rope.compress.originalMaxPositionEmbeddings}):\n${printed.join('\n')}`)
  await llama?.dispose()
  scratch.dispose()
})

describe('our rope above the native window, checked by llama.cpp\'s', () => {
  it('restored from our cache, llama.cpp answers as from its own prefill: same greedy tokens (the needle), tail logits within 4e-6', async () => {
    expect(ids.length).toBeGreaterThan(4 * (ckpt.config.rope.compress.originalMaxPositionEmbeddings ?? 0))
    const ours = await bridged(ckpt.config, 'true-rope')
    const d = relError(ours.last, native.last)
    printed.push(`  true rope: tail logits ${d.toExponential(3)} from llama.cpp's own; greedy ${JSON.stringify(llama.detokenize(ours.greedy, true))} | native ${JSON.stringify(llama.detokenize(native.greedy, true))}; expected ${doc.expected}`)
    expect(ours.greedy).toEqual(native.greedy)
    expect(llama.detokenize(native.greedy, true)).toContain(doc.expected)
    expect(d).toBeLessThan(SAME_ROPE)
  })

  it('a global YaRN factor error on our side (x2, the compress rope) fails that check, though the needle is still found', async () => {
    const c = ckpt.config
    const wrong: DeepseekV4Config = { ...c, rope: { ...c.rope, compress: { ...c.rope.compress, factor: c.rope.compress.factor * 2 } } }
    const ours = await bridged(wrong, 'factor-x2')
    const d = relError(ours.last, native.last)
    printed.push(`  YaRN factor x2: tail logits ${d.toExponential(3)} from llama.cpp's own; greedy ${JSON.stringify(llama.detokenize(ours.greedy, true))}`)
    expect(d).toBeGreaterThan(SAME_ROPE)
  })
})
