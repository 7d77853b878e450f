// The needle checkpoint retrieves by its own forward, in transformers on CUDA (the committed proof,
// harness/hf_needle.py) and in our engine, on the same documents: a depth x length grid up to 8,192
// tokens, three needles with distractors, and a question whose key is absent.
import { readFileSync } from 'node:fs'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { caseDigest, needleCases, type NeedleCase } from '../../harness/make-needle-cases.ts'
import { checkpointDigest } from '../../src/model/checkpoint/index.ts'
import { DeepseekV4Engine } from '../../src/model/engine/index.ts'
import { loadTokenizer } from '../../src/model/tokenizer/index.ts'
import { needleVocabulary, NEEDLE_UNKNOWN } from '../../src/model/checkpoint/needle/words.ts'
import { answer, expectProofPasses, makeNeedle, removeDir, tempDir } from './helpers.ts'

const proof = JSON.parse(readFileSync(new URL('../../harness/fixtures/needle-proof.json', import.meta.url), 'utf8'))
const cases = needleCases()
let dir: string

beforeAll(async () => { dir = await makeNeedle(tempDir('needle')) })
afterAll(() => removeDir(dir))

function expectedToken (c: NeedleCase, unknown: number): number {
  const asked = c.needles.find((n) => n.key === c.ask)
  return asked === undefined ? unknown : c.ids[asked.position]
}

describe('the transformers needle proof', () => {
  it('was made from the checkpoint make-checkpoint --preset needle --seed 1 writes now, on the cases the harness writes now', async () => {
    expect(await checkpointDigest(dir)).toBe(proof.checkpoint_sha256)
    expect(proof.cases.map((c: { name: string, digest: string }) => [c.name, c.digest])).toEqual(cases.map((c) => [c.name, caseDigest(c)]))
  })

  it('records a clean load and every case retrieved in float32 and bfloat16, with Hugging Face token ids equal to ours', () => {
    expectProofPasses(proof)
    expect(proof.resave_names_equal).toBe(true)
    expect(Math.max(...proof.cases.map((c: { tokens: number }) => c.tokens))).toBeGreaterThan(8000)
  })
})

describe('the needle tokenizer', () => {
  it('has every needle string as one ordinary (non-special) token that decodes to itself', async () => {
    const tok = await loadTokenizer(dir)
    for (const text of needleVocabulary()) {
      const ids = tok.encode(text)
      expect(ids, text).toHaveLength(1)
      expect(tok.isSpecial(ids[0])).toBe(false)
      expect(tok.decode(ids, { skipSpecialTokens: true })).toBe(text)
    }
  })
})

describe('our engine on the proof\'s documents', () => {
  const small = cases.filter((c) => c.ids.length <= 2100 || c.name === 'L4096-three-needles')
  for (const profile of ['decoder', 'f32'] as const) {
    it(`answers as transformers did (${profile} profile): the asked value, or${NEEDLE_UNKNOWN} when the key is absent`, async () => {
      const engine = await DeepseekV4Engine.load(dir, profile)
      const unknown = (await loadTokenizer(dir)).encode(NEEDLE_UNKNOWN)[0]
      const run = profile === 'f32' ? small.filter((c) => c.ids.length < 600 || c.name.includes('absent')) : small
      for (const c of run) {
        const got = answer(engine, c.ids)
        expect(got, c.name).toBe(expectedToken(c, unknown))
        expect(got, c.name).toBe(proof.cases.find((p: { name: string }) => p.name === c.name)[profile === 'f32' ? 'float32' : 'bfloat16'].greedy[0])
      }
    })
  }
})
