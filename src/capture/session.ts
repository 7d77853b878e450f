// A capture session: the hook an engine calls (AttnInputHook), the layer files it writes, the
// manifest it keeps. Layers are written synchronously, from inside the hook, the moment they reach
// the sealed length, and released at once; the manifest lists them asynchronously (flush, or at
// the latest finish). Past the memory budget the session seals a shorter valid prefix (budget.ts)
// and finish() records `partial`. Any error inside the hook is kept: finish() then seals `failed`,
// never `done`. Every layer file also carries the layer's boundary snapshots at each multiple of the
// sidecar's block size up to T' (boundary.ts): what the decoder's blocks need besides pooled rows.
// A streaming session (`spill`) moves snapshots and pooled rows out of memory as they are computed
// (spill.ts) and streams each layer file from there: the same files, memory bounded by the windows,
// buffers and carries instead of by the prompt.
import { join } from 'node:path'
import { PdBridgeError } from '../errors.ts'
import { boundariesUpTo, boundarySnapshotValues } from './boundary.ts'
import { HELD_BYTES_PER_VALUE, heldBytes as heldBytesOf, sealPoint, type LiveLayer } from './budget.ts'
import { PoolingHook } from './hook.ts'
import { LayerSpill, removeSpillDir } from './spill.ts'
import { SegmentPublisher } from './segments.ts'
import { boundaryTensors } from '../wire/boundary.ts'
import { encodeLayerFile, layerFileMetadata, writeFileAtomicSync } from '../wire/layer-file.ts'
import { poolTensorNames } from '../model/engine/cache-layout.ts'
import type { LayerCache, ModelCache } from '../model/engine/cache.ts'
import {
  CaptureManifestError, layerFileName, readManifest, sha256Hex, tokenIdsSha256, writeManifestAtomic, type CaptureLayerEntry, type CaptureManifest,
} from '../wire/manifest.ts'
import { finishManifest, startCapture } from './manifest-updates.ts'
import { decoderBytesPerValue, layerGeometries, layerResidentValues, payloadMinimum, type LayerGeometry, type PayloadMinimum } from './payload.ts'
import type { Sidecar } from './sidecar.ts'

/** What a capture session starts from. */
export interface CaptureSessionOptions {
  sidecar: Sidecar
  /** The capture root; the session writes `<captureRoot>/<requestId>/`. */
  captureRoot: string
  requestId: string
  /** T: the prompt length. */
  tokenCount: number
  /**
   * The T token ids the capture is computed over. Their digest (`tokenIdsSha256`) goes into the
   * manifest, and a block writer keys blocks only under ids with the same digest; a capture started
   * without them records none, and no block writer will key its blocks.
   */
  tokens?: ArrayLike<number>
  /** Most bytes of cache the session may hold in memory at once (float32 values); none when absent. */
  memoryBudgetBytes?: number
  /**
   * Stream the capture: boundary snapshots and pooled rows go to `<dir>/.spill/` the moment they are
   * computed, and each layer file is streamed from there when the layer lands (the same bytes as a
   * staged session's). Memory then holds the windows, buffers and carries only.
   */
  spill?: boolean
  /**
   * Continue the decoder's cache of tokens [0, P) (mounted from a carry, capture/carry.ts) instead
   * of starting empty: a warm-extended prompt. P must be a block boundary below T; the engine then
   * feeds rows from P. The layer files hold only what [P, T') adds (manifest `startToken`), and such
   * a capture always streams (`spill`), since the rows below P are the decoder's already.
   */
  resume?: ModelCache
  /**
   * Publish block segments while the engine runs (segments.ts, wire/segment-file.ts): after each
   * chunk (`flush`), one file per block whose boundary every layer has passed, listed in
   * segments.json, so blocks can be written before the capture is sealed. The layer files and the
   * manifest are the same either way.
   */
  segments?: boolean
}

