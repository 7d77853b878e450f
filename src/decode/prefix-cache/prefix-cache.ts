// The decoder's prefix cache over the oMLX-layout block store: find the longest chain of stored
// full blocks for a prompt and rebuild the decoder's cache from it; run the decoder's own prefill
// in chunks cut at block boundaries and write each block as its boundary is reached.
import type { KeyObject } from 'node:crypto'
import { stat } from 'node:fs/promises'
import { PdBridgeError } from '../../errors.ts'
import type { DeepseekV4Config } from '../../model/config.ts'
import type { DeepseekV4Engine, ModelCache } from '../../model/engine/index.ts'
import { getProfile, type NumericsProfile } from '../../model/profiles/index.ts'
import {
  BlockStore, BlockStoreError, blockPath, DEFAULT_BLOCK_SIZE, deepseekV4StoreLayout,
  type ChainBlock, type IncompatibleReason, type ScanReport, type StoreEvent, type StoreLayout, type StoreStats,
} from '../store/index.ts'
import { cacheToBlockPayload, modelCacheFromRestored, restoreBlocks } from './mapping.ts'
import { storageRuleFor, type StorageRule } from './tensors.ts'
import { Geometry } from '../../wire/geometry.ts'
import type { SidecarCacheMath } from '../../wire/sidecar-format.ts'
import { checkPositiveBlockSize } from '../../wire/block-size.ts'

/** Something the prefix cache did, for the log: the store's events plus its own. */
export type PrefixCacheEvent =
  | StoreEvent
  | { kind: 'geometry-miss', block: number, hash: string, detail: string }
  /**
   * A block of the prompt failed its integrity check (content digest wrong or missing; with a block
   * key, keyed digest wrong or missing): refused, quarantined, never served. `integrityMisses` is the running count.
   */
  | { kind: 'integrity-miss', block: number, hash: string, reason: IntegrityReason, detail: string, integrityMisses: number }
  | { kind: 'lookup', tokens: number, cachedTokens: number, blocks: number, reason?: string, integrityMisses?: number }
  | { kind: 'stored', block: number, hash: string, written: boolean, bytes?: number }
  /**
   * Writing the decoder's own block failed (a full or read-only disk, a permission, any I/O error):
   * logged and counted, never thrown; the request goes on and answers as if nothing was stored.
   * `code` is the errno code when the error carried one; `writeFailures` is the running count.
   */
  | { kind: 'write-failed', block: number, hash: string, code: string | null, detail: string, writeFailures: number }
  /**
   * After a failed write-back, a block another process (the bridge) wrote since was found (by a
   * rescan or a lookup): the store takes writes again, so writes are no longer failing.
   */
  | { kind: 'written-elsewhere', hash: string, path: string }

/** The refusals that quarantine a block: its bytes cannot be trusted. */
type IntegrityReason = 'integrity' | 'unverified' | 'unauthenticated' | 'authentication'

/** How a lookup's reason names each integrity refusal. */
const INTEGRITY_WHAT: Record<IntegrityReason, string> = {
  integrity: 'failed its integrity check',
  unverified: 'has no content digest and cannot be verified',
  unauthenticated: 'has no keyed digest (written without the block key) and cannot be authenticated',
  authentication: 'failed its authentication (keyed digest)',
}

/** Options of `DecoderPrefixCache.open`. */
export interface PrefixCacheOptions {
  /** The block store root (<root>/<hex>/<hash>.safetensors). */
  storeRoot: string
  /** The model name hashed into every block key (oMLX uses the model path). */
  modelName: string
  cfg: DeepseekV4Config
  /** The decoder's numerics profile (a name or the profile itself): part of the geometry. */
  profile: NumericsProfile | string
  /** Tokens per block; default 2048 (oMLX's DeepSeek-V4 choice). */
  blockSize?: number
  /**
   * The cache math the blocks are computed with, where it is not the profile's own kv path: the
   * sidecar's `cacheMath` record (mlx-cpu for a decoder running MLX's arithmetic). Part of the geometry.
   */
  cacheMath?: SidecarCacheMath
  /** Size limit of the store in bytes (LRU eviction past it). Default: none. */
  maxSizeBytes?: number
  /** Receives every event; the default writes refusals, geometry misses and removals to stderr. */
  log?: (event: PrefixCacheEvent) => void
  /**
   * The decoder's engine, when there is one: restored caches then come with their derived overlap
   * carries filled in (engine.completeCarries), so they read exactly as native caches do. Blocks
   * hold only the raw previous window (oMLX's layout); the engine derives the carry from it anyway
   * when it next pools, so this matters for comparing and dumping, not for decoding.
   */
  engine?: DeepseekV4Engine
  /** The deployment's block key (src/config/block-key.ts): blocks are then authenticated, not only integrity-checked. */
  authKey?: KeyObject
  /** A store inside oMLX's cache directory: how blocks oMLX itself wrote are treated (BlockStoreOptions.omlxWritten). */
  omlxWritten?: 'leave' | 'serve'
}

