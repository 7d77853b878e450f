// The streaming block writer: a sealed capture on local disk (a mount of the capture root, or the
// front door's spool of it from the share) becomes the decoder's blocks, one boundary at a time. For block k it reads only that block's
// slices of each layer file (the boundary snapshot at b = (k+1)*bs and this block's pooled rows),
// builds the payload with the decoder's own mapping, writes it (store.put: atomic), and releases
// everything before block k+1. What it holds is one block's state and payload, whatever the prompt
// length. Before any block is keyed, the capture's token digest must be the digest of the ids the
// blocks are keyed under. `finalize` writes what is left, re-reads every block through the store
// (which checks each block's content digest) and checks each against the fingerprint of what was
// built, then reports.
import { join } from 'node:path'
import { PdBridgeError } from '../../errors.ts'
import { checkManifestTokens, MANIFEST_FILE, type CaptureManifest } from '../../wire/manifest.ts'
import { openCaptureFiles, type OpenedCapture } from './capture-files.ts'
import { blockCacheBytes, blockPayloadFromState, readBlockState } from './block-state.ts'
import { payloadDigest, payloadTensorBytes } from './digest.ts'
import type { BuiltBlock } from './block-build.ts'
import { BlockBuildPool } from './build-pool.ts'
import { HeldBytes } from './held-bytes.ts'
import type { ModelCache } from '../../model/engine/index.ts'
import { checkCaptureTarget, type BlockTarget, type WriterSidecarJson } from './target.ts'

/** What a writer starts from (besides where the capture is). */
export interface BlockWriterOptions {
  /** The decoder's store (a DecoderPrefixCache is one). */
  target: BlockTarget
  /** The decoder's sidecar the capture was computed under (its JSON and fingerprint). */
  sidecar: { json: WriterSidecarJson, fingerprint: string }
  /** The capture's request id. */
  requestId: string
  /** The prompt's token ids (T = tokens.length): the block keys are chained over them. */
  tokens: ArrayLike<number>
  /** When the capture was spooled from the share (src/front/stages/capture-source.ts): reported in the timings. */
  spool?: SpoolTimes
  /**
   * Builder threads (build-pool.ts): with n >= 1 and at least two blocks to write, n threads read,
   * build and encode blocks ahead (at most 2n past the one being put) while this thread puts them
   * in the store in order. 0 (the default): every step on this thread. The blocks are the same.
   */
  builders?: number
}

/** One block the writer put in the store. */
export interface WrittenBlock {
  block: number
  hash: string
  /** The block's boundary (k+1)*bs. */
  boundary: number
  /** False when a compatible block with this key was already stored (kept, and verified all the same). */
  written: boolean
  /** File size of the block. */
  bytes: number
}

/** What `finalize` reports. */
export interface BlockWriterReport {
  requestId: string
  /** The capture's state: done (T' == T) or partial (T' < T). */
  state: 'done' | 'partial'
  tokenCount: number
  sealedLength: number
  blockSize: number
  /** P: the boundary a continued (warm-extended) capture started from, 0 for one from the start. */
  startToken: number
  /** Blocks of the valid prefix past P: floor(T' / bs) - P / bs; every one was put and verified. */
  blocks: number
  written: number
  reused: number
  verified: number
  /** File bytes of those blocks. */
  bytes: number
  /**
   * The most bytes of block data held at once (block-local cache, a read in flight, the payload).
   * With builder threads, a bound: the largest sum of the builds' own peaks over any 2n consecutive
   * blocks (at most that many are in flight together), or this thread's peak if larger.
   */
  peakHeldBytes: number
  /**
   * Milliseconds: open (manifest, checksums), read, build, write (store.put), verify, total; with
   * builder threads read and build are 0 here and buildWait is how long this thread waited for a
   * built block, builderRead and builderBuild the threads' own times summed (CPU, not wall); for
   * a spooled capture also spool (stream until the capture was local), firstLayer and lastLayer (when they
   * landed in the spool) and firstBlockAfterLastLayer (from the last layer to the first block).
   */
  timings: Record<string, number>
}

