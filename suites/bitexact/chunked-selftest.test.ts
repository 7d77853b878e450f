// Chunked == one-shot (ARCHITECTURE.md section 7, check 2) for the capture hook, in every profile:
// fed the same attention inputs in chunks of any size and alignment (1-token chunks, seeded random
// chunkings, and per-layer chunkings interleaved across layers in random order), the hook ends
// with the same bits as when it is fed each layer in one piece. The one-shot hook is itself checked
// against the engine's native cache in each profile, so every chunking equals native too.
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { join } from 'node:path'
import { exportWeights, PoolingHook, type Sidecar } from '../../src/capture/index.ts'
import type { DumpTensor } from '../../src/model/engine/index.ts'
import { DeepseekV4Engine } from '../../src/model/engine/index.ts'
import { compareBits, fixtureTokens, nativeRun, seeded, tinySetup, type TinySetup } from '../capture/helpers.ts'

const PROFILES = ['f32', 'hf-bf16', 'decoder', 'prefill', 'decoder+refquant']
const T = 700

let setup: TinySetup
const runs = new Map<string, { sidecar: Sidecar, inputs: Float32Array[], native: Map<string, DumpTensor> }>()

beforeAll(async () => {
  setup = await tinySetup('selftest')
  const tokens = fixtureTokens(T)
  for (const profile of PROFILES) {
    const sidecar = await exportWeights({ model: setup.ckptDir, profile, out: join(setup.root, `sidecar-${profile}`) })
    const run = nativeRun(DeepseekV4Engine.fromCheckpoint(setup.ckpt, profile), tokens)
    runs.set(profile, { sidecar, inputs: run.inputs, native: run.cache.tensors('c') })
  }
})
afterAll(() => setup.dispose())

/** Chunk boundaries [0, ..., T] from a size generator. */
function boundaries (size: () => number): number[] {
  const b = [0]
  while (b[b.length - 1] < T) b.push(Math.min(T, b[b.length - 1] + size()))
  return b
}

/** Sizes mixing 1..5 and 1..300, so chunks straddle window boundaries at every alignment. */
function randomSizes (seed: number): () => number {
  const r = seeded(seed)
  return () => r() < 0.5 ? 1 + Math.floor(r() * 5) : 1 + Math.floor(r() * 300)
}

/** Feed every layer along the same boundaries, chunk by chunk through the layers (an engine's order). */
function feedRoundRobin (sidecar: Sidecar, inputs: Float32Array[], b: number[]): Map<string, DumpTensor> {
  const hook = new PoolingHook(sidecar.kvPath)
  const hidden = sidecar.hiddenSize
  for (let k = 0; k + 1 < b.length; k++) {
    inputs.forEach((x, layer) => hook.feed(layer, b[k], x.subarray(b[k] * hidden, b[k + 1] * hidden), b[k + 1] - b[k]))
  }
  return hook.tensors('c')
}

/** Each layer along its own boundaries; at each step a random unfinished layer takes its next chunk. */
function feedInterleaved (sidecar: Sidecar, inputs: Float32Array[], seed: number): Map<string, DumpTensor> {
  const hook = new PoolingHook(sidecar.kvPath)
  const hidden = sidecar.hiddenSize
  const plans = inputs.map((_, layer) => boundaries(randomSizes(seed * 31 + layer)))
  const next = inputs.map(() => 0)
  const pick = seeded(seed)
  for (;;) {
    const open = next.flatMap((k, layer) => k + 1 < plans[layer].length ? [layer] : [])
    if (open.length === 0) break
    const layer = open[Math.floor(pick() * open.length)]
    const b = plans[layer]
    const k = next[layer]++
    hook.feed(layer, b[k], inputs[layer].subarray(b[k] * hidden, b[k + 1] * hidden), b[k + 1] - b[k])
  }
  return hook.tensors('c')
}

describe('chunked == one-shot for the capture hook, every profile', () => {
  it.each(PROFILES)('%s: one-shot equals native, and every chunking equals one-shot bit for bit', (profile) => {
    const { sidecar, inputs, native } = runs.get(profile)!
    const oneShot = feedRoundRobin(sidecar, inputs, [0, T])
    expect(compareBits(oneShot, native).differing).toEqual([])
    const chunkings: Array<[string, () => Map<string, DumpTensor>]> = [
      ['1-token chunks', () => feedRoundRobin(sidecar, inputs, boundaries(() => 1))],
      ...[1, 2, 3, 4, 5, 6].map((seed): [string, () => Map<string, DumpTensor>] => [`random chunking ${seed}`, () => feedRoundRobin(sidecar, inputs, boundaries(randomSizes(seed)))]),
      ...[7, 8].map((seed): [string, () => Map<string, DumpTensor>] => [`per-layer chunking ${seed}, interleaved`, () => feedInterleaved(sidecar, inputs, seed)]),
    ]
    let agreeing = 0
    for (const [what, run] of chunkings) {
      const result = compareBits(run(), oneShot)
      expect(result.differing, `${profile}, ${what}`).toEqual([])
      if (result.differing.length === 0) agreeing++
    }
    console.log(`hook selftest, ${profile}, T=${T}: ${agreeing}/${chunkings.length} chunkings bit-identical to one-shot (${oneShot.size} tensors each); one-shot == native`)
  })
})