/** What a lookup found. */
export interface LookupResult {
  /** Tokens the restored cache covers (0 on a miss). */
  cachedTokens: number
  /** The decoder's cache at cachedTokens, or null on a miss. */
  cache: ModelCache | null
  /** Blocks used. */
  blocks: number
  /** Why the hit is shorter than the prompt's full blocks, or why there is none. */
  reason?: string
}

/** One block boundary reached by `prefillAndStore`. */
export interface StoredBlock {
  block: number
  hash: string
  /** False when a compatible block was already stored (it is reused, not rebuilt). */
  written: boolean
  /** File size, when written. */
  bytes?: number
  /** Set when the block could not be written (or checked for): why. The prefill went on regardless. */
  failed?: string
}

/** The last failed write-back of a block, for /health. */
export interface WriteFailure {
  /** ISO time of the failure. */
  at: string
  block: number
  hash: string
  /** errno code (ENOSPC, EROFS, EACCES, EFBIG, EIO, ...) when the error carried one. */
  code: string | null
  detail: string
}

/** Told the tokens prefilled so far and the prompt's length, between prefill chunks. */
export type PrefillProgress = (doneTokens: number, promptTokens: number) => void | Promise<void>

/**
 * How a server runs the prefill's chunks: at most `chunkTokens` tokens each (besides the cut at
 * every block boundary), each through `runChunk` (a batching decoder runs it between decode steps).
 * Chunking never changes a bit (the engine's chunk invariance).
 */
export interface PrefillSchedule {
  chunkTokens?: number
  runChunk?: <T>(work: () => T) => Promise<T>
}

/** What `prefillAndStore` returns. */
export interface PrefillAndStoreResult {
  /** The cache after the whole prompt (fromCache, advanced in place, when given). */
  cache: ModelCache
  /** Logits of the prompt's last token, [vocab]. */
  logits: Float32Array
  storedBlocks: StoredBlock[]
}

/** Options of `lookup`. */
export interface LookupOptions {
  /**
   * oMLX's exact full-prompt rule (default true): leave out the block holding the prompt's last
   * token, so the decoder has a token to prefill. Verification (diff-state) turns it off.
   */
  exactPromptRule?: boolean
}

/** Counters since open. */
export interface PrefixCacheStats {
  lookups: number
  /** Lookups that restored at least one block. */
  hits: number
  misses: number
  /** Lookups whose chain was cut by a block of another geometry (rope tables, window, profile). */
  geometryMisses: number
  /**
   * Lookups whose chain was cut by a block that failed its integrity check: its content did not hash
   * to its digest, or it had none (written before digests), or, with a block key, its keyed digest
   * was wrong or missing. The block was quarantined; the decoder prefilled from there natively.
   */
  integrityMisses: number
  /** Lookups where every token was in blocks and the last block was left out (exact full-prompt rule). */
  exactPromptDrops: number
  restoredBlocks: number
  writtenBlocks: number
  /** Boundaries whose block was already stored. */
  reusedBlocks: number
  /** Boundaries whose block could not be written (write-back is best-effort: the answer still went out). */
  writeFailures: number
  /** Boundary snapshots (block payloads) being built or written right now, and the most ever at once. */
  heldSnapshots: number
  peakHeldSnapshots: number
}

const QUIET: ReadonlySet<PrefixCacheEvent['kind']> = new Set(['written', 'evicted', 'lookup', 'stored'])

