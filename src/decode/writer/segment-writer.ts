// The writer of a capture still running: blocks from block segments (src/wire/segment-file.ts) the
// moment the prefill engine lists them, while it computes the next chunk. Block k is read from its
// segment through the very readBlockState the sealed-capture writer uses (each layer's view of the
// segment stands for a layer file covering [k*bs, b)), then built with the decoder's mapping, put,
// and its payload digest kept, so every block is the one the write-after path writes. Before any
// block is keyed, the running manifest must name this request (id, T, fingerprint) and the digest
// of these token ids. `finish` waits for nothing: it takes the sealed manifest (done or partial),
// writes the segments still listed, requires one per block of the valid prefix, and checks every
// block is still stored. Each block is verified through the store (`verifyWritten`, the check
// `BlockWriter.finalize` makes) right after its put, while the engine still runs, so the seal leaves
// no re-read of the whole prompt behind it. A capture that failed is refused, and the blocks already
// written stay: each is complete and correct for its own prefix.
import { stat, readFile } from 'node:fs/promises'
import { join } from 'node:path'
import { CaptureIntegrityError, PD_ERR, PdBridgeError } from '../../errors.ts'
import { SafetensorsFile } from '../../formats/safetensors/index.ts'
import {
  checkManifestTokens, MANIFEST_FILE, readManifest, validateManifestForRequest, validateManifestIdentity, type CaptureManifest,
} from '../../wire/manifest.ts'
import { parseSegmentFileMeta, parseSegmentIndex, SEGMENT_INDEX_FILE, type SegmentEntry } from '../../wire/segment-file.ts'
import { LayerFileReader, sha256OfFile } from './capture-files.ts'
import { readBlockState } from './block-state.ts'
import { HeldBytes } from './held-bytes.ts'
import { checkCaptureTarget } from './target.ts'
import { checkTokens, continuedFrom, putBlockState, verifyStillStored, verifyWritten, type BlockWriterOptions, type BlockWriterReport, type WrittenBlock } from './writer.ts'

/** What a segment writer starts from: the writer's options without spool or builder threads. */
export type SegmentWriterOptions = Omit<BlockWriterOptions, 'spool' | 'builders'>

/** Writes a running capture's blocks from its segments, in order. Open with `SegmentBlockWriter.open`. */
export class SegmentBlockWriter {
  private readonly held = new HeldBytes()
  private readonly done: Array<WrittenBlock & { digest: string }> = []
  private readonly timings: Record<string, number> = { read: 0, build: 0, write: 0, verify: 0 }
  private readonly started = performance.now()
  /** performance.now() when each block was put (ms from `started`), by order written. */
  private readonly putAt: number[] = []
  private closed = false

  private constructor (
    private readonly dir: string,
    private readonly o: SegmentWriterOptions,
    private readonly keys: string[],
    readonly firstBlock: number,
    private readonly bs: number,
  ) {}

  /**
   * Open the capture in `dir` while it runs: the sidecar must describe the target's decoder, and the
   * manifest (any state but failed) must be this request's, computed over these token ids.
   */
  static async open (dir: string, o: SegmentWriterOptions): Promise<SegmentBlockWriter> {
    checkTokens(o.tokens)
    checkCaptureTarget(o.sidecar.json, o.target)
    const bs = o.target.store.layout.blockSize
    const m = await readManifest(dir)
    const source = join(dir, MANIFEST_FILE)
    validateManifestIdentity(m, { requestId: o.requestId, tokenCount: o.tokens.length, sidecarFingerprint: o.sidecar.fingerprint }, source)
    if (m.state === 'failed') throw failedCapture(m)
    checkManifestTokens(m, o.tokens, source)
    const keys = o.target.store.keysFor(o.tokens).slice(0, Math.floor(o.tokens.length / bs))
    const first = await continuedFrom({ ...m, sealedLength: o.tokens.length }, keys, o.target, bs)
    return new SegmentBlockWriter(dir, o, keys, first, bs)
  }

  /** Blocks put so far. */
  get blocksWritten (): number {
    return this.done.length
  }

  /** Blocks in the store this writer put: every block written stays (each whole and correct). */
  get blocksKept (): number {
    return this.done.length
  }

  /** When each block was put, ms from the open (the stage timings' overlap evidence). */
  get putTimes (): readonly number[] {
    return this.putAt
  }

  /** Write every segment listed and not yet written, in block order; the number written. */
  async writeReady (): Promise<number> {
    if (this.closed) throw new PdBridgeError(`segment writer ${this.o.requestId}: already finished`)
    const listed = await this.listed()
    let n = 0
    for (const entry of listed.slice(this.done.length)) {
      await this.write(entry)
      n++
    }
    return n
  }