/** Payload and memory figures of a session. */
export interface CaptureReport {
  tokenCount: number
  sealedLength: number
  /** Bytes of the layer files written so far. */
  payloadBytes: number
  /** payloadBytes / sealedLength. */
  payloadBytesPerToken: number
  /** The theoretical minimum at the sealed length (payload.ts). */
  minimum: PayloadMinimum
  /** payloadBytes / minimum.bytes. */
  overMinimum: number
  /**
   * The boundary snapshots the layer files carry: one per multiple of the block size up to T', each
   * every layer's window rows, buffers and carries there, at the decoder's element size.
   */
  boundarySnapshots: { blockSize: number, boundaries: number, bytes: number }
  /** payloadBytes / (minimum.bytes + boundarySnapshots.bytes): what the files add over what they must hold. */
  overRequired: number
  /** The most cache bytes held in memory at once. */
  peakHeldBytes: number
  memoryBudgetBytes: number | null
  /** Whether the session streamed (spilled) its snapshots and pooled rows. */
  spill: boolean
  /** Bytes that went through the spill files (float32 values, as computed). */
  spilledBytes: number
  /** Block segments published while the engine ran (0 without `segments`). */
  segmentsPublished: number
}

/** A layer cache's pools by name (the main compressor, then a CSA layer's indexer). */
function pools (state: LayerCache): Array<['compressor' | 'indexer', NonNullable<LayerCache['compressor']>]> {
  const out: Array<['compressor' | 'indexer', NonNullable<LayerCache['compressor']>]> = []
  if (state.compressor !== null) out.push(['compressor', state.compressor])
  if (state.indexer !== null) out.push(['indexer', state.indexer])
  return out
}

function describe (err: unknown): string {
  const text = err instanceof Error ? err.message : String(err)
  return text.length > 0 ? text : 'unknown error'
}

/** One request's capture. */
export class CaptureSession {
  private readonly hook: PoolingHook
  private readonly geometries: LayerGeometry[]
  private readonly written: boolean[]
  private sealed: number
  private frontier = 0
  private peak = 0
  private readonly landed: CaptureLayerEntry[] = []
  private listed = 0
  private chain: Promise<void> = Promise.resolve()
  private error: unknown = undefined
  private closed = false
  private hookMs = 0
  private writeMs = 0
  /** One per layer in a streaming session (null once the layer is written), else null. */
  private readonly spills: Array<LayerSpill | null> | null
  private spilledBytes = 0
  /** P of a continued (warm-extended) capture, else undefined. */
  readonly startToken: number | undefined
  /** Block segments published as every layer passes a boundary, or null without `segments`. */
  private readonly segments: SegmentPublisher | null

  private constructor (
    private readonly sidecar: Sidecar,
    /** The capture directory `<captureRoot>/<requestId>`. */
    readonly dir: string,
    readonly requestId: string,
    readonly tokenCount: number,
    private readonly budget: number | undefined,
    spill: boolean,
    resume: ModelCache | undefined,
    segments: boolean,
  ) {
    this.startToken = resume?.tokenCount
    this.spills = spill || resume !== undefined ? sidecar.json.layers.map((_, i) => LayerSpill.open(dir, i)) : null
    const onBoundary = this.spills === null
      ? undefined
      : (layer: number, snapshot: Parameters<typeof boundaryTensors>[1]) => {
          const sp = this.spillOf(layer)
          for (const [name, t] of boundaryTensors(layer, snapshot)) sp.addTensor(name, t)
          this.segments?.addSnapshot(layer, snapshot)
        }
    this.hook = new PoolingHook(sidecar.kvPath, { blockSize: sidecar.json.blockSize, onBoundary, resume })
    this.segments = !segments
      ? null
      : new SegmentPublisher({
        dir, requestId, blockSize: sidecar.json.blockSize, firstBlock: (resume?.tokenCount ?? 0) / sidecar.json.blockSize,
        fingerprint: sidecar.fingerprint, profile: sidecar.profile.name, bf16: sidecar.profile.activations === 'bf16',
        layers: sidecar.json.layers.map((_, i) => this.hook.layerCache(i)),
      })
    if (this.spills !== null) {
      // A layer file always has its pools' compressed_kv, [0, dim] before the first entry.
      this.spills.forEach((sp, i) => {
        for (const [name, pool] of pools(this.hook.layerCache(i))) {
          sp?.appendRows(poolTensorNames(`layers.${i}.${name}`).compressedKv, new Float32Array(0), pool.dim)
          // A continued cache's rows below P are the decoder's already: they leave memory unwritten.
          pool.entries.spillHeld()
        }
      })
    }
    this.frontier = resume?.tokenCount ?? 0
    this.geometries = layerGeometries(sidecar.json)
    this.written = sidecar.json.layers.map(() => false)
    this.sealed = tokenCount
    // Engines take the hook as a plain function.
    this.onAttentionInput = this.onAttentionInput.bind(this)
  }

