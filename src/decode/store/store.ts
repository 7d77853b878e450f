// The paged SSD prefix-cache block store in oMLX's layout. It scans its root when opened, serves
// only blocks compatible with its layout (model, block size, layer types, signature, geometry) whose
// content matches the digest they were written with (checked on every load, before any tensor is
// handed out; a mismatch or a missing digest is refused, quarantined and counted), checks the
// filesystem on every index miss so blocks written by another process are found with no restart,
// writes blocks atomically (stamping their content digest), and evicts least-recently-used blocks
// past a size limit. With a block key it also stamps every block's keyed digest and serves only
// blocks whose keyed digest is the content's HMAC under that key (docs/block-store.md, "Authentication").
import type { KeyObject } from 'node:crypto'
import { mkdir, stat, unlink, utimes } from 'node:fs/promises'
import { basename, join } from 'node:path'
import { BlockStoreError } from './errors.ts'
import { syncDirectory } from '../../formats/atomic-file.ts'
import { blockKeyChain, isBlockKeyHex } from './block-key.ts'
import { blockPath, listBlockDir, readBlockFile, readBlockHeader, writeBlockFile, writeEncodedBlockFile, SUBDIRS, type BlockContents, type BlockHeader, type EncodedBlock } from './block-file.ts'
import { BlockIndex, type IndexEntry } from './block-index.ts'
import { canonicalCacheTypes, checkLayout, incompatibility, INTEGRITY_REASONS, META, unauthenticated, type BlockInfo, type Incompatibility, type IncompatibleReason, type StoreLayout } from './metadata.ts'
import { macMatches } from './content-digest.ts'
import type { BlockPayload } from './payload.ts'
import type { PyValue } from './python-repr.ts'
import { quarantineFile, quarantineRunName, QUARANTINE_DIR } from './quarantine.ts'
import { restoreChain, type ChainBlock, type RestoredCache } from './restore.ts'
import { RestoreRejected } from './deepseek-v4.ts'

/** Something the store did or refused, for the log. */
export type StoreEvent =
  | { kind: 'refused', hash: string, path: string, reason: IncompatibleReason, detail: string, during: 'scan' | 'lookup' | 'load' }
  | { kind: 'unreadable', path: string, problem: string }
  | { kind: 'temp-removed', path: string, why: string }
  | { kind: 'written', hash: string, path: string, bytes: number }
  | { kind: 'evicted', hash: string, path: string, bytes: number }
  | { kind: 'quarantined', hash: string, from: string, to: string, why: string }
  | { kind: 'restore-rejected', reason: string }

/** Options of `BlockStore.open`. */
export interface BlockStoreOptions {
  /** The cache root: blocks live at <root>/<hex>/<hash>.safetensors. */
  root: string
  /** What blocks must say to be served, and what written blocks say. */
  layout: StoreLayout
  /** Size limit of indexed blocks in bytes; least recently used blocks are evicted past it. Default: none. */
  maxSizeBytes?: number
  /** Receives every event; the default writes refusals and removals to stderr. */
  log?: (event: StoreEvent) => void
  /** A temporary file older than this is removed even if its writer's pid is alive (pid reuse). Default 1 h. */
  staleTempMs?: number
  /**
   * The deployment's block key (src/config/block-key.ts): every block written carries its keyed
   * digest, and only blocks whose keyed digest is the content's HMAC under it are served; any other
   * is refused and quarantined. Absent: blocks are integrity-checked (content_sha256) but not authenticated.
   */
  authKey?: KeyObject
  /**
   * A store inside oMLX's own cache directory (the omlx decoder kind): how blocks oMLX itself wrote
   * (no content digest, no geometry fingerprint, no keyed digest) are treated. `leave`: refused as a
   * miss and left where they are (never quarantined: they are oMLX's, and oMLX indexes them); a
   * block the bridge writes under the same key replaces it atomically. `serve`: served as they
   * are, checked for model, block size, layer types, signature and token count but with no digest
   * to vouch for their bytes (the user's choice; refused with a block key). Absent: our own
   * decoder's rule, such blocks are `unverified` and quarantined.
   */
  omlxWritten?: 'leave' | 'serve'
}

