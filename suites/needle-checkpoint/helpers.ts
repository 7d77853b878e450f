// Shared set-up for the needle checkpoint suites: one checkpoint per file, variants with one tensor
// changed, and a greedy answer with or without a bridged prefix built by the capture hook.
import { copyFileSync, mkdirSync } from 'node:fs'
import { join } from 'node:path'
import { PoolingHook } from '../../src/capture/hook.ts'
import { loadSidecar } from '../../src/capture/index.ts'
import { writeShardedCheckpoint, type Tensor } from '../../src/formats/safetensors/index.ts'
import { makeCheckpoint, makeTensors, presetConfig } from '../../src/model/checkpoint/index.ts'
import { writeNeedleCircuit } from '../../src/model/checkpoint/needle/circuit.ts'
import { expect } from 'vitest'
import { DeepseekV4Engine } from '../../src/model/engine/index.ts'

export { removeDir, tempDir } from '../checkpoint/helpers.ts'

const SIDE_FILES = ['config.json', 'generation_config.json', 'tokenizer.json', 'tokenizer_config.json', 'special_tokens_map.json']

/** The needle checkpoint (seed 1, the embedded default's) with `change` applied to its tensors, written next to `base`'s side files. */
export async function variant (base: string, out: string, change: (t: Map<string, Tensor>) => void): Promise<string> {
  mkdirSync(out, { recursive: true })
  for (const f of SIDE_FILES) copyFileSync(join(base, f), join(out, f))
  const cfg = presetConfig('needle')
  const tensors = makeTensors(cfg, 1)
  writeNeedleCircuit(cfg, 1, tensors)
  change(tensors)
  await writeShardedCheckpoint(out, tensors, { metadata: { format: 'pt' } })
  return out
}

/** Make the seed-1 needle checkpoint (the embedded default's seed). */
export async function makeNeedle (dir: string): Promise<string> {
  await makeCheckpoint({ preset: 'needle', seed: 1, out: dir, force: true })
  return dir
}

/** The greedy next token after `ids`. */
export function answer (engine: DeepseekV4Engine, ids: readonly number[]): number {
  return engine.greedy(ids, 1)[0]
}

/**
 * The greedy next token when the first `bridged` tokens' caches come from the capture hook built
 * from `sidecarDir` (fed the decoder's own attention inputs, as the bridge is), and the decoder
 * prefills only the rest.
 */
export async function bridgedAnswer (engine: DeepseekV4Engine, sidecarDir: string, ids: readonly number[], bridged: number): Promise<number> {
  const sidecar = await loadSidecar(sidecarDir)
  const hook = new PoolingHook(sidecar.kvPath)
  engine.prefill(ids.slice(0, bridged), engine.newCache(), { logits: 'none', attnInputHook: (layer, start, rows, count) => hook.feed(layer, start, rows, count) })
  const cache = hook.toModelCache()
  const logits = engine.prefill(ids.slice(bridged), cache, { logits: 'last' }).logits!
  let best = 0
  for (let i = 1; i < logits.length; i++) if (logits[i] > logits[best]) best = i
  return best
}

/** A transformers needle proof (harness/hf_needle.py) that loaded cleanly and passed every case in float32 and bfloat16 by a wide margin. */
export function expectProofPasses (proof: { transformers: string, loading_info: unknown, values_differing_from_file: unknown, all_pass: boolean, cases: Array<Record<string, any>> }): void {
  expect(proof.transformers).toBe('5.17.0')
  expect(proof.loading_info).toEqual({ missing_keys: [], unexpected_keys: [], mismatched_keys: [], error_msgs: [] })
  expect(proof.values_differing_from_file).toEqual([])
  for (const c of proof.cases) {
    expect(c.tokenizer_ids_equal, c.name).toBe(true)
    for (const dtype of ['float32', 'bfloat16']) {
      expect(c[dtype].greedy, `${c.name} ${dtype}`).toEqual(c.expected)
      // The answer wins by a wide margin, not by rounding luck.
      expect(c[dtype].margin, `${c.name} ${dtype}`).toBeGreaterThan(10)
    }
  }
  expect(proof.all_pass).toBe(true)
}