  /** Create the capture directory and its `running` manifest. */
  static async start (opts: CaptureSessionOptions): Promise<CaptureSession> {
    const { sidecar, tokenCount, memoryBudgetBytes } = opts
    if (!Number.isSafeInteger(tokenCount) || tokenCount < 1) throw new PdBridgeError(`capture: tokenCount must be a positive integer, got ${String(tokenCount)}`)
    if (tokenCount > sidecar.json.maxPositionEmbeddings) {
      throw new PdBridgeError(`capture: ${tokenCount} tokens exceed the sidecar's max_position_embeddings (${sidecar.json.maxPositionEmbeddings})`)
    }
    if (memoryBudgetBytes !== undefined && (!Number.isSafeInteger(memoryBudgetBytes) || memoryBudgetBytes < 1)) {
      throw new PdBridgeError(`capture: memoryBudgetBytes must be a positive integer, got ${String(memoryBudgetBytes)}`)
    }
    if (opts.tokens !== undefined && opts.tokens.length !== tokenCount) {
      throw new PdBridgeError(`capture: ${opts.tokens.length} token ids given for a ${tokenCount}-token capture`)
    }
    const resume = opts.resume
    if (resume !== undefined) {
      const p = resume.tokenCount
      const bs = sidecar.json.blockSize
      if (!Number.isSafeInteger(p) || p < 1 || p % bs !== 0 || p >= tokenCount) {
        throw new PdBridgeError(`capture: the cache to continue holds ${String(p)} tokens; it must be a block boundary (a multiple of ${bs}) below T = ${tokenCount}`)
      }
      if (resume.layers.length !== sidecar.numLayers) throw new PdBridgeError(`capture: the cache to continue has ${resume.layers.length} layers, the sidecar ${sidecar.numLayers}`)
    }
    const tokensSha256 = opts.tokens === undefined ? undefined : tokenIdsSha256(opts.tokens)
    const dir = await startCapture(opts.captureRoot, {
      requestId: opts.requestId, tokenCount, sidecarFingerprint: sidecar.fingerprint, profile: sidecar.profile.name,
      numLayers: sidecar.numLayers, memoryBudgetBytes, tokensSha256, startToken: resume?.tokenCount,
    })
    return new CaptureSession(sidecar, dir, opts.requestId, tokenCount, memoryBudgetBytes, opts.spill === true, resume, opts.segments === true)
  }

  /** T' : tokenCount until the budget seals a shorter prefix. The engine may stop feeding past it. */
  get sealedLength (): number {
    return this.sealed
  }

  /** Cache bytes held in memory now (layers not yet written; streaming: what has not gone to the spill). */
  get heldBytes (): number {
    const segments = this.segments?.heldBytes ?? 0
    if (this.spills === null) return heldBytesOf(this.liveLayers()) + segments
    let values = 0
    this.geometries.forEach((g, i) => {
      if (this.written[i]) return
      values += layerResidentValues(g, this.hook.position(i))
      for (const [, pool] of pools(this.hook.layerCache(i))) values += pool.entries.heldView().length
    })
    return values * HELD_BYTES_PER_VALUE + segments
  }

  /** The most cache bytes held at once so far. */
  get peakHeldBytes (): number {
    return this.peak
  }

  /** How many layer files have landed. */
  get layersWritten (): number {
    return this.landed.length
  }

