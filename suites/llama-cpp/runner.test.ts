// The node-llama-cpp wrapper: the prebuilt CPU binary loads (never built or downloaded), a GGUF
// llama.cpp refuses gets llama.cpp's own reason in one line, evaluation is deterministic, and a
// prompt fed in two pieces gives what one piece gives (to the tolerance of llama.cpp's batching).
import { mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { parseGguf, writeGgufFile } from '../../src/formats/gguf/index.ts'
import { LlamaCppModel, NODE_LLAMA_CPP_VERSION } from '../../src/engines/llama-cpp/runner.ts'
import { makeCheckpoint } from '../../src/model/checkpoint/index.ts'
import { exportGguf } from '../../src/model/gguf/index.ts'
import { relError, repoPath } from './helpers.ts'

let scratch: string
let model: LlamaCppModel
const ids = Array.from({ length: 200 }, (_, i) => 5 + ((i * 37) % 500))
beforeAll(async () => {
  scratch = mkdtempSync(join(tmpdir(), 'pd-bridge-llama-runner-'))
  await makeCheckpoint({ preset: 'tiny', seed: 1, out: join(scratch, 'tiny') })
  await exportGguf({ model: join(scratch, 'tiny'), out: join(scratch, 'tiny.gguf') })
  model = await LlamaCppModel.load(join(scratch, 'tiny.gguf'))
})
afterAll(async () => {
  await model?.dispose()
  rmSync(scratch, { recursive: true, force: true })
})

describe('node-llama-cpp', () => {
  it(`is pinned to ${NODE_LLAMA_CPP_VERSION} in package.json`, () => {
    const pkg = JSON.parse(readFileSync(repoPath('package.json'), 'utf8')) as { dependencies: Record<string, string> }
    expect(pkg.dependencies['node-llama-cpp']).toBe(NODE_LLAMA_CPP_VERSION)
  })

  it('a GGUF the deepseek4 loader refuses: one error with llama.cpp\'s reason', async () => {
    const g = parseGguf(readFileSync(join(scratch, 'tiny.gguf')))
    g.metadata.set('deepseek4.expert_gating_func', { type: 'UINT32', value: 1 })
    const bad = join(scratch, 'bad.gguf')
    await writeGgufFile(bad, { metadata: g.metadata, tensors: g.tensors })
    await expect(LlamaCppModel.load(bad)).rejects.toThrow(`${bad}: llama.cpp could not load it: llama_model_load: error loading model: error loading model hyperparameters: DeepSeek-V4 loader currently expects sqrtsoftplus MoE scoring`)
  })

  it('the same evaluation twice gives the same bits; in two pieces (150 + 50) the same logits within 1e-5 (bit-identical on this machine)', async () => {
    const run = async (pieces: number[][]) => {
      const s = await model.session({ contextSize: 256 })
      try {
        let last: Float32Array = new Float32Array()
        for (const p of pieces) last = (await s.evaluate(p, 8)).logits
        return last
      }
      finally {
        await s.dispose()
      }
    }
    const a = await run([ids])
    const b = await run([ids])
    expect(Buffer.compare(Buffer.from(a.buffer), Buffer.from(b.buffer))).toBe(0)
    const c = await run([ids.slice(0, 150), ids.slice(150)])
    const error = relError(c, a)
    console.log(`llama.cpp, 200 tokens in one batch vs 150 + 50: last-8 logits relative error ${error.toExponential(2)}`)
    expect(error).toBeLessThanOrEqual(1e-5)
  })

  it('evaluate refuses an empty prompt', async () => {
    const s = await model.session({ contextSize: 64 })
    try {
      await expect(s.evaluate([])).rejects.toThrow('llama.cpp evaluate: no tokens')
    }
    finally {
      await s.dispose()
    }
  })
})