function defaultLog (e: PrefixCacheEvent): void {
  if (QUIET.has(e.kind)) return
  let line: string
  if (e.kind === 'refused') line = `refused block ${e.hash} (${e.reason}): ${e.detail}`
  else if (e.kind === 'geometry-miss') line = `geometry miss at block ${e.block} (${e.hash}): ${e.detail}`
  else if (e.kind === 'integrity-miss') line = `integrity miss at block ${e.block} (${e.hash}, ${e.reason}; ${e.integrityMisses} so far): ${e.detail}`
  else if (e.kind === 'unreadable') line = `unreadable block file ${e.path}: ${e.problem}`
  else if (e.kind === 'temp-removed') line = `removed leftover ${e.path} (${e.why})`
  else if (e.kind === 'quarantined') line = `quarantined ${e.from} -> ${e.to} (${e.why})`
  else if (e.kind === 'restore-rejected') line = `restore rejected: ${e.reason}`
  else if (e.kind === 'write-failed') line = `could not write block ${e.block} (${e.hash}; ${e.writeFailures} failed so far), answering without it: ${e.detail}`
  else return
  process.stderr.write(`pd-bridge prefix cache: ${line}\n`)
}

function checkTokens (tokens: ArrayLike<number>, what: string): void {
  if (tokens === null || typeof tokens !== 'object' || typeof tokens.length !== 'number') throw new PdBridgeError(`${what}: tokens must be an array of token ids`)
  for (let i = 0; i < tokens.length; i++) {
    if (!Number.isSafeInteger(tokens[i]) || tokens[i] < 0) throw new PdBridgeError(`${what}: token ${i} is ${String(tokens[i])}, not a non-negative integer token id`)
  }
}

function sliceTokens (tokens: ArrayLike<number>, from: number, to: number): number[] {
  return Array.prototype.slice.call(tokens, from, to) as number[]
}

/** The decoder's prefix cache. Open with `DecoderPrefixCache.open`. */
export class DecoderPrefixCache {
  private readonly counters: PrefixCacheStats = {
    lookups: 0, hits: 0, misses: 0, geometryMisses: 0, integrityMisses: 0, exactPromptDrops: 0, restoredBlocks: 0, writtenBlocks: 0, reusedBlocks: 0, writeFailures: 0, heldSnapshots: 0, peakHeldSnapshots: 0,
  }

  private lastFailure: WriteFailure | null = null
  /** Whether the most recent write-back attempt failed (cleared by the next block written). */
  private failing = false

  /** The last refusal per block hash, so a lookup can say why its chain stopped. */
  private readonly refusals = new Map<string, { reason: IncompatibleReason, detail: string }>()
  private readonly engineGeometry = new WeakMap<DeepseekV4Engine, string>()

  private constructor (
    /** The underlying block store. */
    readonly store: BlockStore,
    /** The model config the blocks are for. */
    readonly cfg: DeepseekV4Config,
    /** The decoder's profile. */
    readonly profile: NumericsProfile,
    /** Geometry.fromConfig(cfg, profile).fingerprint: blocks without it are a miss. */
    readonly geometryFingerprint: string,
    /** How cache arrays are stored (from the profile). */
    readonly storage: StorageRule,
    private readonly log: (event: PrefixCacheEvent) => void,
    private readonly engine: DeepseekV4Engine | undefined,
  ) {}

  /** Open (creating if needed) the store for this model, profile and block size, and scan it. */
  static async open (options: PrefixCacheOptions): Promise<DecoderPrefixCache> {
    if (options === null || typeof options !== 'object') throw new PdBridgeError('DecoderPrefixCache.open: options must be an object')
    const { storeRoot, modelName, cfg } = options
    if (typeof storeRoot !== 'string' || storeRoot.length === 0) throw new PdBridgeError('DecoderPrefixCache.open: storeRoot must be a directory path')
    if (typeof modelName !== 'string') throw new PdBridgeError('DecoderPrefixCache.open: modelName must be a string')
    const profile = typeof options.profile === 'string' ? getProfile(options.profile) : options.profile
    const blockSize = options.blockSize ?? DEFAULT_BLOCK_SIZE
    // Any positive size: a boundary inside a pooling window stores the buffered rows (docs/decoder-cache.md);
    // a store the bridge writes is checked for the pool-ratio rule by the writer's target and the stack.
    checkPositiveBlockSize(blockSize, 'block size')
    const geometry = Geometry.fromConfig(cfg, profile, options.cacheMath).fingerprint
    const layout: StoreLayout = deepseekV4StoreLayout(cfg, { modelName, geometryFingerprint: geometry, blockSize })
    const log = options.log ?? defaultLog
    // The store exists before the prefix cache does; its events reach us through this slot.
    const sink: { to?: DecoderPrefixCache } = {}
    const store = await BlockStore.open({
      root: storeRoot,
      layout,
      maxSizeBytes: options.maxSizeBytes,
      authKey: options.authKey,
      ...(options.omlxWritten !== undefined ? { omlxWritten: options.omlxWritten } : {}),
      log: (e) => {
        if (e.kind === 'refused') sink.to?.refusals.set(e.hash, { reason: e.reason, detail: e.detail })
        log(e)
      },
    })
    const cache = new DecoderPrefixCache(store, cfg, profile, geometry, storageRuleFor(profile), log, options.engine)
    if (options.engine !== undefined) cache.checkEngine(options.engine)
    sink.to = cache
    return cache
  }

