// Shared helpers of the capture and bit-exact suites: the tiny seed-1 checkpoint (the run's shared one),
// the fixture prompt, the engine's own attention inputs, and bit-for-bit comparison of dumps.
import { mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { loadCheckpoint, type LoadedCheckpoint } from '../../src/model/checkpoint/index.ts'
import type { DeepseekV4Engine, DumpTensor, ModelCache } from '../../src/model/engine/index.ts'
import { tinyCheckpoint } from '../support/checkpoints.ts'

/** A fresh temp dir for the test's own files, and the tiny seed-1 checkpoint, loaded, with a cleanup. */
export interface TinySetup {
  root: string
  /** The run's shared checkpoint (suites/support/checkpoints.ts): read it, never write into it. */
  ckptDir: string
  ckpt: LoadedCheckpoint
  dispose: () => void
}

/** A fresh temp dir and the shared tiny seed-1 checkpoint, loaded (once per test file). */
export async function tinySetup (label: string): Promise<TinySetup> {
  const root = mkdtempSync(join(tmpdir(), `pd-bridge-${label}-`))
  const ckptDir = tinyCheckpoint()
  const ckpt = await loadCheckpoint(ckptDir)
  return { root, ckptDir, ckpt, dispose: () => rmSync(root, { recursive: true, force: true }) }
}

/** The first n ids of harness/fixtures/tokens-1100.json (seeded ordinary-token ids, vocab 512). */
export function fixtureTokens (n: number): number[] {
  const ids = JSON.parse(readFileSync(new URL('../../harness/fixtures/tokens-1100.json', import.meta.url), 'utf8')) as number[]
  if (n > ids.length) throw new Error(`only ${ids.length} fixture tokens, asked for ${n}`)
  return ids.slice(0, n)
}

/** The native forward's cache and each layer's attention inputs [T, hidden], concatenated over chunks. */
export function nativeRun (engine: DeepseekV4Engine, tokens: number[], maxChunk?: number): { cache: ModelCache, inputs: Float32Array[] } {
  const layers = engine.config.numHiddenLayers
  const hidden = engine.config.hiddenSize
  const inputs = Array.from({ length: layers }, () => new Float32Array(tokens.length * hidden))
  const cache = engine.newCache()
  engine.prefill(tokens, cache, {
    logits: 'none',
    maxChunk,
    attnInputHook: (layer, start, rows, count) => inputs[layer].set(rows.subarray(0, count * hidden), start * hidden),
  })
  return { cache, inputs }
}

/** The outcome of a bit comparison of two dumps. */
export interface BitComparison {
  total: number
  identical: number
  /** `name: why` for each tensor that differs (or exists on one side only). */
  differing: string[]
}

function bytesOf (t: DumpTensor): Uint8Array {
  return new Uint8Array(t.data.buffer, t.data.byteOffset, t.data.byteLength)
}

/** Compare two dumps tensor by tensor: same names, dtypes, shapes and bytes (float bits, not values). */
export function compareBits (ours: ReadonlyMap<string, DumpTensor>, ref: ReadonlyMap<string, DumpTensor>): BitComparison {
  const names = new Set([...ours.keys(), ...ref.keys()])
  const differing: string[] = []
  for (const name of names) {
    const a = ours.get(name)
    const b = ref.get(name)
    if (a === undefined || b === undefined) {
      differing.push(`${name}: only in ${a === undefined ? 'the reference' : 'ours'}`)
      continue
    }
    if (a.dtype !== b.dtype || a.shape.join(',') !== b.shape.join(',')) {
      differing.push(`${name}: ${a.dtype} [${a.shape}] vs ${b.dtype} [${b.shape}]`)
      continue
    }
    const x = bytesOf(a)
    const y = bytesOf(b)
    let at = -1
    for (let i = 0; i < x.length; i++) {
      if (x[i] !== y[i]) {
        at = i
        break
      }
    }
    if (at >= 0) differing.push(`${name}: first differing byte ${at}`)
  }
  return { total: names.size, identical: names.size - differing.length, differing }
}

/** A small seeded generator in [0, 1) (LCG; for reproducible chunkings). */
export function seeded (seed: number): () => number {
  let s = seed >>> 0
  return () => {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0
    return s / 2 ** 32
  }
}

/**
 * Replay recorded attention inputs [T, hidden] per layer into a hook in a forward's order: chunks of
 * `chunk` tokens, each through layers 0..L-1 (what engine.prefill with maxChunk = chunk calls).
 */
export function replay (inputs: Float32Array[], hidden: number, chunk: number, hook: (layer: number, start: number, rows: Float32Array, count: number) => void): void {
  const tokens = inputs[0].length / hidden
  for (let c0 = 0; c0 < tokens; c0 += chunk) {
    const c1 = Math.min(tokens, c0 + chunk)
    inputs.forEach((x, layer) => hook(layer, c0, x.subarray(c0 * hidden, c1 * hidden), c1 - c0))
  }
}