  /**
   * The engine's AttnInputHook: layer `layer`'s attention input rows [count, hidden] for positions
   * startPos.. (only read). Rows past the sealed length are ignored. Synchronous: a layer that
   * reaches the sealed length is written and released before this returns.
   */
  onAttentionInput (layer: number, startPos: number, rows: Float32Array, count: number): void {
    if (this.closed) throw new PdBridgeError(`capture ${this.requestId}: the session is already sealed; no more attention inputs`)
    if (this.error !== undefined) throw new PdBridgeError(`capture ${this.requestId}: the session already failed (${describe(this.error)})`)
    try {
      const t0 = performance.now()
      const wrote = this.take(layer, startPos, rows, count)
      // Clamped: the nested write interval is subtracted in floating point.
      this.hookMs += Math.max(0, performance.now() - t0 - wrote)
    }
    catch (e) {
      this.error = e
      throw e
    }
  }

  // Returns the milliseconds spent writing files.
  private take (layer: number, startPos: number, rows: Float32Array, count: number): number {
    if (!Number.isSafeInteger(layer) || layer < 0 || layer >= this.written.length) {
      throw new PdBridgeError(`capture ${this.requestId}: layer ${String(layer)} is not a layer index in [0, ${this.written.length})`)
    }
    if (!Number.isSafeInteger(startPos) || startPos < 0 || !Number.isSafeInteger(count) || count < 1) {
      throw new PdBridgeError(`capture ${this.requestId}: layer ${layer}: startPos ${String(startPos)} and count ${String(count)} must be integers, count at least 1`)
    }
    const end = startPos + count
    if (end > this.tokenCount) throw new PdBridgeError(`capture ${this.requestId}: layer ${layer}: rows up to position ${end} exceed the capture's ${this.tokenCount} tokens`)
    const position = this.hook.position(layer)
    if (position === this.sealed && startPos >= this.sealed) return 0
    if (startPos !== position) {
      throw new PdBridgeError(`capture ${this.requestId}: layer ${layer}: rows start at position ${startPos} but the layer holds ${position} tokens; one layer's chunks must be contiguous`)
    }
    let reach = Math.min(end, this.sealed)
    if (reach > this.frontier && this.budget !== undefined) {
      const cut = sealPoint(this.liveLayers(), this.frontier, reach, this.sealed, this.budget)
      if (cut < this.sealed && cut < reach) this.sealed = cut
      reach = Math.min(reach, this.sealed)
    }
    if (reach > startPos) {
      this.hook.feed(layer, startPos, rows, reach - startPos)
      // Before the rows spill and before the layer may be written and released below.
      this.segments?.take(layer, this.spills === null ? this.hook.boundaries(layer) : null, this.hook.layerCache(layer))
    }
    this.frontier = Math.max(this.frontier, this.hook.position(layer))
    this.notePeak()
    if (this.spills !== null) this.spillRows(layer)
    let ms = 0
    for (let i = 0; i < this.written.length; i++) {
      if (!this.written[i] && this.hook.position(i) === this.sealed) ms += this.writeLayer(i)
    }
    return ms
  }

  private liveLayers (): LiveLayer[] {
    const blockSize = this.sidecar.json.blockSize
    const spilled = this.spills !== null
    return this.geometries.map((geometry, i) => this.written[i] ? null : { geometry, position: this.hook.position(i), blockSize, spilled })
  }

  private spillOf (layer: number): LayerSpill {
    const sp = this.spills?.[layer]
    if (sp === undefined || sp === null) throw new PdBridgeError(`capture ${this.requestId}: layer ${layer} has no open spill`)
    return sp
  }

  // Move the pooled rows layer `layer` made in this feed to its spill file.
  private spillRows (layer: number): void {
    const sp = this.spillOf(layer)
    for (const [name, pool] of pools(this.hook.layerCache(layer))) {
      const rows = pool.entries.heldView()
      if (rows.length === 0) continue
      sp.appendRows(poolTensorNames(`layers.${layer}.${name}`).compressedKv, rows, pool.dim)
      pool.entries.spillHeld()
    }
  }