  // The segment index, checked against this capture (absent before the first segment lands).
  private async listed (): Promise<SegmentEntry[]> {
    const path = join(this.dir, SEGMENT_INDEX_FILE)
    let text: string
    try {
      text = await readFile(path, 'utf8')
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code === 'ENOENT') return []
      throw e
    }
    const index = parseSegmentIndex(text, path)
    if (index.requestId !== this.o.requestId) throw new PdBridgeError(`${path}: lists segments of request ${index.requestId}, not ${this.o.requestId}`)
    if (index.blockSize !== this.bs) throw new PdBridgeError(`${path}: segments of ${index.blockSize}-token blocks, the store's blocks are ${this.bs}`)
    if (index.firstBlock !== this.firstBlock) throw new PdBridgeError(`${path}: segments from block ${index.firstBlock}, the capture's first block is ${this.firstBlock}`)
    if (index.segments.length < this.done.length) throw new PdBridgeError(`${path}: lists ${index.segments.length} segments, ${this.done.length} were already written from it`)
    if (this.firstBlock + index.segments.length > this.keys.length) throw new PdBridgeError(`${path}: lists blocks up to ${this.firstBlock + index.segments.length - 1}, the prompt has ${this.keys.length}`)
    return index.segments
  }

  private async write (entry: SegmentEntry): Promise<void> {
    const { cfg } = this.o.target
    const bs = this.bs
    const k = entry.block
    const path = join(this.dir, entry.file)
    const t = performance.now()
    const size = (await stat(path).catch(() => { throw new PdBridgeError(`${path}: listed in ${SEGMENT_INDEX_FILE} but missing`) })).size
    if (size !== entry.bytes) throw new CaptureIntegrityError(path, `${size} bytes, ${SEGMENT_INDEX_FILE} lists ${entry.bytes}`)
    const sha = await sha256OfFile(path)
    if (sha !== entry.sha256) throw new CaptureIntegrityError(path, `SHA-256 ${sha} does not match ${SEGMENT_INDEX_FILE}'s ${entry.sha256}`)
    const file = await SafetensorsFile.open(path)
    try {
      const meta = parseSegmentFileMeta(file.metadata, path)
      const layers = this.o.sidecar.json.layers.length
      if (meta.block !== k || meta.blockSize !== bs || meta.fingerprint !== this.o.sidecar.fingerprint || meta.numLayers !== layers) {
        throw new PdBridgeError(`${path}: holds block ${meta.block} of ${meta.blockSize}-token blocks, ${meta.numLayers} layers, fingerprint ${meta.fingerprint}; expected block ${k} of ${bs}, ${layers} layers, ${this.o.sidecar.fingerprint}`)
      }
      // Each layer's view of the segment is a layer file covering [k*bs, b): its snapshot at b and this block's pooled rows.
      const b = (k + 1) * bs
      const views = this.o.sidecar.json.layers.map((l, i) => new LayerFileReader(i, path, {
        layer: i, layerType: l.layerType, tokens: b, fingerprint: meta.fingerprint, profile: meta.profile, blockSize: bs, ...(k > 0 ? { startToken: k * bs } : {}),
      }, file))
      const state = await readBlockState(cfg, views, k, bs, this.held)
      this.timings.read += performance.now() - t
      const hash = this.keys[k]
      const { put, digest } = await putBlockState(this.o.target, state, k, this.keys, this.held, this.timings)
      this.putAt.push(performance.now() - this.started)
      const block = { block: k, hash, boundary: b, written: put.written, bytes: put.bytes, digest }
      const v = performance.now()
      await verifyWritten(this.o.target, [block], this.o.requestId)
      this.timings.verify += performance.now() - v
      this.done.push(block)
    } finally {
      this.held.clear()
      await file.close()
    }
  }

  /** Stop without finishing: nothing is held open between writes, so only further writes are refused. */
  async close (): Promise<void> {
    this.closed = true
  }

  /**
   * The capture is sealed: it must be done or partial and valid for the request; write the
   * segments still listed, require one for every block of the valid prefix, and check every block,
   * each verified when it was put, is still in the store.
   */
  async finish (): Promise<BlockWriterReport & { manifest: CaptureManifest }> {
    const m = await readManifest(this.dir)
    const source = join(this.dir, MANIFEST_FILE)
    if (m.state === 'failed') throw failedCapture(m)
    validateManifestForRequest(m, { requestId: this.o.requestId, tokenCount: this.o.tokens.length, sidecarFingerprint: this.o.sidecar.fingerprint }, source)
    checkManifestTokens(m, this.o.tokens, source)
    await this.writeReady()
    this.closed = true
    const want = Math.floor(m.sealedLength / this.bs) - this.firstBlock
    if (this.done.length !== want) {
      throw new PdBridgeError(`segment writer ${this.o.requestId}: the capture sealed at ${m.sealedLength} tokens (${want} blocks) but ${SEGMENT_INDEX_FILE} lists ${this.done.length}`)
    }
    const t = performance.now()
    await verifyStillStored(this.o.target, this.done, this.o.requestId)
    this.timings.verify += performance.now() - t
    return {
      requestId: this.o.requestId,
      state: m.state === 'done' ? 'done' : 'partial',
      tokenCount: m.tokenCount,
      sealedLength: m.sealedLength,
      blockSize: this.bs,
      startToken: this.firstBlock * this.bs,
      blocks: this.done.length,
      written: this.done.filter((b) => b.written).length,
      reused: this.done.filter((b) => !b.written).length,
      verified: this.done.length,
      bytes: this.done.reduce((a, b) => a + b.bytes, 0),
      peakHeldBytes: this.held.peak,
      timings: { ...this.timings, total: performance.now() - this.started },
      manifest: m,
    }
  }
}

function failedCapture (m: CaptureManifest): PdBridgeError {
  return new PdBridgeError(`capture ${m.requestId} failed on the prefill side: ${m.error ?? 'no error recorded'}`, { code: PD_ERR.CAPTURE_FAILED })
}