  /** Tokens per block. */
  get blockSize (): number {
    return this.store.layout.blockSize
  }

  /** Counters since open (a copy). */
  get stats (): PrefixCacheStats {
    return { ...this.counters }
  }

  /** The last failed write-back, or null when none failed since open. */
  get lastWriteFailure (): WriteFailure | null {
    return this.lastFailure === null ? null : { ...this.lastFailure }
  }

  /** True while the most recent write-back failed and no block has been written since (here or by another process). */
  get writesFailing (): boolean {
    return this.failing
  }

  /** Re-read the store from disk (a bridge wrote blocks); a block written since a failed write-back clears `writesFailing`. */
  async rescan (): Promise<ScanReport> {
    const known = this.failing ? this.indexedHashes() : undefined
    const report = await this.store.rescan()
    if (known !== undefined) await this.noticeWritesElsewhere(this.store.entries().filter((e) => !known.has(e.hash)).map((e) => e.hash))
    return report
  }

  private indexedHashes (): Set<string> {
    return new Set(this.store.entries().map((e) => e.hash))
  }

  /**
   * Of `hashes` (blocks this process did not index), one whose file was written after the last
   * failed write-back clears the failing state. Read before any load: a load touches the file.
   */
  private async noticeWritesElsewhere (hashes: string[]): Promise<void> {
    if (!this.failing || this.lastFailure === null) return
    const since = Date.parse(this.lastFailure.at)
    for (const hash of hashes) {
      const path = blockPath(this.store.root, hash)
      const mtime = await stat(path).then((s) => s.mtimeMs, () => undefined)
      if (mtime === undefined || mtime < since) continue
      this.failing = false
      this.log({ kind: 'written-elsewhere', hash, path })
      return
    }
  }

  /** The store's own counters (refusals by reason, writes, evictions...). */
  get storeStats (): StoreStats {
    return this.store.stats
  }

  private whyMissing (k: number, hash: string): { reason: string, geometry: boolean, integrity: boolean } {
    const refusal = this.refusals.get(hash)
    if (refusal === undefined) return { reason: `block ${k} (tokens [${k * this.blockSize}, ${(k + 1) * this.blockSize})) is not stored`, geometry: false, integrity: false }
    if (refusal.reason === 'geometry') {
      this.log({ kind: 'geometry-miss', block: k, hash, detail: refusal.detail })
      return { reason: `block ${k} (${hash}) was built under another geometry: ${refusal.detail}`, geometry: true, integrity: false }
    }
    if (refusal.reason in INTEGRITY_WHAT) {
      const reason = refusal.reason as IntegrityReason
      this.counters.integrityMisses++
      this.log({ kind: 'integrity-miss', block: k, hash, reason, detail: refusal.detail, integrityMisses: this.counters.integrityMisses })
      const what = INTEGRITY_WHAT[reason]
      return { reason: `block ${k} (${hash}) ${what} (${refusal.reason}): ${refusal.detail}; quarantined, never served`, geometry: false, integrity: true }
    }
    return { reason: `block ${k} (${hash}) cannot be served (${refusal.reason}): ${refusal.detail}`, geometry: false, integrity: false }
  }

  private finish (result: LookupResult, tokens: number, integrity = false): LookupResult {
    this.counters.lookups++
    if (result.cache === null) this.counters.misses++
    else {
      this.counters.hits++
      this.counters.restoredBlocks += result.blocks
    }
    this.log({ kind: 'lookup', tokens, cachedTokens: result.cachedTokens, blocks: result.blocks, reason: result.reason, ...(integrity ? { integrityMisses: this.counters.integrityMisses } : {}) })
    return result
  }

