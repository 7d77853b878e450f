// The decoder's prefix cache as the server uses it: DecoderPrefixCache plus what /health shows and
// what POST /v1/cache/rescan runs.
import type { Logger } from 'pino'
import { DecoderPrefixCache, type PrefixCacheEvent } from '../../decode/prefix-cache/index.ts'
import type { DecoderModel } from './model.ts'
import type { ServedPrefixCache } from './server.ts'

/** Options of `openServedPrefixCache`. */
export interface ServedPrefixCacheOptions {
  /** The block store root. */
  dir: string
  /** The model name hashed into block keys (the served model name). */
  modelName: string
  model: DecoderModel
  blockSize: number
  maxSizeBytes?: number
  logger: Logger
}

/** Events worth a warning; the rest are info. */
const WARN: ReadonlySet<PrefixCacheEvent['kind']> = new Set(['refused', 'unreadable', 'quarantined', 'restore-rejected', 'geometry-miss'])

/** Open the store for the served model and profile, logging its events through `logger`. */
export async function openServedPrefixCache (opts: ServedPrefixCacheOptions): Promise<ServedPrefixCache & { geometryFingerprint: string }> {
  const cache = await DecoderPrefixCache.open({
    storeRoot: opts.dir,
    modelName: opts.modelName,
    cfg: opts.model.config,
    profile: opts.model.engine.profile,
    blockSize: opts.blockSize,
    maxSizeBytes: opts.maxSizeBytes,
    log: (event) => {
      if (WARN.has(event.kind)) opts.logger.warn({ event: `cache.${event.kind}`, detail: event }, `prefix cache: ${event.kind}`)
      else opts.logger.info({ event: `cache.${event.kind}`, detail: event }, `prefix cache: ${event.kind}`)
    },
  })
  return {
    dir: opts.dir,
    blockSize: cache.blockSize,
    geometryFingerprint: cache.geometryFingerprint,
    lookup: (tokens) => cache.lookup(tokens),
    prefillAndStore: (engine, tokens, fromCache) => cache.prefillAndStore(engine, tokens, fromCache),
    describe: () => ({ blocks: cache.store.size, bytes: cache.store.totalBytes, stats: cache.stats, store: cache.storeStats }),
    rescan: async () => ({ ...await cache.store.rescan() }),
  }
}