/** Whether a block's header is one oMLX itself wrote: none of the keys only our writers add. */
export function writtenByOmlx (info: BlockInfo): boolean {
  return info.contentSha256 === undefined && info.geometryFingerprint === undefined && info.contentMac === undefined
}

/** Counters since the store was opened. */
export interface StoreStats {
  hits: number
  misses: number
  /** Lookups that found a file on disk the index did not have yet (written by another process). */
  foundOnDisk: number
  /** Refused blocks by reason (at scan, lookup and load). */
  refused: Partial<Record<IncompatibleReason, number>>
  unreadable: number
  writes: number
  evictions: number
  evictedBytes: number
  quarantined: number
  tempRemoved: number
  /** Loads whose content matched its digest (every served block is one). */
  verified: number
}

/** What one scan found. */
export interface ScanReport {
  indexed: number
  refused: Partial<Record<IncompatibleReason, number>>
  unreadable: number
  tempRemoved: number
  tempKept: number
  totalBytes: number
}

/** A loaded block. */
export interface LoadedBlock {
  hash: string
  info: BlockInfo
  payload: BlockPayload
}

/** Result of `put`. */
export interface PutResult {
  /** False when a compatible block with this key was already there. */
  written: boolean
  path: string
  bytes: number
}

/** Result of `restore`: a cache, or why there is none. */
export type RestoreResult =
  | { ok: true, cache: RestoredCache }
  | { ok: false, reason: string, matchedBlocks: number }

/** Temp-name prefixes of writes in flight in this process, by any store instance (a scan never removes them), with counts. */
const inFlight = new Map<string, number>()

/** Block files loadChain reads ahead of the one being checked. */
const LOAD_AHEAD = 8

/**
 * An integrity refusal when a block's content does not hash to the digest it was written with, or,
 * for a store with a block key, when its keyed digest is not the content's HMAC under the key.
 */
function contentMismatch (contents: BlockContents, keyed: boolean): Incompatibility | null {
  const { info } = contents.header
  if (info.contentSha256 !== contents.contentDigest) {
    return { reason: 'integrity', detail: `content hashes to ${contents.contentDigest}, but ${META.contentSha256} says ${String(info.contentSha256)}: the bytes changed after the block was written` }
  }
  if (keyed && (contents.contentMac === undefined || !macMatches(info.contentMac, contents.contentMac))) {
    return { reason: 'authentication', detail: `${META.contentMac} is not the content's HMAC under this deployment's block key: the block was changed by someone without the key (its ${META.contentSha256} recomputed), or written under another key` }
  }
  return null
}

function defaultLog (e: StoreEvent): void {
  if (e.kind === 'refused') process.stderr.write(`pd-bridge store: refused block ${e.hash} (${e.reason}): ${e.detail}\n`)
  else if (e.kind === 'unreadable') process.stderr.write(`pd-bridge store: unreadable block file ${e.path}: ${e.problem}\n`)
  else if (e.kind === 'temp-removed') process.stderr.write(`pd-bridge store: removed leftover ${e.path} (${e.why})\n`)
  else if (e.kind === 'quarantined') process.stderr.write(`pd-bridge store: quarantined ${e.from} -> ${e.to} (${e.why})\n`)
  else if (e.kind === 'restore-rejected') process.stderr.write(`pd-bridge store: restore rejected: ${e.reason}\n`)
}

/** Whether a process with this pid exists (EPERM: it exists but is someone else's, so it counts as alive). */
export function pidAlive (pid: number): boolean {
  try {
    process.kill(pid, 0)
    return true
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === 'EPERM'
  }
}