  /**
   * The longest chain of stored, compatible full blocks of `tokens`, restored into the decoder's
   * cache. oMLX's exact full-prompt rule: the decoder must prefill at least one token to produce
   * logits, so when the chain would cover every token the last block is left out (and said so).
   */
  async lookup (tokens: ArrayLike<number>, options: LookupOptions = {}): Promise<LookupResult> {
    checkTokens(tokens, 'lookup')
    const n = tokens.length
    const bs = this.blockSize
    const keys = this.store.keysFor(tokens)
    this.refusals.clear()
    // While write-backs fail, blocks of this prompt on disk but not indexed may be another process's fresh writes.
    if (this.failing) {
      const known = this.indexedHashes()
      await this.noticeWritesElsewhere(keys.filter((k) => !known.has(k)))
    }
    const chain: ChainBlock[] = []
    const notes: string[] = []
    let geometry = false
    let integrity = false
    // A block holding the prompt's last token is never restored, only its presence matters.
    const lastHeld = keys.length > 0 && keys.length * bs === n && options.exactPromptRule !== false
    const restorable = lastHeld ? keys.slice(0, -1) : keys
    // Loaded in order up to the first miss; each block's content is checked against its digest
    // before any tensor is handed out; the files are read a few blocks ahead (loadChain).
    for (const block of await this.store.loadChain(restorable)) chain.push({ hash: block.hash, payload: block.payload })
    const missed = (k: number): void => {
      const why = this.whyMissing(k, keys[k])
      geometry = why.geometry
      integrity = why.integrity
      notes.push(why.reason)
    }
    if (chain.length < restorable.length) missed(chain.length)
    else if (lastHeld) {
      const k = keys.length - 1
      if (await this.store.has(keys[k])) {
        this.counters.exactPromptDrops++
        notes.push(`all ${n} tokens are in blocks, but the decoder must prefill at least one token to produce logits, so block ${k} (the last) is left out`)
      } else missed(k)
    }
    if (geometry) this.counters.geometryMisses++
    if (keys.length === 0) notes.push(`the ${n}-token prompt is shorter than one block (${bs} tokens)`)
    if (chain.length === 0) return this.finish({ cachedTokens: 0, cache: null, blocks: 0, reason: notes.join('; ') }, n, integrity)
    try {
      const restored = restoreBlocks(chain, bs)
      const cache = modelCacheFromRestored(this.cfg, restored)
      this.engine?.completeCarries(cache)
      if (restored.walkedBack > 0) notes.push(`walked back ${restored.walkedBack} block(s) whose state was incomplete`)
      const reason = notes.length > 0 ? notes.join('; ') : undefined
      return this.finish({ cachedTokens: cache.tokenCount, cache, blocks: restored.hashes.length, reason }, n, integrity)
    } catch (e) {
      // RestoreRejected, or a malformed tensor the store's joins refuse: either way not a cache.
      if (!(e instanceof BlockStoreError)) throw e
      this.log({ kind: 'restore-rejected', reason: e.message })
      return this.finish({ cachedTokens: 0, cache: null, blocks: 0, reason: `restore rejected: ${e.message}` }, n, integrity)
    }
  }

  private checkEngine (engine: DeepseekV4Engine): void {
    let fp = this.engineGeometry.get(engine)
    if (fp === undefined) {
      fp = Geometry.fromConfig(engine.config, engine.profile).fingerprint
      this.engineGeometry.set(engine, fp)
    }
    if (fp !== this.geometryFingerprint) {
      throw new PdBridgeError(`prefillAndStore: the engine's geometry ${fp} (profile ${engine.profile.name}) is not the store's ${this.geometryFingerprint} (profile ${this.profile.name}); its blocks would never be served`)
    }
  }

  /**
   * A failed write-back: counted, remembered for /health, logged; never thrown. The block is simply
   * not stored, as if the store had evicted it.
   */
  private writeFailed (k: number, hash: string, err: unknown): StoredBlock {
    const e = err as { code?: unknown, cause?: { code?: unknown }, message?: unknown }
    const detail = err instanceof Error ? err.message : String(err)
    const found = typeof e?.code === 'string' ? e.code : typeof e?.cause?.code === 'string' ? e.cause.code : /\b(E[A-Z]{2,})\b/.exec(detail)?.[1]
    const code = found ?? null
    this.counters.writeFailures++
    this.failing = true
    this.lastFailure = { at: new Date().toISOString(), block: k, hash, code, detail }
    this.log({ kind: 'write-failed', block: k, hash, code, detail, writeFailures: this.counters.writeFailures })
    return { block: k, hash, written: false, failed: detail }
  }