  private notePeak (): void {
    const held = this.heldBytes
    if (held > this.peak) this.peak = held
  }

  // Write layer i's file for the sealed prefix and release its cache; returns the milliseconds taken.
  private writeLayer (i: number): number {
    if (this.spills !== null) return this.writeSpilledLayer(i)
    const t0 = performance.now()
    const snapshots = this.hook.boundaries(i)
    const state = this.hook.release(i)
    const bytes = encodeLayerFile(state, {
      layer: i, layerType: this.sidecar.json.layers[i].layerType, tokens: this.sealed, fingerprint: this.sidecar.fingerprint, profile: this.sidecar.profile.name,
      // Stamped only on files that hold snapshots, so files of captures shorter than a block are unchanged.
      blockSize: snapshots.length > 0 ? this.sidecar.json.blockSize : undefined,
    }, this.sidecar.profile.activations === 'bf16', snapshots)
    const file = layerFileName(i)
    writeFileAtomicSync(join(this.dir, file), bytes)
    this.written[i] = true
    this.landed.push({ index: i, file, bytes: bytes.length, sha256: sha256Hex(bytes) })
    this.chain = this.chain.then(() => this.listLanded())
    const ms = performance.now() - t0
    this.writeMs += ms
    return ms
  }

  // The streaming writeLayer: resident tensors from memory, snapshots and pooled rows from the spill.
  private writeSpilledLayer (i: number): number {
    const t0 = performance.now()
    const sp = this.spillOf(i)
    this.spillRows(i)
    const state = this.hook.release(i)
    const hasSnapshots = this.boundaries().length > 0
    const metadata = layerFileMetadata({
      layer: i, layerType: this.sidecar.json.layers[i].layerType, tokens: this.sealed, fingerprint: this.sidecar.fingerprint, profile: this.sidecar.profile.name,
      blockSize: hasSnapshots ? this.sidecar.json.blockSize : undefined, startToken: this.startToken,
    })
    const file = layerFileName(i)
    const { bytes, sha256 } = sp.writeLayerFile(join(this.dir, file), state.tensors(`layers.${i}`, false), metadata, this.sidecar.profile.activations === 'bf16')
    this.spilledBytes += sp.bytes
    sp.remove()
    ;(this.spills as Array<LayerSpill | null>)[i] = null
    this.written[i] = true
    this.landed.push({ index: i, file, bytes, sha256 })
    this.chain = this.chain.then(() => this.listLanded())
    const ms = performance.now() - t0
    this.writeMs += ms
    return ms
  }

  // List every landed but unlisted layer file in the manifest (files land before they are listed).
  private async listLanded (): Promise<void> {
    if (this.listed === this.landed.length) return
    const m = await readManifest(this.dir)
    if (m.state !== 'running') throw new CaptureManifestError('state', `is ${m.state}; the session cannot list more layers`, join(this.dir, 'manifest.json'))
    const add = this.landed.slice(this.listed)
    const layers = [...m.layers, ...add].sort((a, b) => a.index - b.index)
    const now = new Date().toISOString()
    const updatedAt = Date.parse(now) >= Date.parse(m.updatedAt) ? now : m.updatedAt
    await writeManifestAtomic(this.dir, { ...m, layers, payloadBytes: m.payloadBytes + add.reduce((a, e) => a + e.bytes, 0), updatedAt })
    this.listed += add.length
  }

  /**
   * Publish the block segments every layer has reached (with `segments`), then wait until every
   * landed layer file is listed in the manifest (call between engine chunks).
   */
  async flush (): Promise<void> {
    try {
      if (this.segments !== null && this.error === undefined) this.segments.publishReady(this.sealed)
      await this.chain
    }
    catch (e) {
      if (this.error === undefined) this.error = e
      throw e
    }
  }

