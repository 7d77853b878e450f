// The bridge's writer for a llama.cpp decoder: a sealed capture becomes llama.cpp sequence-state
// files in a LlamaCppStateStore. It reuses the verified path end to end: the streaming BlockWriter
// writes the capture's oMLX blocks into a private staging block store (a temp directory this writer
// owns and removes; the manifest, checksum and token-digest checks happen in its open), and the
// states are built from those blocks by StagedStates (./staged-states.ts), which the segment writer
// (./segment-writer.ts) shares.
// By default only the sealed boundary S (the last block boundary the capture covers) is written:
// each file is a whole state, so every boundary would cost O(B^2) bytes, and llama.cpp restores
// one file, the longest stored prefix.
import type { CaptureManifest } from '../../../wire/manifest.ts'
import { BlockWriter, type BlockWriterReport } from '../../../decode/writer/index.ts'
import { PdBridgeError } from '../../../errors.ts'
import type { CaptureWriter } from '../../../decode/writer/index.ts'
import { StagedStates, stateTargets, type LlamaCppWriterOptions, type LlamaCppWriterReport, type WrittenState } from './staged-states.ts'

export type { LlamaCppWriterOptions, LlamaCppWriterReport, StateBoundaries, WrittenState } from './staged-states.ts'

/** One staged oMLX block (an intermediate step; no decoder sees it). */
export interface StagedBlock {
  kind: 'staged-block'
  block: number
  boundary: number
}

/** Writes one capture as llama.cpp sequence states. Open with `LlamaCppStateWriter.open`. */
export class LlamaCppStateWriter implements CaptureWriter {
  private stagedReport: BlockWriterReport | undefined
  private finished = false

  private constructor (
    private readonly inner: BlockWriter,
    private readonly states: StagedStates,
    private readonly options: LlamaCppWriterOptions,
    private readonly targets: number[],
    private readonly started: number,
    private readonly openMs: number,
  ) {}

  /**
   * Check the sidecar, the config and the store's geometry against each other, read the position
   * biases, make the staging store (StagedStates.open) and open the capture through BlockWriter.open
   * (request id, T, fingerprint, every layer file's SHA-256, the token digest). Nothing is written yet.
   */
  static async open (dir: string, options: LlamaCppWriterOptions): Promise<LlamaCppStateWriter> {
    const started = performance.now()
    const states = await StagedStates.open(options)
    try {
      const inner = await BlockWriter.open(dir, { target: states.staging, sidecar: options.sidecar, requestId: options.requestId, tokens: options.tokens })
      const targets = stateTargets(inner.blockCount, options.store.blockSize, options.boundaries)
      return new LlamaCppStateWriter(inner, states, options, targets, started, performance.now() - started)
    } catch (e) {
      await states.dispose()
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
    return this.states.stagingDir
  }

  /**
   * One step: the next staged block while any is left, then (after the staged blocks are verified)
   * the next boundary's state; null when every state is written.
   */
  async writeNext (): Promise<StagedBlock | WrittenState | null> {
    if (this.finished) throw new PdBridgeError(`llama.cpp writer ${this.options.requestId}: already finalized`)
    if (this.inner.blocksWritten < this.inner.blockCount) {
      const b = await this.inner.writeNext()
      if (b === null) throw new PdBridgeError(`llama.cpp writer ${this.options.requestId}: the staging writer stopped at block ${this.inner.blocksWritten} of ${this.inner.blockCount}`)
      return { kind: 'staged-block', block: b.block, boundary: b.boundary }
    }
    // Every block re-read through the staging store and checked against what was built; closes the capture.
    this.stagedReport ??= await this.inner.finalize()
    const i = this.states.states.length
    if (i >= this.targets.length) return null
    return await this.states.writeState(this.targets[i])
  }

  /**
   * Write what is left, then re-read every state file through the store's check and compare what
   * was written with what was built; remove the staging store either way. Any failure is a
   * PdBridgeError listing every bad state.
   */
  async finalize (): Promise<LlamaCppWriterReport> {
    try {
      while (await this.writeNext() !== null) { /* drain */ }
      this.finished = true
      this.states.verify()
      return this.states.report(this.stagedReport!, this.inner.manifest, { open: this.openMs, started: this.started })
    } finally {
      this.finished = true
      await this.states.dispose()
    }
  }

  /** Stop without finalizing: close the capture files, remove the staging store (states already put stay, each complete). */
  async close (): Promise<void> {
    this.finished = true
    await this.inner.close()
    await this.states.dispose()
  }
}
