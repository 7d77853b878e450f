// Shared by the decoder-cache suites: the tiny seed-1 checkpoint with engines per profile, prompts,
// prefix caches opened with an event collector, and bitwise comparisons written independently of
// the code under test.
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join, resolve } from 'node:path'
import { afterAll, beforeAll } from 'vitest'
import { checkpointDigest, loadCheckpoint, type LoadedCheckpoint } from '../../src/model/checkpoint/index.ts'
import { DeepseekV4Engine, type ModelCache } from '../../src/model/engine/index.ts'
import { DecoderPrefixCache, type PrefixCacheEvent } from '../../src/decode/prefix-cache/index.ts'
import { SafetensorsFile, writeSafetensors, type Tensor } from '../../src/formats/safetensors/index.ts'
import { CONTENT_DIGEST_KEY, blockContentDigest } from '../../src/decode/store/index.ts'
import { tinyCheckpoint } from '../support/checkpoints.ts'

/** Tokens per block in these suites (small, so prompts of a few hundred tokens span blocks). */
export const BS = 256

/** The tiny seed-1 checkpoint on disk, loaded, with one engine per profile (made on first use). */
export interface TinyModel {
  /** The run's shared checkpoint (suites/support/checkpoints.ts): read it, never write into it. */
  dir: string
  ckpt: LoadedCheckpoint
  engine: (profile: string) => DeepseekV4Engine
  /** A fresh directory under the model's temporary root. */
  scratch: (name: string) => string
  cleanup: () => Promise<void>
}

/** The tiny checkpoint (preset tiny, seed 1: the run's shared one) and a temporary directory for scratch. */
export async function tinyModel (): Promise<TinyModel> {
  const root = await mkdtemp(join(tmpdir(), 'pd-bridge-decoder-cache-'))
  const dir = tinyCheckpoint()
  const ckpt = await loadCheckpoint(dir)
  const engines = new Map<string, DeepseekV4Engine>()
  let n = 0
  return {
    dir: resolve(dir),
    ckpt,
    engine: (profile) => {
      let e = engines.get(profile)
      if (e === undefined) engines.set(profile, e = DeepseekV4Engine.fromCheckpoint(ckpt, profile))
      return e
    },
    scratch: (name) => join(root, `${name}-${n++}`),
    cleanup: async () => await rm(root, { recursive: true, force: true }),
  }
}

/** `n` deterministic token ids in [0, 512) (the tiny vocabulary), different per seed. */
/**
 * The tiny model for a whole test file, with its checkpoint digest (records made by harness runs name
 * the checkpoint they ran): set up before the file's tests, cleaned up after.
 */
export function tinyModelForFile (): { model: TinyModel, digest: string } {
  const held = { model: undefined as unknown as TinyModel, digest: '' }
  beforeAll(async () => {
    held.model = await tinyModel()
    held.digest = await checkpointDigest(held.model.dir)
  })
  afterAll(async () => await held.model.cleanup())
  return held
}

export { seededTokens as prompt } from '../support/prompts.ts'

/** A prefix cache on `root` for the tiny model under `profile`, collecting its events. */
export async function openPrefixCache (model: TinyModel, root: string, profile: string, blockSize = BS): Promise<{ pc: DecoderPrefixCache, events: PrefixCacheEvent[] }> {
  const events: PrefixCacheEvent[] = []
  const pc = await DecoderPrefixCache.open({ storeRoot: root, modelName: model.dir, cfg: model.ckpt.config, profile, blockSize, engine: model.engine(profile), log: (e) => events.push(e) })
  return { pc, events }
}

/** The cache a native one-shot prefill of `tokens` leaves (logits of the last token too). */
export function nativePrefill (engine: DeepseekV4Engine, tokens: number[]): { cache: ModelCache, logits: Float32Array } {
  const cache = engine.newCache()
  const { logits } = engine.prefill(tokens, cache, { logits: 'last' })
  return { cache, logits }
}

