// The decoder's prefix cache as the server uses it: DecoderPrefixCache plus what /health shows and
// what POST /v1/cache/rescan runs.
import type { Logger } from 'pino'
import { blockAuthDescription, type BlockKey } from '../../config/block-key.ts'
import { DecoderPrefixCache, type PrefixCacheEvent } from '../../decode/prefix-cache/index.ts'
import type { DecoderModel } from './model.ts'
import type { ServedPrefixCache, StoreHealth } from './server.ts'
import { STORE_PROBE_EVERY_MS, StoreProbe } from './store-probe.ts'

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
  /** How often /health may really write a probe file into the store (ms); default 10 s. */
  storeProbeMs?: number
  /** The deployment's block key: blocks are authenticated (keyed digest written and checked); absent: integrity-checked only. */
  blockKey?: BlockKey
}

/** Events worth a warning; the rest are info. */
const WARN: ReadonlySet<PrefixCacheEvent['kind']> = new Set(['refused', 'unreadable', 'quarantined', 'restore-rejected', 'geometry-miss', 'write-failed'])

/** Open the store for the served model and profile, logging its events through `logger`. */
export async function openServedPrefixCache (opts: ServedPrefixCacheOptions): Promise<ServedPrefixCache & { geometryFingerprint: string }> {
  const probe = new StoreProbe(opts.dir, opts.storeProbeMs ?? STORE_PROBE_EVERY_MS)
  const cache = await DecoderPrefixCache.open({
    storeRoot: opts.dir,
    modelName: opts.modelName,
    cfg: opts.model.config,
    profile: opts.model.engine.profile,
    engine: opts.model.engine,
    blockSize: opts.blockSize,
    maxSizeBytes: opts.maxSizeBytes,
    authKey: opts.blockKey?.key,
    log: (event) => {
      // A failed block write says more than a cached probe: the next /health probes again.
      if (event.kind === 'write-failed') probe.invalidate()
      else if (event.kind === 'written' || event.kind === 'written-elsewhere') probe.invalidateIfFailing()
      if (WARN.has(event.kind)) opts.logger.warn({ event: `cache.${event.kind}`, detail: event }, `prefix cache: ${event.kind}`)
      else opts.logger.info({ event: `cache.${event.kind}`, detail: event }, `prefix cache: ${event.kind}`)
    },
  })
  return {
    dir: opts.dir,
    blockSize: cache.blockSize,
    geometryFingerprint: cache.geometryFingerprint,
    lookup: (tokens) => cache.lookup(tokens),
    prefillAndStore: (engine, tokens, fromCache, onProgress, schedule) => cache.prefillAndStore(engine, tokens, fromCache, onProgress, schedule),
    describe: () => ({
      blocks: cache.store.size, bytes: cache.store.totalBytes,
      write_failures: cache.stats.writeFailures, last_write_failure: cache.lastWriteFailure,
      stats: cache.stats, store: cache.storeStats,
      // Whether blocks are authenticated or only integrity-checked (the key's id, never the key: doctor compares it).
      authentication: blockAuthDescription(opts.blockKey),
    }),
    storeHealth: async (): Promise<StoreHealth> => {
      const c = await probe.check()
      return {
        dir: opts.dir, writable: c.writable, code: c.code, error: c.error, checked_at: c.checkedAt, probe_every_ms: probe.everyMs,
        writes_failing: cache.writesFailing, write_failures: cache.stats.writeFailures, last_write_failure: cache.lastWriteFailure,
      }
    },
    rescan: async () => ({ ...await cache.rescan() }),
  }
}
