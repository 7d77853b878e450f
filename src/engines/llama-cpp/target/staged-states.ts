// The llama.cpp writers' shared half: a private staging block store (our oMLX blocks, written by
// the BlockWriter after the seal or by the SegmentBlockWriter while the engine runs), and the
// states built from it at the capture's boundaries. The decoder's restore path rebuilds our cache at
// a boundary from the staged blocks, the overlap carries are derived with the sidecar's position
// biases as our engine derives them, and buildLlamaCppState turns that cache into the state, put
// (checked, atomic) under the boundary's chain key. Both writers go through here, so the state a
// streamed capture gets is built by the very code the write-after path uses.
import { createHash } from 'node:crypto'
import { mkdtemp, rm } from 'node:fs/promises'
import { readFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import type { CaptureManifest } from '../../../wire/manifest.ts'
import type { SidecarJson } from '../../../wire/sidecar-format.ts'
import { DecoderPrefixCache } from '../../../decode/prefix-cache/index.ts'
import { blockCacheBytes, type BlockWriterReport } from '../../../decode/writer/index.ts'
import { PdBridgeError } from '../../../errors.ts'
import type { DeepseekV4Config } from '../../../model/config.ts'
import { activationRounding } from '../../../model/engine/activation.ts'
import { deriveOverlapCarry } from '../../../model/engine/compressor.ts'
import type { ModelCache } from '../../../model/engine/index.ts'
import { compressorPrefixes } from '../../../model/engine/attention-weights.ts'
import { buildLlamaCppState } from '../state/build.ts'
import { ourCacheOf } from '../state/files.ts'
import { serializeLlamaCppState } from '../state/writer.ts'
import type { LlamaCppStateStore } from '../store/state-store.ts'
import { checkLlamaCppTarget } from './checks.ts'
import { biasVector, readPositionBiases } from './position-bias.ts'

/** Which boundaries get a state file. */
export type StateBoundaries = 'sealed' | 'every'

/** What a llama.cpp writer starts from (besides where the capture is). */
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

/** What a llama.cpp writer reports: a BlockWriterReport (bytes = state bytes) with the states and the staging report. */
export interface LlamaCppWriterReport extends BlockWriterReport {
  states: WrittenState[]
  /** The staging writer's own report (its blocks, bytes and timings). */
  staged: BlockWriterReport
}

const sha256 = (b: Uint8Array): string => createHash('sha256').update(b).digest('hex')

/** The boundaries that get a state when the capture's valid prefix holds `blocks` full blocks. */
export function stateTargets (blocks: number, bs: number, boundaries: StateBoundaries = 'sealed'): number[] {
  if (blocks === 0) return []
  return boundaries === 'every' ? Array.from({ length: blocks }, (_, k) => (k + 1) * bs) : [blocks * bs]
}

/** The staging store and the states built from it. Open with `StagedStates.open`; `dispose` removes the staging directory. */
export class StagedStates {
  private readonly done: Array<WrittenState & { sha256: string | null }> = []
  readonly timings: Record<string, number> = { restore: 0, state: 0, write: 0 }
  private peak = 0
  private removed = false

  private constructor (
    /** Where our blocks are staged (the writers write into it). */
    readonly staging: DecoderPrefixCache,
    readonly stagingDir: string,
    private readonly options: LlamaCppWriterOptions,
    private readonly tokens: number[],
    private readonly vector: (name: string) => Float32Array,
  ) {}

  /**
   * Check the sidecar, the config and the store's geometry against each other (checkLlamaCppTarget),
   * read the position biases and make the staging store; nothing of the capture is read yet.
   */
  static async open (options: LlamaCppWriterOptions): Promise<StagedStates> {
    const { store, cfg, sidecar } = options
    checkLlamaCppTarget(sidecar.json, cfg, store.options.geometry, store.blockSize)
    const biases = await readPositionBiases(sidecar.dir, sidecar.json)
    const stagingDir = await mkdtemp(join(options.stagingRoot ?? tmpdir(), 'pd-bridge-llama-staging-'))
    try {
      const staging = await DecoderPrefixCache.open({
        storeRoot: stagingDir, modelName: store.options.modelName, cfg, profile: sidecar.json.profile, blockSize: store.blockSize, log: () => {},
      })
      return new StagedStates(staging, stagingDir, options, Array.from(options.tokens), biasVector(biases))
    } catch (e) {
      await rm(stagingDir, { recursive: true, force: true })
      throw e
    }
  }

  /** States put (or found) so far. */
  get states (): readonly WrittenState[] {
    return this.done
  }

  /** The largest cache plus state held while building (the report's peakHeldBytes). */
  get peakHeldBytes (): number {
    return this.peak
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

  /** Build and put the state at boundary n from the staged blocks (a stored one that passes the check is kept). */
  async writeState (n: number): Promise<WrittenState> {
    const { store } = this.options
    const prefix = this.tokens.slice(0, n)
    if (store.has(prefix)) {
      // A state for this key is already there (llama.cpp's own, or an earlier bridge): kept when it passes the check.
      const path = store.pathOf(store.keysOf(prefix)[n / store.blockSize - 1])
      try {
        const bytes = new Uint8Array(readFileSync(path))
        store.verify(bytes, prefix, path)
        return this.record({ kind: 'state', boundary: n, path, bytes: bytes.length, written: false, sha256: null })
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
    return this.record({ kind: 'state', boundary: n, path: put.path, bytes: put.bytes, written: true, sha256: sha256(bytes) })
  }

  private record (state: WrittenState & { sha256: string | null }): WrittenState {
    this.done.push(state)
    const { sha256: _, ...out } = state
    return out
  }

  /**
   * Re-read every state file through the store's check (geometry, the prefix's own tokens) and
   * compare what was written with what was built; a PdBridgeError listing every bad state.
   */
  verify (): void {
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
  }

  // Timings named as BlockWriter's: read (capture slices), build (staging blocks, restore, state),
  // write (store.put of the states), verify (their re-read); the parts under their own names too.
  /** The writer's report from the staging writer's report and the capture's manifest. */
  report (staged: BlockWriterReport, m: CaptureManifest, o: { open: number, started: number }): LlamaCppWriterReport {
    const s = staged.timings
    const stage = (s.build ?? 0) + (s.write ?? 0) + (s.verify ?? 0)
    const timings: Record<string, number> = {
      // spans the staging writer's open (manifest, checksums) and the checks before it
      open: o.open,
      read: s.read ?? 0,
      build: stage + this.timings.restore + this.timings.state,
      write: this.timings.write,
      verify: this.timings.verify ?? 0,
      stage,
      restore: this.timings.restore,
      state: this.timings.state,
      total: performance.now() - o.started,
    }
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

  /** Remove the staging store (once; states already put stay, each complete). */
  async dispose (): Promise<void> {
    if (this.removed) return
    this.removed = true
    await rm(this.stagingDir, { recursive: true, force: true })
  }
}
