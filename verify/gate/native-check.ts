// Bridge vs native above the native window. The decoder (its config.json and weights, under its
// profile) prefills a fresh-seed prompt that runs past original_max_position_embeddings; the
// capture hook, built from the sidecar alone, is fed the very attention inputs the decoder
// computed; every cache array the hook ends with must equal the decoder's own, bit for bit
// ("N/N bit-exact"). A stale sidecar fails here even when each of its raw keys looks plausible:
// its rope table rotates the window rows and pooled entries differently from the decoder's.
import { randomInt } from 'node:crypto'
import { loadSidecar } from '../../src/capture/sidecar.ts'
import { PoolingHook } from '../../src/capture/hook.ts'
import { PdBridgeError } from '../../src/errors.ts'
import { loadCheckpoint } from '../../src/model/checkpoint/index.ts'
import { DeepseekV4Engine, type DumpTensor } from '../../src/model/engine/index.ts'
import type { NumericsProfile } from '../../src/model/profiles/index.ts'
import { startProgress, type ProgressOptions } from '../../src/progress/index.ts'
import { fmt } from './finding.ts'

/** What to run. */
export interface NativeCheckOptions {
  sidecarDir: string
  /** The decoder's checkpoint directory (config.json and weights). */
  decoderModelDir: string
  /** The decoder's numerics profile. */
  profile: string | NumericsProfile
  /** Prompt length; must be past the native window to mean anything (the gate sees to that). */
  tokens: number
  /** Prompt seed; a fresh random one when absent. */
  seed?: number
  /**
   * Progress of the decoder's prefill on stderr (src/progress: a live line on a terminal, JSON
   * lines elsewhere once it runs past 5 s), ticked per layer and chunk; `false` for none.
   */
  progress?: false | Pick<ProgressOptions, 'stream' | 'now' | 'mode' | 'intervalMs' | 'redrawMs' | 'env'>
}

/** One cache array that differs. */
export interface ArrayDifference {
  name: string
  detail: string
}

/** The outcome: how many arrays were compared and which differ. */
export interface NativeCheckResult {
  tokens: number
  seed: number
  total: number
  identical: number
  differing: ArrayDifference[]
  /** "N/N bit-exact". */
  summary: string
}

/** `count` token ids in [0, vocab) from `seed` (xorshift32; the same seed gives the same prompt). */
export function seededPrompt (seed: number, count: number, vocab: number): number[] {
  let x = (seed >>> 0) || 0x9e3779b9
  return Array.from({ length: count }, () => {
    x ^= x << 13
    x >>>= 0
    x ^= x >>> 17
    x ^= x << 5
    x >>>= 0
    return x % vocab
  })
}

/** A fresh seed: never one an earlier run chose on purpose (random, 31 bits). */
export function freshSeed (): number {
  return randomInt(1, 2 ** 31)
}

function bytesOf (t: DumpTensor): Uint8Array {
  return new Uint8Array(t.data.buffer, t.data.byteOffset, t.data.byteLength)
}

// Where a differing element sits, in words: the row, and for windows and pools the tokens it holds.
function describe (name: string, t: DumpTensor, element: number, tokens: number, ratios: readonly number[]): string {
  const width = t.shape.length > 1 ? t.shape[t.shape.length - 1] : 1
  const row = Math.floor(element / width)
  const layer = Number(/layers\.(\d+)\./.exec(name)?.[1])
  let where = `row ${row}`
  if (name.endsWith('.window')) where += ` (position ${fmt(tokens - t.shape[0] + row)})`
  else if (name.endsWith('.compressed_kv') && ratios[layer] > 0) where += ` (entry of tokens ${fmt(row * ratios[layer])}..${fmt((row + 1) * ratios[layer] - 1)})`
  return where
}