/** Refuse a payload that does not fit `layout`: layer count, meta states, cache types per layer. */
export function checkBlockPayload (layout: StoreLayout, hash: string, payload: BlockPayload): void {
  const n = layout.layerCacheTypes.length
  if (payload == null || !Array.isArray(payload.layers)) throw new BlockStoreError(hash, 'payload must have a layers list')
  if (payload.layers.length !== n) throw new BlockStoreError(hash, `payload has ${payload.layers.length} layers, the store's layout has ${n}`)
  if (!Array.isArray(payload.layerMetaStates) || payload.layerMetaStates.length !== n) {
    throw new BlockStoreError(hash, `payload needs ${n} layer meta states, has ${payload.layerMetaStates?.length}`)
  }
  const ours = canonicalCacheTypes(layout.layerCacheTypes)
  const theirs = canonicalCacheTypes(payload.layerCacheTypes ?? [])
  const k = ours.findIndex((t, i) => theirs[i] !== t)
  if (k >= 0) throw new BlockStoreError(hash, `payload layer ${k} is ${theirs[k]}, the store's layout says ${ours[k]}`)
  payload.layers.forEach((l, i) => {
    const listType = ours[i] === 'CacheList'
    if (l.kind !== 'placeholder' && (l.kind === 'cache-list') !== listType) {
      throw new BlockStoreError(hash, `payload layer ${i} is a ${l.kind} but its cache type is ${ours[i]}`)
    }
  })
}

/** The block store. Open with `BlockStore.open`. */
export class BlockStore {
  private readonly index = new BlockIndex()
  /** The latest refusal per key (dropped when the key is served or written), so a caller can say why a load missed. */
  private readonly refusals = new Map<string, { reason: IncompatibleReason, detail: string }>()
  private readonly counters: StoreStats = { hits: 0, misses: 0, foundOnDisk: 0, refused: {}, unreadable: 0, writes: 0, evictions: 0, evictedBytes: 0, quarantined: 0, tempRemoved: 0, verified: 0 }
  private runDir: string | undefined
  private readonly log: (event: StoreEvent) => void

  private constructor (
    /** The cache root. */
    readonly root: string,
    /** The layout blocks must match. */
    readonly layout: StoreLayout,
    /** Size limit in bytes (Infinity for none). */
    readonly maxSizeBytes: number,
    log: ((event: StoreEvent) => void) | undefined,
    private readonly staleTempMs: number,
    /** The block key (absent: blocks are not authenticated); builder threads encode with it (writer/build-pool.ts). */
    readonly authKey: KeyObject | undefined,
    /** BlockStoreOptions.omlxWritten. */
    readonly omlxWritten: 'leave' | 'serve' | undefined,
  ) {
    this.log = log ?? defaultLog
  }

  /** Create the root and its sixteen subdirectories if needed, then scan. */
  static async open (options: BlockStoreOptions): Promise<BlockStore> {
    checkLayout(options.layout)
    const max = options.maxSizeBytes ?? Infinity
    if (!(max > 0)) throw new BlockStoreError(options.root, `maxSizeBytes must be positive, got ${max}`)
    if (options.authKey !== undefined && options.authKey?.type !== 'secret') throw new BlockStoreError(options.root, 'authKey must be a secret KeyObject (src/config/block-key.ts)')
    const omlx = options.omlxWritten
    if (omlx !== undefined && omlx !== 'leave' && omlx !== 'serve') throw new BlockStoreError(options.root, `omlxWritten must be 'leave' or 'serve', got ${JSON.stringify(omlx)}`)
    if (omlx === 'serve' && options.authKey !== undefined) throw new BlockStoreError(options.root, 'omlxWritten \'serve\' cannot go with a block key: blocks oMLX wrote carry no keyed digest, so a keyed deployment would refuse every one')
    const store = new BlockStore(options.root, options.layout, max, options.log, options.staleTempMs ?? 3_600_000, options.authKey, omlx)
    try {
      await mkdir(options.root, { recursive: true })
      for (const sub of SUBDIRS) await mkdir(join(options.root, sub), { recursive: true })
    } catch (e) {
      throw new BlockStoreError(options.root, `cannot create the store directories: ${(e as Error).message}`)
    }
    await syncDirectory(options.root)
    await store.rescan()
    return store
  }