/** When a spooled capture was complete, and when its first and last layer landed (ms from `started`). */
export interface SpoolTimes {
  /** performance.now() when the spool started: the report's total counts from it. */
  started: number
  spoolMs: number
  firstLayer: number
  lastLayer: number
}

export function checkTokens (tokens: ArrayLike<number>): void {
  if (tokens === null || typeof tokens !== 'object' || typeof tokens.length !== 'number') throw new PdBridgeError('block writer: tokens must be an array of token ids')
  for (let i = 0; i < tokens.length; i++) {
    if (!Number.isSafeInteger(tokens[i]) || tokens[i] < 0) throw new PdBridgeError(`block writer: token ${i} is ${String(tokens[i])}, not a non-negative integer token id`)
  }
}

/** Writes one capture's blocks. Open with `BlockWriter.open`. */
/**
 * Block k's state, read: build its payload and put it in the store under keys[k] after keys[k-1].
 * What both writers (this one and the segment writer) do once a block's state is in hand; held
 * bytes and the build and write timings are counted as they go.
 */
export async function putBlockState (target: Pick<BlockTarget, 'cfg' | 'store' | 'storage'>, state: ModelCache, k: number, keys: readonly string[], held: HeldBytes,
  timings: Record<string, number>): Promise<{ put: Awaited<ReturnType<BlockTarget['store']['put']>>, digest: string }> {
  const bs = target.store.layout.blockSize
  held.set('cache', blockCacheBytes(state))
  let t = performance.now()
  const payload = blockPayloadFromState(target.cfg, state, k, bs, target.storage)
  held.set('payload', payloadTensorBytes(payload))
  const digest = payloadDigest(payload)
  timings.build += performance.now() - t
  t = performance.now()
  const put = await target.store.put(keys[k], payload, { parentHash: k > 0 ? keys[k - 1] : null })
  timings.write += performance.now() - t
  return { put, digest }
}

export class BlockWriter {
  private readonly held = new HeldBytes()
  private readonly done: Array<WrittenBlock & { digest: string }> = []
  private readonly timings: Record<string, number> = { read: 0, build: 0, write: 0 }
  private readonly started: number
  private finished = false
  private firstBlockAt: number | undefined
  /** Builder threads, started at the first parallel step; builds launched ahead, by block. */
  private pool: BlockBuildPool | undefined
  private readonly ahead = new Map<number, Promise<BuiltBlock>>()
  private nextLaunch = 0
  /** Each built block's own peak, in order (for the bound on what was in flight). */
  private readonly builtPeaks: number[] = []

  private constructor (
    private readonly capture: OpenedCapture,
    private readonly target: BlockTarget,
    private readonly keys: string[],
    /** The first block this capture holds: P / bs for a continued capture, else 0. */
    readonly firstBlock: number,
    readonly requestId: string,
    started: number,
    openMs: number,
    private readonly spool: SpoolTimes | undefined,
    private readonly builders: number,
  ) {
    this.started = started
    this.timings.open = openMs
  }