/** Whether two float32 arrays hold the same bits. */
export function sameBits (a: Float32Array, b: Float32Array): boolean {
  if (a.length !== b.length) return false
  const x = new Uint32Array(a.buffer, a.byteOffset, a.length)
  const y = new Uint32Array(b.buffer, b.byteOffset, b.length)
  for (let i = 0; i < x.length; i++) if (x[i] !== y[i]) return false
  return true
}

/** Every array of two caches whose shape or bits differ (empty when identical), plus the token counts. */
export function cacheDifferences (a: ModelCache, b: ModelCache): string[] {
  const out: string[] = []
  if (a.tokenCount !== b.tokenCount) out.push(`tokenCount ${a.tokenCount} vs ${b.tokenCount}`)
  const ta = a.tensors('x')
  const tb = b.tensors('x')
  for (const name of new Set([...ta.keys(), ...tb.keys()])) {
    const x = ta.get(name)
    const y = tb.get(name)
    if (x === undefined || y === undefined) out.push(`${name} only in one`)
    else if (x.shape.join(',') !== y.shape.join(',')) out.push(`${name} shape [${x.shape}] vs [${y.shape}]`)
    else if (x.dtype === 'I64' || y.dtype === 'I64') {
      if (x.data[0] !== y.data[0]) out.push(`${name} ${x.data[0]} vs ${y.data[0]}`)
    } else if (!sameBits(x.data, y.data as Float32Array)) out.push(`${name} bits differ`)
  }
  return out
}

/** Number of arrays `cache.tensors` dumps, plus one for the token count: what diff-state compares. */
export function arrayCount (cache: ModelCache): number {
  return cache.tensors('x').size + 1
}

/** Argmax (lowest id on ties). */
export function argmax (v: Float32Array): number {
  let best = 0
  for (let i = 1; i < v.length; i++) if (v[i] > v[best]) best = i
  return best
}

/** k greedy steps from `logits` on `cache`: the tokens and every step's logits. */
export function greedySteps (engine: DeepseekV4Engine, cache: ModelCache, logits: Float32Array, k: number): { tokens: number[], logits: Float32Array[] } {
  const tokens: number[] = []
  const all: Float32Array[] = [logits]
  let current = logits
  for (let i = 0; i < k; i++) {
    const next = argmax(current)
    tokens.push(next)
    current = engine.decode(next, cache)
    all.push(current)
  }
  return { tokens, logits: all }
}

/** A block file's tensors: name -> dtype and shape, and the byte length of its data section. */
export async function blockTensors (path: string): Promise<{ tensors: Map<string, { dtype: string, shape: number[] }>, dataBytes: number, metadata: Record<string, string> }> {
  const f = await SafetensorsFile.open(path)
  try {
    const tensors = new Map([...f.tensors].map(([name, info]) => [name, { dtype: info.dtype, shape: [...info.shape] }]))
    const dataBytes = [...f.tensors.values()].reduce((a, t) => a + (t.end - t.begin), 0)
    return { tensors, dataBytes, metadata: f.metadata }
  } finally {
    await f.close()
  }
}

/**
 * Stamp a block file's content digest anew over what it holds now: what a writer that built a wrong
 * value would have left (wrong data, consistent digest). A test that edits a block in place and
 * wants the edit judged on its values, not caught as bit rot, calls this after the edit.
 */
export async function restampContentDigest (path: string): Promise<void> {
  const f = await SafetensorsFile.open(path)
  const tensors: Record<string, Tensor> = {}
  let metadata: Record<string, string>
  try {
    for (const name of f.tensors.keys()) tensors[name] = await f.read(name)
    metadata = { ...f.metadata }
  } finally {
    await f.close()
  }
  metadata[CONTENT_DIGEST_KEY] = blockContentDigest(metadata, Object.entries(tensors).map(([name, t]) => ({ name, ...t })))
  await writeSafetensors(path, tensors, metadata)
}