  /** Whether blocks are authenticated (a block key is set), not only integrity-checked. */
  get authenticated (): boolean {
    return this.authKey !== undefined
  }

  /** Counters since open (a copy). */
  get stats (): StoreStats {
    return { ...this.counters, refused: { ...this.counters.refused } }
  }

  /** Number of indexed blocks. */
  get size (): number {
    return this.index.size
  }

  /** Bytes of indexed blocks. */
  get totalBytes (): number {
    return this.index.totalBytes
  }

  /** Indexed blocks from least to most recently used. */
  entries (): { hash: string, path: string, fileSize: number, lastAccess: number }[] {
    return this.index.list().map((e) => ({ hash: e.hash, path: e.path, fileSize: e.fileSize, lastAccess: e.lastAccess }))
  }

  /** Why the last lookup of `hash` was refused, if it was and nothing was served or written under it since. */
  refusalOf (hash: string): { reason: IncompatibleReason, detail: string } | undefined {
    return this.refusals.get(hash)
  }

  private refuse (hash: string, path: string, reason: IncompatibleReason, detail: string, during: 'scan' | 'lookup' | 'load'): void {
    this.refusals.delete(hash)
    this.refusals.set(hash, { reason, detail })
    // A bounded memory of recent refusals: a shared directory may hold any number of foreign blocks.
    if (this.refusals.size > 4096) this.refusals.delete(this.refusals.keys().next().value as string)
    this.counters.refused[reason] = (this.counters.refused[reason] ?? 0) + 1
    this.log({ kind: 'refused', hash, path, reason, detail, during })
  }

  /** Whether a block's header lets it be served here: the layout's rules, then (with a key) a keyed digest present. */
  private judge (info: BlockInfo, hash: string): Incompatibility | null {
    if (this.servesOmlxBlock(info)) {
      // oMLX's own blocks, served on the user's say-so: every layout rule of oMLX's still holds; the
      // digest and our geometry fingerprint are what oMLX does not write.
      const why = incompatibility(info, { ...this.layout, geometryFingerprint: info.geometryFingerprint as string }, hash)
      return why?.reason === 'unverified' ? null : why
    }
    return incompatibility(info, this.layout, hash) ?? (this.authKey === undefined ? null : unauthenticated(info))
  }

  private servesOmlxBlock (info: BlockInfo): boolean {
    return this.omlxWritten === 'serve' && writtenByOmlx(info)
  }

  /** Whether a refused file must stay where it is: a block oMLX wrote, in a store inside oMLX's directory. */
  private leftAlone (info: BlockInfo | undefined): boolean {
    return this.omlxWritten !== undefined && info !== undefined && writtenByOmlx(info)
  }

  private unreadable (path: string, problem: string): void {
    this.counters.unreadable++
    this.log({ kind: 'unreadable', path, problem })
  }

  /** Read a block's header and decide whether it may be indexed. */
  private async examine (hash: string, path: string, during: 'scan' | 'lookup'): Promise<BlockHeader | null> {
    let header: BlockHeader
    try {
      header = await readBlockHeader(path)
    } catch (e) {
      this.unreadable(path, e instanceof BlockStoreError ? e.problem : (e as Error).message)
      return null
    }
    const why = this.judge(header.info, hash)
    if (why !== null) {
      this.refuse(hash, path, why.reason, why.detail, during)
      if (INTEGRITY_REASONS.has(why.reason) && !this.leftAlone(header.info)) await this.quarantineQuietly(hash, path, `${why.reason}: ${why.detail}`)
      return null
    }
    return header
  }

  private entryFrom (hash: string, header: BlockHeader, lastAccess: number): IndexEntry {
    return { hash, path: header.path, fileSize: header.fileSize, mtimeMs: header.mtimeMs, lastAccess, info: header.info, plan: header.plan }
  }

