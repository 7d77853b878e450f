// Shared by the bridge-side block suites: the tiny seed-1 checkpoint with a decoder-profile engine
// and a decoder sidecar exported at block size 256 (the run's shared ones), captures made through a live engine prefill,
// stores opened as the decoder opens them, and bit comparisons written independently of the code
// under test.
import { mkdir, mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join, resolve } from 'node:path'
import { CaptureSession, exportWeights, type CaptureReport, type Sidecar } from '../../src/capture/index.ts'
import type { CaptureManifest } from '../../src/wire/manifest.ts'
import { DecoderPrefixCache } from '../../src/decode/prefix-cache/index.ts'
import { loadCheckpoint, makeCheckpoint, type LoadedCheckpoint } from '../../src/model/checkpoint/index.ts'
import { DeepseekV4Engine } from '../../src/model/engine/index.ts'
import { providedSidecar, tinyCheckpoint } from '../support/checkpoints.ts'
export { sameBits, cacheDifferences, argmax, greedySteps } from '../blocks/helpers.ts'

/** Tokens per block in these suites: prompts of a few hundred tokens span blocks. */
export const BS = 256

/** The tiny model, its engines and sidecars, under one temporary root. */
export interface Bench {
  root: string
  modelDir: string
  ckpt: LoadedCheckpoint
  engine: (profile: string) => DeepseekV4Engine
  /** The decoder sidecar at block size BS. */
  sidecar: Sidecar
  /** A fresh directory path under the root. */
  scratch: (name: string) => string
  cleanup: () => Promise<void>
}

/**
 * A checkpoint (the tiny preset unless told) and the decoder sidecar (block size BS unless told):
 * for the tiny preset at block size BS the run's shared ones (suites/support/checkpoints.ts,
 * read-only), otherwise made under the bench's own root.
 */
export async function bench (label: string, opts: { preset?: 'tiny' | 'flash-schedule', blockSize?: number } = {}): Promise<Bench> {
  const root = await mkdtemp(join(tmpdir(), `pd-bridge-${label}-`))
  const shared = (opts.preset ?? 'tiny') === 'tiny' && (opts.blockSize ?? BS) === 256
  const modelDir = shared ? resolve(tinyCheckpoint()) : resolve(join(root, 'model'))
  if (!shared) await makeCheckpoint({ preset: opts.preset ?? 'tiny', seed: 1, out: modelDir, force: true })
  const ckpt = await loadCheckpoint(modelDir)
  const sidecar = shared
    ? (await providedSidecar('tinyDecoderSidecar256')).sidecar
    : await exportWeights({ model: modelDir, profile: 'decoder', out: join(root, 'sidecar'), blockSize: opts.blockSize ?? BS })
  const engines = new Map<string, DeepseekV4Engine>()
  let n = 0
  return {
    root,
    modelDir,
    ckpt,
    sidecar,
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
export { seededTokens as prompt } from '../support/prompts.ts'

/** The decoder's prefix cache (decoder profile, block size BS) on a fresh store root. */
export async function openStore (b: Bench, name: string, blockSize = BS): Promise<DecoderPrefixCache> {
  return await DecoderPrefixCache.open({ storeRoot: b.scratch(name), modelName: b.modelDir, cfg: b.ckpt.config, profile: 'decoder', blockSize, engine: b.engine('decoder'), log: () => {} })
}

/** A capture made by a live prefill of `profile`'s engine with the session as its hook; its manifest carries the tokens' digest. */
export async function capture (b: Bench, tokens: number[], opts: { requestId: string, profile?: string, root?: string, memoryBudgetBytes?: number,
  maxChunk?: number }): Promise<{ dir: string, root: string, manifest: CaptureManifest, report: CaptureReport }> {
  const root = opts.root ?? b.scratch('captures')
  await mkdir(root, { recursive: true })
  const session = await CaptureSession.start({ sidecar: b.sidecar, captureRoot: root, requestId: opts.requestId, tokenCount: tokens.length, tokens, memoryBudgetBytes: opts.memoryBudgetBytes })
  b.engine(opts.profile ?? 'decoder').prefill(tokens, b.engine(opts.profile ?? 'decoder').newCache(), { logits: 'none', attnInputHook: session.onAttentionInput, maxChunk: opts.maxChunk ?? tokens.length })
  const manifest = await session.finish()
  return { dir: session.dir, root, manifest, report: session.report() }
}