  /**
   * Open the sealed capture in `dir` for writing: the sidecar must describe the target's decoder
   * (checkCaptureTarget), the manifest must match the request (id, T = tokens.length,
   * fingerprint) with every layer file intact (openCaptureFiles), and its token digest must be the
   * digest of `tokens` (checkManifestTokens), all before any block key is computed. Nothing is
   * written yet. A capture spooled from the share passes `spool`: the report then counts from the
   * spool's start and says when its layers landed.
   */
  static async open (dir: string, options: BlockWriterOptions): Promise<BlockWriter> {
    const started = options.spool?.started ?? performance.now()
    const { target, sidecar, requestId, tokens, spool } = options
    const builders = options.builders ?? 0
    if (!Number.isSafeInteger(builders) || builders < 0) throw new PdBridgeError(`block writer: builders must be a non-negative integer, got ${String(builders)}`)
    checkTokens(tokens)
    checkCaptureTarget(sidecar.json, target)
    const bs = target.store.layout.blockSize
    const t0 = performance.now()
    const capture = await openCaptureFiles(dir, { requestId, tokenCount: tokens.length, sidecarFingerprint: sidecar.fingerprint }, sidecar.json.layers.length, bs)
    try {
      // Before a single key is chained: the capture must say it was computed over exactly these ids.
      checkManifestTokens(capture.manifest, tokens, join(dir, MANIFEST_FILE))
    } catch (e) {
      await capture.close()
      throw e
    }
    const keys = target.store.keysFor(tokens).slice(0, Math.floor(capture.manifest.sealedLength / bs))
    let firstBlock: number
    try {
      firstBlock = await continuedFrom(capture.manifest, keys, target, bs)
    } catch (e) {
      await capture.close()
      throw e
    }
    return new BlockWriter(capture, target, keys, firstBlock, requestId, started, performance.now() - t0, spool, builders)
  }

  /** The validated manifest. */
  get manifest (): CaptureManifest {
    return this.capture.manifest
  }

  /** Blocks this capture writes: floor(T' / bs), less the P / bs a continued capture starts after. */
  get blockCount (): number {
    return this.keys.length - this.firstBlock
  }

  /** Blocks put so far. */
  get blocksWritten (): number {
    return this.done.length
  }

  /** Bytes of block data held now (0 between blocks). */
  get heldBytes (): number {
    return this.held.current
  }

  /** The most bytes of block data held at once so far. */
  get peakHeldBytes (): number {
    return Math.max(this.held.peak, this.inFlightBound())
  }

  /** Write the next block and release it; null when every block of the prefix is written. */
  async writeNext (): Promise<WrittenBlock | null> {
    if (this.finished) throw new PdBridgeError(`block writer ${this.requestId}: already finalized`)
    const k = this.firstBlock + this.done.length
    if (k >= this.keys.length) return null
    if (this.pool !== undefined || (this.builders > 0 && this.keys.length - k >= 2)) return await this.writeBuilt(k)
    const { cfg, store } = this.target
    const bs = store.layout.blockSize
    const hash = this.keys[k]
    try {
      const t = performance.now()
      const state = await readBlockState(cfg, this.capture.layers, k, bs, this.held)
      this.timings.read += performance.now() - t
      const { put, digest } = await putBlockState(this.target, state, k, this.keys, this.held, this.timings)
      return this.record(k, hash, put, digest)
    } finally {
      // The block's state and payload go out of scope here; nothing of it is kept but the digest.
      this.held.clear()
    }
  }

  private record (k: number, hash: string, put: { written: boolean, bytes: number }, digest: string): WrittenBlock {
    this.firstBlockAt ??= performance.now()
    const block: WrittenBlock = { block: k, hash, boundary: (k + 1) * this.target.store.layout.blockSize, written: put.written, bytes: put.bytes }
    this.done.push({ ...block, digest })
    return block
  }

  // Builds launched ahead of block k: up to 2n past it, on the builder threads.
  private launchFrom (k: number): void {
    if (this.pool === undefined) {
      const { cfg, store, storage } = this.target
      this.pool = new BlockBuildPool(this.builders, { layerFiles: this.capture.layers.map((l) => ({ index: l.index, path: l.path })), cfg, layout: store.layout, storage, authKey: store.authKey })
      this.nextLaunch = k
    }
    const limit = Math.min(this.keys.length, k + 2 * this.builders)
    for (; this.nextLaunch < limit; this.nextLaunch++) {
      const j = this.nextLaunch
      const build = this.pool.build(j, this.keys[j], j > 0 ? this.keys[j - 1] : null)
      build.catch(() => {}) // awaited in order below; one that is never reached must not go unhandled
      this.ahead.set(j, build)
    }
  }