  /**
   * Rebuild the index from disk: new files are added, vanished ones dropped, changed ones re-read;
   * LRU order follows each file's last use (its mtime, which a use updates). Leftover temporary
   * files whose writer is gone are removed. Nothing is evicted here.
   */
  async rescan (): Promise<ScanReport> {
    const report: ScanReport = { indexed: 0, refused: {}, unreadable: 0, tempRemoved: 0, tempKept: 0, totalBytes: 0 }
    const before = { refused: { ...this.counters.refused }, unreadable: this.counters.unreadable }
    const entries: IndexEntry[] = []
    for (const item of await listBlockDir(this.root)) {
      if (item.kind === 'temp') {
        if (await this.removeTempIfStale(item.path, item.pid)) report.tempRemoved++
        else report.tempKept++
        continue
      }
      let st
      try {
        st = await stat(item.path)
      } catch {
        continue
      }
      if (!st.isFile()) continue
      const known = this.index.get(item.hash)
      if (known !== undefined && known.mtimeMs === st.mtimeMs && known.fileSize === st.size) {
        entries.push(known)
        continue
      }
      const header = await this.examine(item.hash, item.path, 'scan')
      if (header !== null) entries.push(this.entryFrom(item.hash, header, known?.lastAccess ?? header.mtimeMs))
    }
    this.index.reset(entries)
    report.indexed = this.index.size
    report.totalBytes = this.index.totalBytes
    for (const [reason, n] of Object.entries(this.counters.refused) as [IncompatibleReason, number][]) {
      const d = n - (before.refused[reason] ?? 0)
      if (d > 0) report.refused[reason] = d
    }
    report.unreadable = this.counters.unreadable - before.unreadable
    return report
  }

  private async removeTempIfStale (path: string, pid: number): Promise<boolean> {
    for (const prefix of inFlight.keys()) if (path.startsWith(prefix)) return false
    let why: string | undefined
    if (pid === process.pid) {
      why = 'left by an earlier write of this process'
    } else if (!pidAlive(pid)) {
      why = `writer pid ${pid} is gone`
    } else {
      // The pid may have been reused by an unrelated process; a write is never this slow.
      const age = await stat(path).then((st) => Date.now() - st.mtimeMs, () => -1)
      if (age > this.staleTempMs) why = `untouched for ${Math.round(age / 1000)} s`
    }
    if (why === undefined) return false
    try {
      await unlink(path)
    } catch {
      return false
    }
    this.counters.tempRemoved++
    this.log({ kind: 'temp-removed', path, why })
    return true
  }

  /**
   * Index lookup, checked against the file: a vanished file drops the entry, a changed one (another
   * process replaced it) is examined again. On a miss the file itself is examined, so blocks other
   * processes wrote become visible without a rescan.
   */
  private async locate (hash: string): Promise<IndexEntry | null> {
    const path = blockPath(this.root, hash)
    let st
    try {
      st = await stat(path)
    } catch {
      this.index.remove(hash)
      return null
    }
    const known = this.index.get(hash)
    if (known !== undefined && known.mtimeMs === st.mtimeMs && known.fileSize === st.size) return known
    if (!st.isFile()) return null
    this.index.remove(hash)
    const header = await this.examine(hash, path, 'lookup')
    if (header === null) return null
    const entry = this.entryFrom(hash, header, known?.lastAccess ?? Date.now())
    this.index.add(entry)
    if (known === undefined) this.counters.foundOnDisk++
    return entry
  }

  private checkHash (hash: string): void {
    if (typeof hash !== 'string' || !isBlockKeyHex(hash)) throw new BlockStoreError(String(hash), 'a block key is 64 lowercase hex digits')
  }

  private async touch (entry: IndexEntry): Promise<void> {
    const now = Date.now()
    this.index.touch(entry.hash, now)
    // The file's mtime carries the LRU order to the next scan and to other processes.
    try {
      await utimes(entry.path, now / 1000, now / 1000)
      entry.mtimeMs = (await stat(entry.path)).mtimeMs
    } catch {
      // A vanished file is noticed by the next load or scan.
    }
  }