  /**
   * Seal the capture: `done` when every layer holds all T tokens, `partial` when the budget sealed
   * a shorter prefix. If the hook failed, or a layer never reached the sealed length, the manifest
   * is sealed `failed` instead and this throws. `timings` (milliseconds) are recorded with the
   * session's own `hook` and `layerWrite`.
   */
  async finish (timings: Record<string, number> = {}): Promise<CaptureManifest> {
    if (this.closed) throw new PdBridgeError(`capture ${this.requestId}: the session is already sealed`)
    try {
      await this.flush()
    }
    catch {
      // Kept in this.error; sealed as failed below.
    }
    const own: Record<string, number> = { hook: this.hookMs, layerWrite: this.writeMs }
    if (this.segments !== null) own.segmentWrite = this.segments.ms
    if (this.error !== undefined) {
      const why = describe(this.error)
      await this.sealFailed(why, own)
      throw new PdBridgeError(`capture ${this.requestId} failed: ${why}`)
    }
    const behind = this.written.flatMap((w, i) => w ? [] : [`layer ${i} at ${this.hook.position(i)}`])
    if (behind.length > 0) {
      const why = `finish before every layer reached the sealed length ${this.sealed}: ${behind.join(', ')}`
      await this.sealFailed(why, own)
      throw new PdBridgeError(`capture ${this.requestId} failed: ${why}`)
    }
    this.closed = true
    if (this.spills !== null) removeSpillDir(this.dir)
    return finishManifest(this.dir, this.sealed === this.tokenCount ? 'done' : 'partial', { sealedLength: this.sealed, timings: { ...own, ...timings } })
  }

  /** Seal the capture as `failed` with the error's message (a no-op once sealed). */
  async fail (err: unknown, timings: Record<string, number> = {}): Promise<void> {
    if (this.closed) return
    if (this.error === undefined) this.error = err
    await this.chain.catch(() => undefined)
    await this.sealFailed(describe(err), { hook: this.hookMs, layerWrite: this.writeMs, ...timings })
  }

  private async sealFailed (why: string, timings: Record<string, number>): Promise<void> {
    this.closed = true
    this.dropSpills()
    try {
      await finishManifest(this.dir, 'failed', { error: why, timings })
    }
    catch (e) {
      // Already sealed by someone else: leave it as it is.
      if (!(e instanceof CaptureManifestError && e.field === 'state')) throw e
    }
  }

  // A failed streaming capture keeps no spill: close every open one and remove the directory.
  private dropSpills (): void {
    if (this.spills === null) return
    this.spills.forEach((sp, i) => {
      sp?.remove()
      ;(this.spills as Array<LayerSpill | null>)[i] = null
    })
    removeSpillDir(this.dir)
  }

  // The boundaries this capture's files carry snapshots of: the block multiples in (P, T'].
  private boundaries (): number[] {
    return boundariesUpTo(this.sealed, this.sidecar.json.blockSize).filter((b) => b > (this.startToken ?? 0))
  }

  /** Payload per token against the theoretical minimum, and the memory peak. */
  report (): CaptureReport {
    const payloadBytes = this.landed.reduce((a, e) => a + e.bytes, 0)
    const minimum = payloadMinimum(this.sidecar.json, this.sealed)
    const blockSize = this.sidecar.json.blockSize
    const boundaries = this.boundaries()
    const snapshotValues = boundaries.reduce((a, b) => a + this.geometries.reduce((c, g) => c + boundarySnapshotValues(g, b), 0), 0)
    const boundarySnapshots = { blockSize, boundaries: boundaries.length, bytes: snapshotValues * decoderBytesPerValue(this.sidecar.json) }
    const required = minimum.bytes + boundarySnapshots.bytes
    return {
      tokenCount: this.tokenCount,
      sealedLength: this.sealed,
      payloadBytes,
      payloadBytesPerToken: this.sealed > 0 ? payloadBytes / this.sealed : 0,
      minimum,
      overMinimum: minimum.bytes > 0 ? payloadBytes / minimum.bytes : 0,
      boundarySnapshots,
      overRequired: required > 0 ? payloadBytes / required : 0,
      peakHeldBytes: this.peak,
      memoryBudgetBytes: this.budget ?? null,
      spill: this.spills !== null,
      spilledBytes: this.spilledBytes,
      segmentsPublished: this.segments?.published ?? 0,
    }
  }
}