  // Block k built by a thread, put here: blocks enter the store in order, so a failure leaves a prefix.
  private async writeBuilt (k: number): Promise<WrittenBlock> {
    this.launchFrom(k)
    const hash = this.keys[k]
    try {
      let t = performance.now()
      const built = await (this.ahead.get(k) as Promise<BuiltBlock>)
      this.ahead.delete(k)
      this.timings.buildWait = (this.timings.buildWait ?? 0) + performance.now() - t
      this.timings.builderRead = (this.timings.builderRead ?? 0) + built.readMs
      this.timings.builderBuild = (this.timings.builderBuild ?? 0) + built.buildMs
      this.builtPeaks.push(built.peakHeldBytes)
      this.held.set('payload', built.encoded.bytes.byteLength)
      t = performance.now()
      const put = await this.target.store.putEncoded(hash, built.encoded)
      this.timings.write += performance.now() - t
      return this.record(k, hash, put, built.digest)
    } finally {
      this.held.clear()
      if (this.ahead.size === 0) await this.stopBuilders()
    }
  }

  private async stopBuilders (): Promise<void> {
    const pool = this.pool
    if (pool === undefined) return
    this.ahead.clear()
    await pool.close()
  }

  // The bound on bytes in flight with builder threads: the largest sum of 2n consecutive builds' peaks.
  private inFlightBound (): number {
    const w = 2 * this.builders
    let best = 0
    let sum = 0
    for (let i = 0; i < this.builtPeaks.length; i++) {
      sum += this.builtPeaks[i] - (i >= w ? this.builtPeaks[i - w] : 0)
      best = Math.max(best, sum)
    }
    return best
  }

  /** Write every remaining block, in order. */
  async writeAll (): Promise<WrittenBlock[]> {
    const out: WrittenBlock[] = []
    for (let b = await this.writeNext(); b !== null; b = await this.writeNext()) out.push(b)
    return out
  }

  /**
   * Drain (write what is left), then re-read every block through the store and check it: it must
   * be servable (the store's compatibility checks: model, block size, layer types, geometry,
   * signature), name its own key and the block size as its token count, and its payload (tensors,
   * meta states with the window offsets, cache types) must have the fingerprint of what was built. Any failure is a
   * PdBridgeError listing every bad block. Closes the capture files either way.
   */
  async finalize (): Promise<BlockWriterReport> {
    try {
      await this.writeAll()
      this.finished = true
      const t = performance.now()
      const bs = this.target.store.layout.blockSize
      await verifyWritten(this.target, this.done, this.requestId)
      this.timings.verify = performance.now() - t
      const m = this.capture.manifest
      const timings: Record<string, number> = { ...this.timings, total: performance.now() - this.started }
      if (this.spool !== undefined) {
        timings.spool = this.spool.spoolMs
        timings.firstLayer = this.spool.firstLayer
        timings.lastLayer = this.spool.lastLayer
        if (this.firstBlockAt !== undefined) timings.firstBlockAfterLastLayer = this.firstBlockAt - this.started - this.spool.lastLayer
      }
      return {
        requestId: this.requestId,
        state: m.state === 'done' ? 'done' : 'partial',
        tokenCount: m.tokenCount,
        sealedLength: m.sealedLength,
        blockSize: bs,
        startToken: this.firstBlock * bs,
        blocks: this.done.length,
        written: this.done.filter((b) => b.written).length,
        reused: this.done.filter((b) => !b.written).length,
        verified: this.done.length,
        bytes: this.done.reduce((a, b) => a + b.bytes, 0),
        peakHeldBytes: Math.max(this.held.peak, this.inFlightBound()),
        timings,
      }
    } finally {
      this.finished = true
      await this.stopBuilders()
      await this.capture.close()
    }
  }