  /** Whether a servable block with this key exists (index, then disk). Counts a hit or a miss. */
  async has (hash: string): Promise<boolean> {
    this.checkHash(hash)
    const entry = await this.locate(hash)
    if (entry === null) {
      this.counters.misses++
      return false
    }
    this.counters.hits++
    return true
  }

  /**
   * Load a block, or null when there is no servable one (missing, incompatible or unreadable; the
   * file is re-checked, since another process may have replaced it). Counts a hit or a miss.
   */
  async load (hash: string): Promise<LoadedBlock | null> {
    this.checkHash(hash)
    return await this.loadRead(hash, null)
  }

  /**
   * load() of consecutive blocks in order, stopping at the first that is not served (what a
   * prefix lookup restores). Up to `ahead` files are read before their turn, so the file-system
   * round trips of one block overlap the next ones'; each block is still located, checked against
   * its digest, counted and touched in order, exactly as load() would, and nothing past the first
   * miss is counted or touched. What was read early is checked against its digest and the
   * store's layout like any read (a file replaced meanwhile is another valid copy of the block or a refusal).
   */
  async loadChain (hashes: readonly string[], ahead = LOAD_AHEAD): Promise<LoadedBlock[]> {
    for (const hash of hashes) this.checkHash(hash)
    const early = new Map<number, Promise<{ path: string, contents: BlockContents } | null>>()
    const readEarly = (i: number): void => {
      if (i >= hashes.length || early.has(i)) return
      const path = blockPath(this.root, hashes[i])
      // A failed early read is read again in its turn, where load()'s error handling applies.
      early.set(i, readBlockFile(path, this.authKey).then((contents) => ({ path, contents }), () => null))
    }
    const out: LoadedBlock[] = []
    for (let i = 0; i < hashes.length; i++) {
      for (let j = i; j <= i + ahead; j++) readEarly(j)
      const read = await early.get(i)!
      early.delete(i)
      const block = await this.loadRead(hashes[i], read)
      if (block === null) break
      out.push(block)
    }
    return out
  }

  // load() with the block's file perhaps read already (by loadChain).
  private async loadRead (hash: string, read: { path: string, contents: BlockContents } | null): Promise<LoadedBlock | null> {
    const entry = await this.locate(hash)
    if (entry === null) {
      this.counters.misses++
      return null
    }
    let contents
    try {
      contents = read !== null && read.path === entry.path ? read.contents : await readBlockFile(entry.path, this.authKey)
    } catch (e) {
      this.index.remove(hash)
      // A file deleted since it was indexed is a plain miss; anything else is worth a log line.
      const stillThere = await stat(entry.path).then(() => true, () => false)
      if (stillThere) this.unreadable(entry.path, e instanceof BlockStoreError ? e.problem : (e as Error).message)
      this.counters.misses++
      return null
    }
    const info = contents.header.info
    const why = this.judge(info, hash) ?? (this.servesOmlxBlock(info) ? null : contentMismatch(contents, this.authKey !== undefined))
    if (why !== null) {
      this.index.remove(hash)
      this.refuse(hash, entry.path, why.reason, why.detail, 'load')
      if (INTEGRITY_REASONS.has(why.reason) && !this.leftAlone(info)) await this.quarantineQuietly(hash, entry.path, `${why.reason}: ${why.detail}`)
      this.counters.misses++
      return null
    }
    // Only now, with every byte checked against the digest (and the keyed digest) written with it, is the payload handed out.
    this.refusals.delete(hash)
    if (!this.servesOmlxBlock(info)) this.counters.verified++
    this.counters.hits++
    await this.touch(entry)
    return { hash, info: contents.header.info, payload: contents.payload }
  }

  private checkPayload (hash: string, payload: BlockPayload): void {
    checkBlockPayload(this.layout, hash, payload)
  }

  /**
   * Quarantine a block that can never be served (an integrity refusal). Another process sharing the
   * store may have moved it first (a plain ENOENT then): nothing to do. Any other failure is logged
   * as unreadable, never thrown: the block is refused either way.
   */
  private async quarantineQuietly (hash: string, path: string, why: string): Promise<void> {
    try {
      await this.quarantine(hash, path, why)
    } catch (e) {
      const gone = await stat(path).then(() => false, () => true)
      if (!gone) this.unreadable(path, `refused (${why}) but could not be quarantined: ${e instanceof BlockStoreError ? e.problem : (e as Error).message}`)
    }
  }

