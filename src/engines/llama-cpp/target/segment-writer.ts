// The llama.cpp writer of a capture still running (docs/llama-cpp.md, *Blocks while the engine
// runs*): the SegmentBlockWriter writes our oMLX blocks into the private staging store from the
// block segments the engine publishes, while it computes the next chunk; at the seal only what
// needs the last boundary remains: the staged blocks' verification, the restore of our cache at S,
// the state build and its put (StagedStates, the write-after writer's own code), then the states'
// verification. Nothing reaches the decoder's store before the seal, so a failure mid-stream leaves
// it as it was (the staged blocks are private); the staging directory is removed on every path.
import type { CaptureManifest } from '../../../wire/manifest.ts'
import { SegmentBlockWriter } from '../../../decode/writer/index.ts'
import { StagedStates, stateTargets, type LlamaCppWriterOptions, type LlamaCppWriterReport } from './staged-states.ts'

/** Writes a running capture as llama.cpp sequence states. Open with `LlamaCppSegmentWriter.open`. */
export class LlamaCppSegmentWriter {
  private constructor (
    private readonly inner: SegmentBlockWriter,
    private readonly states: StagedStates,
    private readonly options: LlamaCppWriterOptions,
    private readonly started: number,
    private readonly openMs: number,
  ) {}

  /**
   * Check the target as the write-after writer does, make the staging store and open the running
   * capture through SegmentBlockWriter.open (request id, T, fingerprint, the token digest).
   */
  static async open (dir: string, options: LlamaCppWriterOptions): Promise<LlamaCppSegmentWriter> {
    const started = performance.now()
    const states = await StagedStates.open(options)
    try {
      const inner = await SegmentBlockWriter.open(dir, { target: states.staging, sidecar: options.sidecar, requestId: options.requestId, tokens: options.tokens })
      return new LlamaCppSegmentWriter(inner, states, options, started, performance.now() - started)
    } catch (e) {
      await states.dispose()
      throw e
    }
  }

  /** Blocks staged from segments so far (built while the engine ran; no decoder sees them). */
  get blocksWritten (): number {
    return this.inner.blocksWritten
  }

  /** Entries of the decoder's store this writer put: states, and only at the seal. */
  get blocksKept (): number {
    return this.states.states.filter((s) => s.written).length
  }

  /** When each block was staged, ms from the open. */
  get putTimes (): readonly number[] {
    return this.inner.putTimes
  }

  /** The staging block store's directory (removed by finish and close). */
  get stagingPath (): string {
    return this.states.stagingDir
  }

  /** Stage every segment listed and not yet staged, in block order; the number staged. */
  async writeReady (): Promise<number> {
    return await this.inner.writeReady()
  }

  /**
   * The capture is sealed: stage what is left and verify the staged blocks (SegmentBlockWriter.finish:
   * done or partial, one segment per block of the valid prefix), then build, put and verify the
   * states. The staging store is removed either way.
   */
  async finish (): Promise<LlamaCppWriterReport & { manifest: CaptureManifest }> {
    try {
      const staged = await this.inner.finish()
      const { manifest, ...stagedReport } = staged
      for (const n of stateTargets(staged.blocks, this.options.store.blockSize, this.options.boundaries)) await this.states.writeState(n)
      this.states.verify()
      return { ...this.states.report(stagedReport, manifest, { open: this.openMs, started: this.started }), manifest }
    } finally {
      await this.states.dispose()
    }
  }

  /** Stop without finishing: remove the staging store (the decoder's store is untouched before the seal). */
  async close (): Promise<void> {
    await this.states.dispose()
  }
}
