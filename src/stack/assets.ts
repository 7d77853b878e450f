// The embedded stack's files: the checkpoint and the decoder's sidecar, made once and reused while
// they are what a fresh make would give. A stamp beside each (not inside: the checkpoint directory
// stays a plain Hugging Face checkpoint) records what it was made from; reuse checks the stamp
// against the bytes on disk, so a half-written or edited checkpoint is made again, not trusted.
import { mkdir, readFile, rename, rm, stat, writeFile } from 'node:fs/promises'
import { dirname, join } from 'node:path'
import { exportWeights, loadSidecar } from '../capture/index.ts'
import { checkpointDigest, makeCheckpoint, type PresetName } from '../model/checkpoint/index.ts'
import { exportGguf } from '../model/gguf/index.ts'
import { DEFAULT_CACHE_MATH, type CacheMathName } from '../wire/sidecar-format.ts'
import { StackError } from './errors.ts'

/** A checkpoint ready to serve. */
export interface CheckpointAsset {
  dir: string
  /** checkpointDigest of the directory (config.json and weights). */
  digest: string
  /** True when it was made now, false when an earlier one was reused. */
  made: boolean
}

/** A sidecar ready for the prefill engine. */
export interface SidecarAsset {
  dir: string
  fingerprint: string
  made: boolean
}

interface CheckpointStamp { preset: string, seed: number, digest: string, mirrorIndexerHeads?: boolean }
interface SidecarStamp { checkpointDigest: string, profile: string, blockSize: number, fingerprint: string, cacheMath?: CacheMathName }

async function readStamp<T> (path: string): Promise<T | undefined> {
  try {
    return JSON.parse(await readFile(path, 'utf8')) as T
  }
  catch {
    return undefined
  }
}

async function exists (path: string): Promise<boolean> {
  try {
    await stat(path)
    return true
  }
  catch {
    return false
  }
}

/** Write `dir` through a temporary sibling, then swap it in, so a crash never leaves half a directory under the final name. */
async function replaceDir (dir: string, write: (tmp: string) => Promise<void>): Promise<void> {
  const tmp = `${dir}.tmp-${process.pid}`
  await rm(tmp, { recursive: true, force: true })
  await mkdir(dirname(dir), { recursive: true })
  try {
    await write(tmp)
    await rm(dir, { recursive: true, force: true })
    await rename(tmp, dir)
  }
  catch (err) {
    await rm(tmp, { recursive: true, force: true })
    throw err
  }
}

/**
 * The `preset`/`seed` checkpoint at `dir`: reused when its stamp names the same preset and seed and
 * the digest of the files on disk equals the stamp's; made (replacing whatever was there) otherwise.
 */
export async function ensureCheckpoint (dir: string, preset: PresetName, seed: number, options: { mirrorIndexerHeads?: boolean } = {}): Promise<CheckpointAsset> {
  const stampPath = `${dir}.stamp.json`
  const stamp = await readStamp<CheckpointStamp>(stampPath)
  const mirror = options.mirrorIndexerHeads === true
  if (stamp?.preset === preset && stamp.seed === seed && (stamp.mirrorIndexerHeads === true) === mirror && await exists(join(dir, 'tokenizer.json'))) {
    const digest = await checkpointDigest(dir).catch(() => undefined)
    if (digest === stamp.digest) return { dir, digest, made: false }
  }
  await rm(stampPath, { force: true })
  await replaceDir(dir, async (tmp) => {
    await makeCheckpoint({ preset, seed, out: tmp, ...(mirror ? { mirrorIndexerHeads: true } : {}) })
  })
  const digest = await checkpointDigest(dir)
  await writeFile(stampPath, JSON.stringify({ preset, seed, digest, ...(mirror ? { mirrorIndexerHeads: true } : {}) } satisfies CheckpointStamp, null, 2) + '\n')
  return { dir, digest, made: true }
}

/**
 * The decoder's sidecar for `checkpoint` under `profile` with `blockSize`-token blocks, and the cache
 * math `cacheMath` where the decoder's caches are not the profile's own (absent: the profile's kv
 * path): reused when its stamp names this checkpoint's digest, profile, block size and cache math and
 * it loads and verifies (weights hash, fingerprint, cache math); exported again otherwise.
 */
export async function ensureSidecar (dir: string, checkpoint: CheckpointAsset, profile: string, blockSize: number, cacheMath?: CacheMathName): Promise<SidecarAsset> {
  const stampPath = `${dir}.stamp.json`
  const stamp = await readStamp<SidecarStamp>(stampPath)
  if (stamp?.checkpointDigest === checkpoint.digest && stamp.profile === profile && stamp.blockSize === blockSize && stamp.cacheMath === cacheMath) {
    const loaded = await loadSidecar(dir).catch(() => undefined)
    if (loaded !== undefined && loaded.fingerprint === stamp.fingerprint && loaded.json.blockSize === blockSize && loaded.cacheMath === (cacheMath ?? DEFAULT_CACHE_MATH)) {
      return { dir, fingerprint: loaded.fingerprint, made: false }
    }
  }
  await rm(stampPath, { force: true })
  let fingerprint = ''
  await replaceDir(dir, async (tmp) => {
    fingerprint = (await exportWeights({ model: checkpoint.dir, profile, out: tmp, blockSize, ...(cacheMath !== undefined ? { cacheMath } : {}) })).fingerprint
  })
  // The fingerprint does not depend on the directory's name; check the moved copy loads all the same.
  const loaded = await loadSidecar(dir)
  if (loaded.fingerprint !== fingerprint) throw new StackError(`${dir}: the sidecar changed while it was moved into place`)
  await writeFile(stampPath, JSON.stringify({ checkpointDigest: checkpoint.digest, profile, blockSize, fingerprint, ...(cacheMath !== undefined ? { cacheMath } : {}) } satisfies SidecarStamp, null, 2) + '\n')
  return { dir, fingerprint, made: true }
}

/** An f32 GGUF of the checkpoint, for the llama.cpp decoder. */
export interface GgufAsset {
  path: string
  made: boolean
}

interface GgufStamp { checkpointDigest: string, type: 'f32', bytes: number }

/**
 * The f32 GGUF of `checkpoint` at `path`: reused when its stamp names this checkpoint's digest and
 * the file has the stamped size (a torn write has another); exported again otherwise.
 */
export async function ensureGguf (path: string, checkpoint: CheckpointAsset): Promise<GgufAsset> {
  const stampPath = `${path}.stamp.json`
  const stamp = await readStamp<GgufStamp>(stampPath)
  if (stamp?.checkpointDigest === checkpoint.digest && stamp.type === 'f32') {
    const size = await stat(path).then((s) => s.size, () => -1)
    if (size === stamp.bytes) return { path, made: false }
  }
  await rm(stampPath, { force: true })
  await mkdir(dirname(path), { recursive: true })
  const tmp = `${path}.tmp-${process.pid}`
  try {
    await exportGguf({ model: checkpoint.dir, out: tmp, type: 'f32', force: true })
    await rename(tmp, path)
  } catch (err) {
    await rm(tmp, { force: true })
    throw err
  }
  const bytes = (await stat(path)).size
  await writeFile(stampPath, JSON.stringify({ checkpointDigest: checkpoint.digest, type: 'f32', bytes } satisfies GgufStamp, null, 2) + '\n')
  return { path, made: true }
}
