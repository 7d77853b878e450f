// The bridge's writer for a llama.cpp decoder: a sealed capture becomes llama.cpp sequence-state
// files in a LlamaCppStateStore. It reuses the verified path end to end: the streaming BlockWriter
// writes the capture's oMLX blocks into a private staging block store (a temp directory this writer
// owns and removes; the manifest, checksum and token-digest checks happen in its open), the
// decoder's restore path rebuilds our cache at a boundary from those blocks, the overlap carries are
// derived with the sidecar's position biases as our engine derives them, and buildLlamaCppState
// turns that cache into the state, put (checked, atomic) under the boundary's chain key.
// By default only the sealed boundary S (the last block boundary the capture covers) is written:
// each file is a whole state, so every boundary would cost O(B^2) bytes, and llama.cpp restores
// one file, the longest stored prefix.
import { createHash } from 'node:crypto'
import { mkdtemp, rm } from 'node:fs/promises'
import { readFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import type { CaptureManifest } from '../../../wire/manifest.ts'
import type { SidecarJson } from '../../../wire/sidecar-format.ts'
import { DecoderPrefixCache } from '../../../decode/prefix-cache/index.ts'
import { BlockWriter, blockCacheBytes, type BlockWriterReport } from '../../../decode/writer/index.ts'
import { PdBridgeError } from '../../../errors.ts'
import type { DeepseekV4Config } from '../../../model/config.ts'
import { activationRounding } from '../../../model/engine/activation.ts'
import { deriveOverlapCarry } from '../../../model/engine/compressor.ts'
import type { ModelCache } from '../../../model/engine/index.ts'
import { compressorPrefixes } from '../../../model/engine/attention-weights.ts'
import { buildLlamaCppState } from '../state/build.ts'
import { ourCacheOf } from '../state/files.ts'
import type { LlamaCppStateGeometry } from '../state/geometry.ts'
import { serializeLlamaCppState } from '../state/writer.ts'
import type { LlamaCppStateStore } from '../store/state-store.ts'
import { checkLlamaCppTarget } from './checks.ts'
import { biasVector, readPositionBiases } from './position-bias.ts'
import type { CaptureWriter } from '../../../decode/writer/index.ts'

/** Which boundaries get a state file. */
export type StateBoundaries = 'sealed' | 'every'

/** What `LlamaCppStateWriter.open` starts from (besides where the capture is). */
export interface LlamaCppWriterOptions {
  /** The llama.cpp decoder's state store; its geometry is the context's. */
  store: LlamaCppStateStore
  /** The decoder's model config (the checkpoint its GGUF was exported from). */
  cfg: DeepseekV4Config
  /** The sidecar the capture was computed under: its directory (for the position biases), JSON and fingerprint. */
  sidecar: { dir: string, json: SidecarJson, fingerprint: string }
  requestId: string
  /** The token ids the prefill engine was asked for (the states are keyed by their chain). */
  tokens: ArrayLike<number>
  /** Default 'sealed': the state at S only. 'every': one state per boundary up to S. */
  boundaries?: StateBoundaries
  /** Where the staging block store is made (a fresh temp directory under it); default the OS temp dir. */
  stagingRoot?: string
}

/** One state file the writer put (or found). */
export interface WrittenState {
  kind: 'state'
  /** Tokens the state holds (a block boundary). */
  boundary: number
  path: string
  bytes: number
  /** False when a state that passes the store's check was already stored under this key (kept). */
  written: boolean
}

/** One staged oMLX block (an intermediate step; no decoder sees it). */
export interface StagedBlock {
  kind: 'staged-block'
  block: number
  boundary: number
}

/** What `finalize` reports: a BlockWriterReport (bytes = state bytes) with the states and the staging report. */
export interface LlamaCppWriterReport extends BlockWriterReport {
  states: WrittenState[]
  /** The staging BlockWriter's own report (its blocks, bytes and timings). */
  staged: BlockWriterReport
}

const sha256 = (b: Uint8Array): string => createHash('sha256').update(b).digest('hex')

/** Writes one capture as llama.cpp sequence states. Open with `LlamaCppStateWriter.open`. */
export class LlamaCppStateWriter implements CaptureWriter {
  private readonly done: Array<WrittenState & { sha256: string | null }> = []
  private readonly timings: Record<string, number> = { restore: 0, state: 0, write: 0 }
  private stagedReport: BlockWriterReport | undefined
  private peak = 0
  private finished = false
  private removed = false

  private constructor (
    private readonly inner: BlockWriter,
    private readonly staging: DecoderPrefixCache,
    private readonly stagingDir: string,
    private readonly options: LlamaCppWriterOptions,
    private readonly tokens: number[],
    private readonly targets: number[],
    private readonly vector: (name: string) => Float32Array,
    private readonly started: number,
  ) {}

  /**
   * Check the sidecar, the config and the store's geometry against each other (checkLlamaCppTarget),
   * read the position biases, make the staging store and open the capture through BlockWriter.open
   * (request id, T, fingerprint, every layer file's SHA-256, the token digest). Nothing is written yet.
   */
  static async open (dir: string, options: LlamaCppWriterOptions): Promise<LlamaCppStateWriter> {
    const started = performance.now()
    const { store, cfg, sidecar } = options
    const g: LlamaCppStateGeometry = store.options.geometry
    checkLlamaCppTarget(sidecar.json, cfg, g, store.blockSize)
    const biases = await readPositionBiases(sidecar.dir, sidecar.json)
    const stagingDir = await mkdtemp(join(options.stagingRoot ?? tmpdir(), 'pd-bridge-llama-staging-'))
    try {
      const staging = await DecoderPrefixCache.open({
        storeRoot: stagingDir, modelName: store.options.modelName, cfg, profile: sidecar.json.profile, blockSize: store.blockSize, log: () => {},
      })
      const inner = await BlockWriter.open(dir, { target: staging, sidecar, requestId: options.requestId, tokens: options.tokens })
      const bs = store.blockSize
      const blocks = inner.blockCount
      const boundaries = options.boundaries ?? 'sealed'
      const targets = blocks === 0 ? [] : boundaries === 'every' ? Array.from({ length: blocks }, (_, k) => (k + 1) * bs) : [blocks * bs]
      const w = new LlamaCppStateWriter(inner, staging, stagingDir, options, Array.from(options.tokens), targets, biasVector(biases), started)
      w.timings.open = performance.now() - started
      return w
    } catch (e) {
      await rm(stagingDir, { recursive: true, force: true })
      throw e
    }
  }

  /** The validated manifest. */
  get manifest (): CaptureManifest {
    return this.inner.manifest
  }

  /** Full blocks of the capture's valid prefix: floor(T' / bs). */
  get blockCount (): number {
    return this.inner.blockCount
  }

  /** The boundaries that get a state, in order. */
  get boundaries (): readonly number[] {
    return this.targets
  }

  /** The staging block store's directory (removed by finalize and close). */
  get stagingPath (): string {
    return this.stagingDir
  }

  /**
   * One step: the next staged block while any is left, then (after the staged blocks are verified)
   * the next boundary's state; null when every state is written.
   */
  async writeNext (): Promise<StagedBlock | WrittenState | null> {
    if (this.finished) throw new PdBridgeError(`llama.cpp writer ${this.options.requestId}: already finalized`)
    if (this.inner.blocksWritten < this.inner.blockCount) {
      const b = await this.inner.writeNext()
      this.peak = Math.max(this.peak, this.inner.peakHeldBytes)
      if (b === null) throw new PdBridgeError(`llama.cpp writer ${this.options.requestId}: the staging writer stopped at block ${this.inner.blocksWritten} of ${this.inner.blockCount}`)
      return { kind: 'staged-block', block: b.block, boundary: b.boundary }
    }
    // Every block re-read through the staging store and checked against what was built; closes the capture.
    this.stagedReport ??= await this.inner.finalize()
    const i = this.done.length
    if (i >= this.targets.length) return null
    const state = await this.writeState(this.targets[i])
    this.done.push(state)
    const { sha256: _, ...out } = state
    return out
  }

  private positionBias (layer: number, which: 'compressor' | 'indexer'): Float32Array {
    return this.vector(`${compressorPrefixes(layer)[which]}.position_bias`)
  }

  // Our cache at n from the staged blocks, as the decoder's restore makes it, with the carries.
  private async restoreAt (n: number): Promise<ModelCache> {
    const hit = await this.staging.lookup(this.tokens.slice(0, n), { exactPromptRule: false })
    if (hit.cache === null || hit.cachedTokens !== n) {
      throw new PdBridgeError(`llama.cpp writer ${this.options.requestId}: the staged blocks restore ${hit.cachedTokens} of ${n} tokens${hit.reason === undefined ? '' : ` (${hit.reason})`}`)
    }
    const act = activationRounding(this.options.sidecar.json.profile.activations)
    hit.cache.layers.forEach((layer, i) => {
      if (layer.compressor !== null) deriveOverlapCarry(layer.compressor, { positionBias: this.positionBias(i, 'compressor') }, act)
      if (layer.indexer !== null) deriveOverlapCarry(layer.indexer, { positionBias: this.positionBias(i, 'indexer') }, act)
    })
    return hit.cache
  }

  private async writeState (n: number): Promise<WrittenState & { sha256: string | null }> {
    const { store } = this.options
    const prefix = this.tokens.slice(0, n)
    if (store.has(prefix)) {
      // A state for this key is already there (llama.cpp's own, or an earlier bridge): kept when it passes the check.
      const path = store.pathOf(store.keysOf(prefix)[n / store.blockSize - 1])
      try {
        const bytes = new Uint8Array(readFileSync(path))
        store.verify(bytes, prefix, path)
        return { kind: 'state', boundary: n, path, bytes: bytes.length, written: false, sha256: null }
      } catch {
        // unreadable or refused: replaced below
      }
    }
    let t = performance.now()
    const cache = await this.restoreAt(n)
    this.timings.restore += performance.now() - t
    t = performance.now()
    const bytes = serializeLlamaCppState(buildLlamaCppState(store.options.geometry, ourCacheOf(cache, prefix, this.vector)))
    this.peak = Math.max(this.peak, blockCacheBytes(cache) + bytes.byteLength)
    this.timings.state += performance.now() - t
    t = performance.now()
    const put = store.put(prefix, bytes)
    this.timings.write += performance.now() - t
    return { kind: 'state', boundary: n, path: put.path, bytes: put.bytes, written: true, sha256: sha256(bytes) }
  }

  /**
   * Write what is left, then re-read every state file through the store's check (geometry, the
   * prefix's own tokens) and compare what was written with what was built; remove the staging
   * store either way. Any failure is a PdBridgeError listing every bad state.
   */
  async finalize (): Promise<LlamaCppWriterReport> {
    try {
      while (await this.writeNext() !== null) { /* drain */ }
      this.finished = true
      const t = performance.now()
      const problems: string[] = []
      for (const s of this.done) {
        try {
          const bytes = new Uint8Array(readFileSync(s.path))
          this.options.store.verify(bytes, this.tokens.slice(0, s.boundary), s.path)
          if (s.sha256 !== null && sha256(bytes) !== s.sha256) problems.push(`${s.path}: the stored bytes differ from the state built`)
        } catch (e) {
          problems.push(`${s.path}: ${e instanceof Error ? e.message : String(e)}`)
        }
      }
      this.timings.verify = performance.now() - t
      if (problems.length > 0) throw new PdBridgeError(`llama.cpp writer ${this.options.requestId}: ${problems.length} of ${this.done.length} states failed verification: ${problems.join('; ')}`)
      return this.report(this.stagedReport!)
    } finally {
      this.finished = true
      await this.dispose()
    }
  }

  // Timings named as BlockWriter's: read (capture slices), build (staging blocks, restore, state),
  // write (store.put of the states), verify (their re-read); the parts under their own names too.
  private report (staged: BlockWriterReport): LlamaCppWriterReport {
    const s = staged.timings
    const stage = (s.build ?? 0) + (s.write ?? 0) + (s.verify ?? 0)
    const timings: Record<string, number> = {
      // spans the staging writer's open (manifest, checksums) and the checks before it
      open: this.timings.open,
      read: s.read ?? 0,
      build: stage + this.timings.restore + this.timings.state,
      write: this.timings.write,
      verify: this.timings.verify,
      stage,
      restore: this.timings.restore,
      state: this.timings.state,
      total: performance.now() - this.started,
    }
    const m = this.inner.manifest
    const states = this.done.map(({ sha256: _, ...rest }) => rest)
    return {
      requestId: this.options.requestId,
      state: m.state === 'done' ? 'done' : 'partial',
      tokenCount: m.tokenCount,
      startToken: 0,
      sealedLength: m.sealedLength,
      blockSize: this.options.store.blockSize,
      blocks: staged.blocks,
      written: states.filter((x) => x.written).length,
      reused: states.filter((x) => !x.written).length,
      verified: states.length,
      bytes: states.reduce((a, x) => a + x.bytes, 0),
      peakHeldBytes: Math.max(this.peak, staged.peakHeldBytes),
      timings,
      states,
      staged,
    }
  }

  /** Stop without finalizing: close the capture files, remove the staging store (states already put stay, each complete). */
  async close (): Promise<void> {
    this.finished = true
    await this.inner.close()
    await this.dispose()
  }

  private async dispose (): Promise<void> {
    if (this.removed) return
    this.removed = true
    await rm(this.stagingDir, { recursive: true, force: true })
  }
}