  /** Stop without finalizing: close the capture files (blocks already put stay, each complete). */
  async close (): Promise<void> {
    this.finished = true
    await this.stopBuilders()
    await this.capture.close()
  }
}

/**
 * Re-read every written block through the store and check it: servable (the store's compatibility
 * and content-digest checks), naming its own key and the block size as its token count, and with
 * the payload fingerprint recorded when it was built. Throws one PdBridgeError listing every bad block.
 */
export async function verifyWritten (target: BlockTarget, done: ReadonlyArray<WrittenBlock & { digest: string }>, requestId: string): Promise<void> {
  const problems: string[] = []
  const bs = target.store.layout.blockSize
  for (const b of done) {
    const loaded = await target.store.load(b.hash)
    if (loaded === null) {
      const why = target.store.refusalOf(b.hash)
      if (why?.reason === 'integrity') problems.push(`block ${b.block} (${b.hash}): the stored tensors differ from what was built (its content no longer matches its digest: ${why.detail}; quarantined)`)
      else problems.push(`block ${b.block} (${b.hash}): not servable from the store after the write${why === undefined ? '' : ` (${why.reason}: ${why.detail})`}`)
      continue
    }
    if (loaded.info.hash !== b.hash || loaded.info.tokenCount !== bs) problems.push(`block ${b.block} (${b.hash}): metadata says hash ${loaded.info.hash}, ${loaded.info.tokenCount} tokens`)
    else if (payloadDigest(loaded.payload) !== b.digest) problems.push(`block ${b.block} (${b.hash}): the stored tensors differ from what was built`)
  }
  if (problems.length > 0) throw new PdBridgeError(`block writer ${requestId}: ${problems.length} of ${done.length} blocks failed verification: ${problems.join('; ')}`)
}

/**
 * Blocks verified one by one as they were put (`verifyWritten` on each: the streamed writer, while the
 * engine runs) are all still servable from the store at the end: a later put of the same capture may
 * have evicted an earlier block. A stat each, not a re-read.
 */
export async function verifyStillStored (target: BlockTarget, done: ReadonlyArray<WrittenBlock>, requestId: string): Promise<void> {
  const gone: string[] = []
  for (const b of done) {
    if (!(await target.store.has(b.hash))) gone.push(`block ${b.block} (${b.hash}): not servable from the store after the write`)
  }
  if (gone.length > 0) throw new PdBridgeError(`block writer ${requestId}: ${gone.length} of ${done.length} blocks failed verification: ${gone.join('; ')}`)
}

/**
 * The first block of a capture that continues the decoder's cache of tokens [0, P) (manifest
 * startToken): P / bs, after checking that P is a block boundary and that the store still holds the
 * block the new chain hangs from (a block of an evicted parent could never be restored). 0 otherwise.
 */
export async function continuedFrom (m: CaptureManifest, keys: readonly string[], target: BlockTarget, bs: number): Promise<number> {
  const p = m.startToken
  if (p === undefined) return 0
  if (p % bs !== 0) throw new PdBridgeError(`block writer ${m.requestId}: the capture continues from token ${p}, not a multiple of the block size ${bs}`)
  const first = p / bs
  if (first > keys.length) throw new PdBridgeError(`block writer ${m.requestId}: the capture continues from token ${p} but seals at ${m.sealedLength}`)
  const parent = keys[first - 1]
  if (parent === undefined || !(await target.store.has(parent))) {
    throw new PdBridgeError(`block writer ${m.requestId}: the capture continues from token ${p}, but the store no longer holds block ${first - 1}, the one its blocks hang from`)
  }
  return first
}

/** Open the capture in `dir`, write every block of the valid prefix, finalize: the report. */
export async function streamBlocks (options: BlockWriterOptions & { dir: string }): Promise<BlockWriterReport> {
  const writer = await BlockWriter.open(options.dir, options)
  return await writer.finalize()
}
