// oMLX's paged SSD cache directory as a block store of ours: the same layout oMLX's
// PagedSSDCacheManager reads and writes (docs/block-store.md), keyed by oMLX's model path, at the
// block size oMLX's scheduler uses, never evicting or quarantining a file oMLX wrote (the directory
// is oMLX's; its own size limit and index govern it). Blocks we write carry our digest and geometry
// fingerprint as extra keys, which oMLX's reader ignores. Blocks oMLX wrote itself are left alone,
// or served by our store when the user says so (`omlxBlocks: 'serve'`).
import type { KeyObject } from 'node:crypto'
import { statSync } from 'node:fs'
import { DecoderPrefixCache, type PrefixCacheEvent } from '../../decode/prefix-cache/index.ts'
import { ConfigError } from '../../errors.ts'
import type { DeepseekV4Config } from '../../model/config.ts'
import type { SidecarCacheMath } from '../../wire/sidecar-format.ts'
import { checkOmlxBlockSize } from './block-size.ts'

/** How blocks oMLX wrote itself are treated by our store: left alone (a miss for us), or served. */
export type OmlxBlocksRule = 'leave' | 'serve'

export interface OmlxStoreOptions {
  /** oMLX's paged SSD cache directory as this machine sees it (a mount of the Mac's); it must exist. */
  cacheDir: string
  /** The model name oMLX hashes into every key: its model directory's full path on the Mac. */
  modelName: string
  /** The decoder's model config (the checkpoint oMLX serves). */
  cfg: DeepseekV4Config
  /** The numerics profile the sidecar was exported under (part of our geometry fingerprint). */
  profile: string
  /** The sidecar's cache math record, when it has one (mlx-cpu: oMLX's own arithmetic); part of the geometry too. */
  cacheMath?: SidecarCacheMath
  /** Tokens per block: oMLX's (omlxAlignedBlockSize), or what the user's oMLX logs. */
  blockSize: number
  /** Default 'leave'. */
  omlxBlocks?: OmlxBlocksRule
  /** The deployment's block key: our blocks carry a keyed digest (oMLX ignores it). Not with 'serve'. */
  authKey?: KeyObject
  log?: (event: PrefixCacheEvent) => void
}

/** Refuse options that would write blocks oMLX never reads, naming the key to fix. */
export function checkOmlxStoreOptions (o: OmlxStoreOptions): void {
  if (typeof o.cacheDir !== 'string' || o.cacheDir.length === 0) throw new ConfigError('decoder.cacheDir', 'the omlx decoder needs oMLX\'s paged SSD cache directory (its --paged-ssd-cache-dir, default ~/.omlx/cache on the Mac) as mounted here')
  const isDir = statSync(o.cacheDir, { throwIfNoEntry: false })?.isDirectory() === true
  // Never made here: a fresh directory would be one oMLX does not read, and every block would be lost to it.
  if (!isDir) throw new ConfigError('decoder.cacheDir', 'is not an existing directory: mount oMLX\'s paged SSD cache directory there first (docs/omlx.md)')
  if (typeof o.modelName !== 'string' || o.modelName.length === 0) throw new ConfigError('decoder.modelName', 'the omlx decoder needs the model name oMLX hashes into its block keys: the model directory\'s full path on the Mac (the model_name of any block oMLX wrote)')
  checkOmlxBlockSize(o.blockSize, o.cfg.slidingWindow, o.cfg.compressRatios)
  if (o.omlxBlocks !== undefined && o.omlxBlocks !== 'leave' && o.omlxBlocks !== 'serve') throw new ConfigError('decoder.omlxBlocks', `expected leave or serve, found ${JSON.stringify(o.omlxBlocks)}`)
}

/** Open oMLX's cache directory as our store (no size limit: eviction is oMLX's). */
export async function openOmlxStore (o: OmlxStoreOptions): Promise<DecoderPrefixCache> {
  checkOmlxStoreOptions(o)
  return await DecoderPrefixCache.open({
    storeRoot: o.cacheDir,
    modelName: o.modelName,
    cfg: o.cfg,
    profile: o.profile,
    ...(o.cacheMath !== undefined ? { cacheMath: o.cacheMath } : {}),
    blockSize: o.blockSize,
    omlxWritten: o.omlxBlocks ?? 'leave',
    ...(o.authKey !== undefined ? { authKey: o.authKey } : {}),
    ...(o.log !== undefined ? { log: o.log } : {}),
  })
}