  private async storeBoundary (cache: ModelCache, k: number, hash: string, parentHash: string | null): Promise<StoredBlock> {
    // Write-back is best-effort: a store that cannot be read for presence or written to (full,
    // read-only, permissions, I/O errors) costs this block, never the answer.
    let present: boolean
    try {
      present = await this.store.has(hash)
    } catch (e) {
      return this.writeFailed(k, hash, e)
    }
    if (present) {
      this.counters.reusedBlocks++
      const stored: StoredBlock = { block: k, hash, written: false }
      this.log({ kind: 'stored', ...stored })
      return stored
    }
    // One boundary snapshot at a time: built here, written, then dropped before the prefill goes on.
    this.counters.heldSnapshots++
    this.counters.peakHeldSnapshots = Math.max(this.counters.peakHeldSnapshots, this.counters.heldSnapshots)
    try {
      const payload = cacheToBlockPayload(this.cfg, cache, k, this.blockSize, { storage: this.storage })
      let put
      try {
        put = await this.store.put(hash, payload, { parentHash })
      } catch (e) {
        return this.writeFailed(k, hash, e)
      }
      if (put.written) {
        this.counters.writtenBlocks++
        this.failing = false
      }
      else this.counters.reusedBlocks++
      const stored: StoredBlock = { block: k, hash, written: put.written, bytes: put.written ? put.bytes : undefined }
      this.log({ kind: 'stored', ...stored })
      return stored
    } finally {
      this.counters.heldSnapshots--
    }
  }

  /**
   * The decoder's own prefill of `tokens` (the whole prompt), continuing from `fromCache` (a
   * lookup's cache, advanced in place) or from empty: run in chunks cut at block boundaries
   * (chunked == one-shot bit for bit), writing each full block as its boundary is reached.
   * At most one boundary snapshot is held at a time. `onProgress` hears the tokens prefilled so
   * far after each chunk but the last (a streaming server tells its client the prefill is alive).
   * `schedule` cuts the chunks smaller and runs each where the caller says.
   */
  async prefillAndStore (engine: DeepseekV4Engine, tokens: ArrayLike<number>, fromCache?: ModelCache,
    onProgress?: PrefillProgress, schedule: PrefillSchedule = {}): Promise<PrefillAndStoreResult> {
    checkTokens(tokens, 'prefillAndStore')
    this.checkEngine(engine)
    const cache = fromCache ?? engine.newCache()
    const n = tokens.length
    const bs = this.blockSize
    if (cache.tokenCount >= n) {
      throw new PdBridgeError(`prefillAndStore: the cache already holds ${cache.tokenCount} tokens of the ${n}-token prompt; at least one token must be prefilled to produce logits`)
    }
    const keys = this.store.keysFor(tokens)
    const storedBlocks: StoredBlock[] = []
    let logits: Float32Array | undefined
    const chunk = schedule.chunkTokens ?? Infinity
    if (chunk !== Infinity && (!Number.isSafeInteger(chunk) || chunk < 1)) throw new PdBridgeError(`prefillAndStore: chunkTokens must be a positive integer, got ${String(chunk)}`)
    const run = schedule.runChunk ?? (async <T>(work: () => T): Promise<T> => work())
    let pos = cache.tokenCount
    while (pos < n) {
      const end = Math.min(n, (Math.floor(pos / bs) + 1) * bs, pos + chunk)
      const from = pos
      const result = await run(() => engine.prefill(sliceTokens(tokens, from, end), cache, { logits: end === n ? 'last' : 'none' }))
      if (end === n) logits = result.logits
      pos = end
      if (pos % bs === 0) storedBlocks.push(await this.storeBoundary(cache, pos / bs - 1, keys[pos / bs - 1], pos / bs >= 2 ? keys[pos / bs - 2] : null))
      if (pos < n) await onProgress?.(pos, n)
    }
    if (logits === undefined) throw new PdBridgeError('prefillAndStore: the prefill produced no logits')
    return { cache, logits, storedBlocks }
  }
}
