// The long needle (preset needle-long: the needle circuit on the long architecture, 1,048,576
// positions; docs/needle-checkpoint.md, "The long needle"): its plan, its angle budget out to the
// window, and transformers retrieving through it on CUDA (the committed proofs, harness/hf_needle.py
// with --chunk 4096) at every length from 490 to 999,975 tokens in float32 and bfloat16; our
// engine answers the short documents as transformers did.
import { readFileSync } from 'node:fs'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { caseDigest, needleCases } from '../../harness/make-needle-cases.ts'
import { checkpointDigest, makeCheckpoint, presetConfig } from '../../src/model/checkpoint/index.ts'
import { writeNeedleCircuit } from '../../src/model/checkpoint/needle/circuit.ts'
import { alignmentThreshold } from '../../src/model/checkpoint/needle/angle-budget.ts'
import { LAYER1, needlePlan } from '../../src/model/checkpoint/needle/layout.ts'
import { NEEDLE_UNKNOWN } from '../../src/model/checkpoint/needle/words.ts'
import { ropeInvFreq } from '../../src/model/rope.ts'
import { DeepseekV4Engine } from '../../src/model/engine/index.ts'
import { loadTokenizer } from '../../src/model/tokenizer/index.ts'
import { answer, expectProofPasses, removeDir, tempDir } from './helpers.ts'

const fixture = (name: string) => JSON.parse(readFileSync(new URL(`../../harness/fixtures/${name}`, import.meta.url), 'utf8'))
const grid = fixture('needle-long-proof.json')
const million = fixture('needle-long-proof-1m.json')
const GRID_LENGTHS = [512, 2048, 4096, 8192, 16384, 32768, 65536, 131072]
let gridCases: ReturnType<typeof needleCases> | undefined
const casesOfGrid = () => (gridCases ??= needleCases(GRID_LENGTHS))
let dir: string

beforeAll(async () => {
  dir = tempDir('needle-long')
  await makeCheckpoint({ preset: 'needle-long', seed: 1, out: dir, force: true })
})
afterAll(() => removeDir(dir))

describe('the long needle\'s plan', () => {
  it('keeps the tiny needle\'s pairs and unroped indexer dim, and moves to the slowest pairs where every indexer dim is roped', () => {
    expect(needlePlan(presetConfig('needle'))).toEqual({ matchPairs: LAYER1.matchPairs, indexerFlagDim: 0, indexerTextureDims: [1, 128] })
    expect(needlePlan(presetConfig('needle-long'))).toEqual({ matchPairs: [28, 29, 30, 31], indexerFlagDim: 62, indexerTextureDims: [0, 62] })
    expect(presetConfig('needle-long')).toEqual(presetConfig('long'))
  })

  it('stays aligned over the whole window: the match pairs above the threshold, the indexer flag above 0', () => {
    const cfg = presetConfig('needle-long')
    const f = ropeInvFreq(cfg.rope.compress)
    const { matchPairs } = needlePlan(cfg)
    let worst = Infinity
    let flag = Infinity
    for (let d = 0; d <= cfg.maxPositionEmbeddings; d += 64) {
      worst = Math.min(worst, matchPairs.reduce((s, j) => s + Math.cos(d * f[j]), 0) / matchPairs.length)
      flag = Math.min(flag, Math.cos(d * f[31]))
    }
    expect(worst).toBeGreaterThan(alignmentThreshold())
    expect(worst).toBeCloseTo(0.820, 3)
    expect(flag).toBeGreaterThan(0.95)
  })

  it('refuses an architecture it is not laid out for', () => {
    // The architecture is checked before any tensor is touched.
    const cfg = { ...presetConfig('long'), indexNHeads: 2 }
    expect(() => writeNeedleCircuit(cfg, 1, new Map())).toThrow(/laid out for the tiny architecture .* or the long one/)
  })
})

describe('the transformers proofs of the long needle', () => {
  it('were made from the checkpoint make-checkpoint --preset needle-long --seed 1 writes now, on the cases the harness writes now', async () => {
    const digest = await checkpointDigest(dir)
    expect(grid.checkpoint_sha256).toBe(digest)
    expect(million.checkpoint_sha256).toBe(digest)
    const names = (p: { cases: Array<{ name: string, digest: string }> }) => p.cases.map((c) => [c.name, c.digest])
    expect(names(grid)).toEqual(casesOfGrid().map((c) => [c.name, caseDigest(c)]))
    expect(names(million)).toEqual(needleCases([262144, 1_000_000], [0]).map((c) => [c.name, caseDigest(c)]))
  })

  it('record a clean load and every case retrieved in float32 and bfloat16, prefilled 4096 tokens a forward, up to 999,975 tokens', () => {
    for (const proof of [grid, million]) {
      expect(proof.chunk).toBe(4096)
      expectProofPasses(proof)
      expect(proof.resave_names_equal).toBe(true)
    }
    expect(Math.max(...million.cases.map((c: { tokens: number }) => c.tokens))).toBe(999_975)
  })

  it('our engine answers the short documents as transformers did', async () => {
    const engine = await DeepseekV4Engine.load(dir, 'decoder')
    const unknown = (await loadTokenizer(dir)).encode(NEEDLE_UNKNOWN)[0]
    const cases = casesOfGrid().filter((c) => c.ids.length <= 2100 || c.name === 'L4096-three-needles')
    expect(cases.length).toBe(8)
    for (const c of cases) {
      const asked = c.needles.find((n) => n.key === c.ask)
      const got = answer(engine, c.ids)
      expect(got, c.name).toBe(asked === undefined ? unknown : c.ids[asked.position])
      expect(got, c.name).toBe(grid.cases.find((p: { name: string }) => p.name === c.name).bfloat16.greedy[0])
    }
  })
})
