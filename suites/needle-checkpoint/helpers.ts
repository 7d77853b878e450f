// Shared set-up for the needle checkpoint suites: one checkpoint per file, variants with one tensor
// changed, and a greedy answer with or without a bridged prefix built by the capture hook.
import { copyFileSync, mkdirSync } from 'node:fs'
import { join } from 'node:path'
import { PoolingHook } from '../../src/capture/hook.ts'
import { loadSidecar } from '../../src/capture/index.ts'
import { writeShardedCheckpoint, type Tensor } from '../../src/formats/safetensors/index.ts'
import { makeCheckpoint, makeTensors, presetConfig } from '../../src/model/checkpoint/index.ts'
import { writeNeedleCircuit } from '../../src/model/checkpoint/needle/circuit.ts'
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