  private async quarantine (hash: string, path: string, why: string): Promise<void> {
    this.runDir ??= join(this.root, QUARANTINE_DIR, quarantineRunName())
    // The same key quarantined twice by this store gets a fresh run directory: nothing is overwritten.
    if (await stat(join(this.runDir, hash[0], basename(path))).then(() => true, () => false)) {
      this.runDir = join(this.root, QUARANTINE_DIR, quarantineRunName())
    }
    const to = await quarantineFile(path, this.runDir)
    this.counters.quarantined++
    this.log({ kind: 'quarantined', hash, from: path, to, why })
  }

  /**
   * Store a full block under `hash` (its chained key). A compatible block already there is kept
   * (and marked used); an incompatible or unreadable file under the same name is moved to the
   * quarantine first, never deleted. The write is atomic; then the size limit is enforced, never
   * evicting the block just written. `parentHash` (the previous block's key; null for the first
   * block) is stamped as oMLX's `parent_hash`.
   */
  async put (hash: string, payload: BlockPayload, options: { parentHash?: string | null } = {}): Promise<PutResult> {
    if (options.parentHash != null) this.checkHash(options.parentHash)
    this.checkHash(hash)
    this.checkPayload(hash, payload)
    return await this.place(hash, async () => await this.writeTracked(hash, async () => await writeBlockFile(this.root, this.layout, hash, payload, Date.now() / 1000, options.parentHash ?? null, this.authKey)))
  }

  /**
   * `put` for a block already encoded (encodeBlockFile, by a builder thread): the same rules (a
   * compatible block there is kept, an incompatible file quarantined, the size limit enforced),
   * and the bytes must be a block this store serves under `hash` (its header is read back and
   * checked before the block is indexed; a refused one is quarantined and the call fails).
   */
  async putEncoded (hash: string, block: EncodedBlock): Promise<PutResult> {
    this.checkHash(hash)
    if (!(block?.bytes instanceof Uint8Array) || typeof block.contentDigest !== 'string') throw new BlockStoreError(hash, 'an encoded block needs its bytes (a Uint8Array) and its content digest')
    return await this.place(hash, async () => await this.writeTracked(hash, async () => await writeEncodedBlockFile(this.root, hash, block)))
  }

  // Everything put does around the write itself.
  private async place (hash: string, write: () => Promise<{ path: string, bytes: number }>): Promise<PutResult> {
    const path = blockPath(this.root, hash)
    const existing = await this.locate(hash)
    if (existing !== null) {
      await this.touch(existing)
      return { written: false, path, bytes: existing.fileSize }
    }
    const onDisk = await stat(path).then(() => true, () => false)
    if (onDisk) {
      // locate() refused it (and logged why); keep the bytes, out of the way. A file another process
      // replaced with a servable block in the meantime is simply used.
      let why: string
      let foreign = false
      try {
        const header = await readBlockHeader(path)
        foreign = this.leftAlone(header.info)
        const refusal = this.judge(header.info, hash)
        if (refusal === null) {
          const entry = this.entryFrom(hash, header, Date.now())
          this.index.add(entry)
          await this.touch(entry)
          return { written: false, path, bytes: header.fileSize }
        }
        why = `${refusal.reason}: ${refusal.detail}`
      } catch (e) {
        why = `unreadable: ${e instanceof BlockStoreError ? e.problem : (e as Error).message}`
      }
      // oMLX's own block under this key is replaced by the atomic rename of ours (same tokens, same
      // model; oMLX reads it by path); anything else is moved aside first.
      if (!foreign) await this.quarantine(hash, path, why)
    }
    const written = await write()
    this.refusals.delete(hash)
    const header = await readBlockHeader(written.path)
    const refusal = this.judge(header.info, hash)
    if (refusal !== null) {
      // Only bytes encoded elsewhere (a builder without the block key, say) can get here: never index what would not be served.
      await this.quarantine(hash, written.path, `${refusal.reason}: ${refusal.detail}`)
      throw new BlockStoreError(written.path, `the block written is not one this store serves under ${hash} (${refusal.reason}: ${refusal.detail}); quarantined`)
    }
    this.index.add(this.entryFrom(hash, header, Date.now()))
    this.counters.writes++
    this.log({ kind: 'written', hash, path: written.path, bytes: written.bytes })
    await this.enforceSizeLimit(hash)
    return { written: true, path: written.path, bytes: written.bytes }
  }

