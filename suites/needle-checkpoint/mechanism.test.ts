// The needle is retrieved through the compressed caches, and only through them: empty layer 1's
// pooled entries, blind the indexer (its top-k no longer picks the needle's entries) or layer 0's
// look-back head (the value no longer knows it follows a marker) and the same document answers
// " unknown". Distractor needles and an absent key behave.
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { needleCases } from '../../harness/make-needle-cases.ts'
import { tensorFrom, type Tensor } from '../../src/formats/safetensors/index.ts'
import { DeepseekV4Engine } from '../../src/model/engine/index.ts'
import { loadTokenizer } from '../../src/model/tokenizer/index.ts'
import { NEEDLE_UNKNOWN } from '../../src/model/checkpoint/needle/words.ts'
import { answer, makeNeedle, removeDir, tempDir, variant } from './helpers.ts'

let root: string
let base: string
let unknown: number
// A needle at about 1,000 tokens (entry ~250, far outside the first top-k picks) in a 2,039-token prompt.
const mid = needleCases().find((c) => c.name === 'L2048-d0.5')!
const value = mid.ids[mid.needles[0].position]

beforeAll(async () => {
  root = tempDir('needle-mech')
  base = await makeNeedle(`${root}/base`)
  unknown = (await loadTokenizer(base)).encode(NEEDLE_UNKNOWN)[0]
})
afterAll(() => removeDir(root))

function zeroed (t: Tensor): Tensor {
  const n = t.shape.reduce((a, b) => a * b, 1)
  return tensorFrom(t.dtype, t.shape, t.dtype === 'BF16' ? new Uint16Array(n) : new Float32Array(n))
}

async function answerWith (name: string, change: (t: Map<string, Tensor>) => void): Promise<number> {
  const dir = await variant(base, `${root}/${name}`, change)
  return answer(await DeepseekV4Engine.load(dir, 'decoder'), mid.ids)
}

describe('retrieval goes through the compressed caches', () => {
  it('the intact checkpoint retrieves the mid-document needle', async () => {
    expect(answer(await DeepseekV4Engine.load(base, 'decoder'), mid.ids)).toBe(value)
  })

  it('misses when layer 1\'s pooled entries carry nothing (its compressor projects every token to zero)', async () => {
    const got = await answerWith('no-pool', (t) => { t.set('model.layers.1.self_attn.compressor.kv_proj.weight', zeroed(t.get('model.layers.1.self_attn.compressor.kv_proj.weight')!)) })
    expect(got).toBe(unknown)
  })

  it('misses when the indexer scores every entry 0 (its top-k then holds the first entries, not the needle\'s)', async () => {
    const got = await answerWith('no-indexer', (t) => { t.set('model.layers.1.self_attn.compressor.indexer.kv_norm.weight', zeroed(t.get('model.layers.1.self_attn.compressor.indexer.kv_norm.weight')!)) })
    expect(got).toBe(unknown)
  })

  it('misses when layer 0 no longer marks a value that follows a marker', async () => {
    // Head 1's sink far above any score: it attends nothing and writes no `needle` flag.
    const got = await answerWith('no-lookback', (t) => { t.set('model.layers.0.self_attn.sinks', tensorFrom('F32', [4], Float32Array.of(15, 1e4, 0, 0))) })
    expect(got).toBe(unknown)
  })
})

describe('keys', () => {
  it('answers the asked key among distractors and " unknown" for an absent key', async () => {
    const engine = await DeepseekV4Engine.load(base, 'decoder')
    const three = needleCases().find((c) => c.name === 'L4096-three-needles')!
    const asked = three.needles.find((n) => n.key === three.ask)!
    expect(answer(engine, three.ids)).toBe(three.ids[asked.position])
    const absent = needleCases().find((c) => c.name === 'L2048-absent-key')!
    expect(answer(engine, absent.ids)).toBe(unknown)
  })
})