/** Compare two cache dumps array by array, bit for bit. */
export function compareCacheDumps (hook: ReadonlyMap<string, DumpTensor>, native: ReadonlyMap<string, DumpTensor>, tokens: number, ratios: readonly number[]): { total: number, differing: ArrayDifference[] } {
  const names = [...new Set([...hook.keys(), ...native.keys()])].sort()
  const differing: ArrayDifference[] = []
  for (const name of names) {
    const a = hook.get(name)
    const b = native.get(name)
    if (a === undefined || b === undefined) {
      differing.push({ name, detail: `only in the ${a === undefined ? 'decoder' : 'hook'}'s cache` })
      continue
    }
    if (a.dtype !== b.dtype || a.shape.join(',') !== b.shape.join(',')) {
      differing.push({ name, detail: `hook ${a.dtype} [${a.shape.join(', ')}] vs decoder ${b.dtype} [${b.shape.join(', ')}]` })
      continue
    }
    const x = bytesOf(a)
    const y = bytesOf(b)
    const size = a.data.BYTES_PER_ELEMENT
    let count = 0
    let first = -1
    for (let i = 0; i < x.length; i += size) {
      let same = true
      for (let j = 0; j < size; j++) if (x[i + j] !== y[i + j]) same = false
      if (!same) {
        if (first < 0) first = i / size
        count++
      }
    }
    if (first >= 0) {
      differing.push({ name, detail: `${fmt(count)} of ${fmt(a.data.length)} values differ; first at element ${fmt(first)}, ${describe(name, a, first, tokens, ratios)}: hook ${String(a.data[first])}, decoder ${String(b.data[first])}` })
    }
  }
  return { total: names.length, differing }
}

/**
 * Run the decoder natively on a `tokens`-long prompt (seeded), feed the hook from the sidecar the
 * decoder's own attention inputs, and compare the two caches. Throws ConfigError / SafetensorsError
 * / CheckpointError when the sidecar or the decoder cannot be loaded.
 */
export async function bridgeVsNative (opts: NativeCheckOptions): Promise<NativeCheckResult> {
  const sidecar = await loadSidecar(opts.sidecarDir)
  const ckpt = await loadCheckpoint(opts.decoderModelDir)
  const engine = DeepseekV4Engine.fromCheckpoint(ckpt, opts.profile)
  const seed = opts.seed ?? freshSeed()
  const prompt = seededPrompt(seed, opts.tokens, engine.config.vocabSize)
  if (sidecar.numLayers !== engine.config.numHiddenLayers) {
    throw new PdBridgeError(`the sidecar ${sidecar.dir} has ${sidecar.numLayers} layers, the decoder ${engine.config.numHiddenLayers}`)
  }
  const hook = new PoolingHook(sidecar.kvPath)
  const cache = engine.newCache()
  let refused: string | undefined
  // The prefill is synchronous, so progress is ticked from the hook: a chunk's tokens count once
  // per layer, the whole prompt is done when the last layer has had every chunk.
  const layers = engine.config.numHiddenLayers
  const progress = opts.progress === false ? undefined : startProgress({ label: 'gate: bridge vs native', total: opts.tokens, unit: 'tokens', ...opts.progress })
  try {
    engine.prefill(prompt, cache, {
      logits: 'none',
      attnInputHook: (layer, start, rows, count) => {
        progress?.tick(Math.floor(start + (count * (layer + 1)) / layers), `layer ${layer + 1}/${layers}`)
        if (refused !== undefined) return
        try {
          hook.feed(layer, start, rows, count)
        }
        catch (e) {
          if (!(e instanceof PdBridgeError)) throw e
          refused = e.message
        }
      },
    })
  }
  catch (e) {
    progress?.fail((e as Error).message)
    throw e
  }
  progress?.done()
  const ratios = engine.config.compressRatios
  const native = cache.tensors('native')
  if (refused !== undefined) {
    const differing = [{ name: '(hook)', detail: `refused the decoder's attention inputs: ${refused}` }]
    return { tokens: opts.tokens, seed, total: native.size, identical: 0, differing, summary: `0/${native.size} bit-exact` }
  }
  const { total, differing } = compareCacheDumps(hook.tensors('native'), native, opts.tokens, ratios)
  return { tokens: opts.tokens, seed, total, identical: total - differing.length, differing, summary: `${total - differing.length}/${total} bit-exact` }
}