  private async writeTracked (hash: string, write: () => Promise<{ path: string, bytes: number }>): Promise<{ path: string, bytes: number }> {
    // Register the temp-name prefix, so a scan in this process (another store instance too) leaves it alone.
    const marker = `${blockPath(this.root, hash)}.partial-${process.pid}-`
    inFlight.set(marker, (inFlight.get(marker) ?? 0) + 1)
    try {
      return await write()
    } finally {
      const left = (inFlight.get(marker) ?? 1) - 1
      if (left > 0) inFlight.set(marker, left)
      else inFlight.delete(marker)
    }
  }

  /** Evict least recently used blocks (deleting their files) until under the limit; `protect` stays. */
  async enforceSizeLimit (protect?: string): Promise<number> {
    let evicted = 0
    while (this.index.totalBytes > this.maxSizeBytes) {
      const victim = this.index.oldest(protect)
      if (victim === undefined) break
      this.index.remove(victim.hash)
      try {
        await unlink(victim.path)
      } catch (e) {
        if ((e as NodeJS.ErrnoException).code !== 'ENOENT') throw new BlockStoreError(victim.path, `cannot evict: ${(e as Error).message}`)
      }
      evicted++
      this.counters.evictions++
      this.counters.evictedBytes += victim.fileSize
      this.log({ kind: 'evicted', hash: victim.hash, path: victim.path, bytes: victim.fileSize })
    }
    return evicted
  }

  /** The chained keys of the full blocks of `tokenIds` under this store's model name and block size. */
  keysFor (tokenIds: ArrayLike<number | bigint>, extraKeysFor?: (blockIndex: number) => PyValue | undefined): string[] {
    return blockKeyChain(this.layout.modelName, tokenIds, this.layout.blockSize, extraKeysFor)
  }

  /** The keys of the longest prefix of `tokenIds` whose blocks are all servable. */
  async matchPrefix (tokenIds: ArrayLike<number | bigint>, extraKeysFor?: (blockIndex: number) => PyValue | undefined): Promise<string[]> {
    const matched: string[] = []
    for (const hash of this.keysFor(tokenIds, extraKeysFor)) {
      if (!(await this.has(hash))) break
      matched.push(hash)
    }
    return matched
  }

  /**
   * Rebuild the cache for the longest stored prefix of `tokenIds`: load the matched blocks (a block
   * that fails to load cuts the chain there), then apply the restore rules (walk-back, pooling
   * delta chains, rotating offsets). A rejection is logged and returned, never thrown.
   */
  async restore (tokenIds: ArrayLike<number | bigint>, extraKeysFor?: (blockIndex: number) => PyValue | undefined): Promise<RestoreResult> {
    const chain: ChainBlock[] = []
    for (const hash of await this.matchPrefix(tokenIds, extraKeysFor)) {
      const block = await this.load(hash)
      if (block === null) break
      chain.push({ hash, payload: block.payload })
    }
    if (chain.length === 0) return { ok: false, reason: 'no stored block matches the first block of the prompt', matchedBlocks: 0 }
    try {
      return { ok: true, cache: restoreChain(chain, this.layout.blockSize) }
    } catch (e) {
      if (!(e instanceof RestoreRejected)) throw e
      this.log({ kind: 'restore-rejected', reason: e.message })
      return { ok: false, reason: e.message, matchedBlocks: chain.length }
    }
  }
}
