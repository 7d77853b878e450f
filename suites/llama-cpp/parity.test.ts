// The parity triangle: llama.cpp (node-llama-cpp 3.22.1 on the CPU: f32 GGUF from export-gguf,
// f32 KV cache, flash attention off, one sequence, the prompt as one batch), our engine (f32
// profile) and transformers' fp32 model (the fixtures, made on an H200 with TF32 off). Last-64
// logits (relative error, argmax) and 12 greedy tokens, pairwise; the distances are printed.
//
// Five cases: tiny seed 1 at T = 301 (inside the compress rope's original window of 1024) and
// T = 1100 (past it, under YaRN), the transformers-made checkpoint at T = 777 (past its 512), and
// tiny seed 1 made with mirrored indexer heads (no exact top-k ties possible) at 301 and 1100.
// What is asserted is what was measured (2026-12-01, this 2-core machine):
// - ours vs transformers: every row within 1e-5 (worst 1.5e-6), argmax 64/64, greedy 12/12;
// - llama.cpp on the three checkpoints with ties: greedy 12/12 and argmax 64/64 against both, but
//   logits 1.3e-3..3.7e-3 apart over the tail, the worst row 2.4e-2; ties.test.ts shows why (its
//   CPU top-k breaks the indexer's exact-zero ties otherwise than we and transformers do);
// - on the mirrored checkpoint, without ties, all three agree: every row of every pair within 2e-5
//   (worst measured 7.6e-6, llama.cpp at T = 1100), greedy 12/12.
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { CASES, Checkpoints, distance, distanceLine, readReference, runLlamaCpp, runOurs, type Distance, type EngineRun, type Reference } from './helpers.ts'

const OURS_VS_TRANSFORMERS = 1e-5
const WITHOUT_TIES = 2e-5
// With ties (cause shown in ties.test.ts): bounds a few times above what was measured.
const WITH_TIES = { tail: 1e-2, last: 1e-3, worstRow: 5e-2 }

const checkpoints = new Checkpoints()
const runs = new Map<string, { ref: Reference, ours: EngineRun, llama: EngineRun, digest: string }>()
const table: string[] = []

beforeAll(async () => {
  for (const c of CASES) {
    const ref = await readReference(c.fixture)
    const { model, gguf, digest } = await checkpoints.get(c.checkpoint)
    const ours = await runOurs(model, ref.ids)
    const llama = await runLlamaCpp(gguf, ref.ids)
    runs.set(c.name, { ref, ours, llama, digest })
  }
})

afterAll(() => {
  console.log(`parity triangle, last ${64} positions' logits and 12 greedy tokens (relative errors; argmax and greedy agreement):\n${table.join('\n')}`)
  checkpoints.dispose()
})

function pairs (c: typeof CASES[number]): { oursHf: Distance, llamaHf: Distance, llamaOurs: Distance } {
  const { ref, ours, llama } = runs.get(c.name)!
  const d = { oursHf: distance(ours, ref, ref.vocab), llamaHf: distance(llama, ref, ref.vocab), llamaOurs: distance(llama, ours, ref.vocab) }
  if (!table.some((l) => l.includes(c.name))) {
    table.push(distanceLine(c.name, 'ours vs transformers', d.oursHf), distanceLine(c.name, 'llama.cpp vs transformers', d.llamaHf), distanceLine(c.name, 'llama.cpp vs ours', d.llamaOurs))
  }
  return d
}

describe.each(CASES)('$name', (c) => {
  it('the fixture was made from exactly this checkpoint', () => {
    const { ref, digest } = runs.get(c.name)!
    expect(ref.digest, `${c.fixture} was made from another checkpoint than the one made here now: re-make it`).toBe(digest)
  })

  it('ours vs transformers: every row within 1e-5, argmax 64/64, greedy 12/12', () => {
    const { oursHf } = pairs(c)
    expect(oursHf.worstRow).toBeLessThanOrEqual(OURS_VS_TRANSFORMERS)
    expect(oursHf.argmax).toBe(64)
    expect(oursHf.greedy).toBe(12)
  })

  it('llama.cpp vs both: the same 12 greedy tokens and argmax on all 64 rows', () => {
    const { llamaHf, llamaOurs } = pairs(c)
    expect(llamaHf.greedy).toBe(12)
    expect(llamaOurs.greedy).toBe(12)
    expect(llamaHf.argmax).toBe(64)
    expect(llamaOurs.argmax).toBe(64)
  })

  if (c.ties) {
    it('with exact indexer ties: llama.cpp\'s logits stay within the measured spread of the tie-breaking difference', () => {
      for (const d of [pairs(c).llamaHf, pairs(c).llamaOurs]) {
        expect(d.tail).toBeLessThanOrEqual(WITH_TIES.tail)
        expect(d.last).toBeLessThanOrEqual(WITH_TIES.last)
        expect(d.worstRow).toBeLessThanOrEqual(WITH_TIES.worstRow)
      }
    })
  }
  else {
    it('without ties: every row of every pair within 2e-5', () => {
      const d = pairs(c)
      for (const x of [d.oursHf, d.llamaHf, d.llamaOurs]) expect(x.worstRow).toBeLessThanOrEqual(WITHOUT_TIES)
    })
  }
})
