// Stage 3, write: the decoder's writer opens the sealed capture (manifest, checksums and token
// digest checked again), writes one block (or state) per step, released before the next, with the
// deadline checked between steps, and finalize re-reads and verifies everything it wrote.
// `openCaptureWriter` is the one way a writer is opened on a capture at hand, by the bridge and by
// the writer's tests alike.
import type { BlockWriterReport } from '../../decode/writer/index.ts'
import { PD_ERR } from '../../errors.ts'
import type { CaptureWriter, CaptureWriterOptions, DecoderTarget } from '../target.ts'
import type { CaptureAtHand } from './capture-source.ts'
import { BridgeFailure, openCause, writeCause } from './failure.ts'
import type { BridgeRun } from './run.ts'
import { round, stopwatch, type BridgeTimings } from './timings.ts'

/** Open `target`'s writer on the capture at hand (a spooled one passes on when its layers landed). */
export async function openCaptureWriter (target: DecoderTarget, at: CaptureAtHand, options: CaptureWriterOptions): Promise<CaptureWriter> {
  return await target.openWriter(at.dir, { ...options, ...(at.spool !== undefined ? { spool: at.spool } : {}) })
}

/** Run the write stage; throws the write's BridgeFailure (the writer closed, what it wrote kept). */
export async function writeBlocks (run: BridgeRun, target: DecoderTarget, at: CaptureAtHand, options: CaptureWriterOptions): Promise<{ writer: CaptureWriter, report: BlockWriterReport, timings: Pick<BridgeTimings, 'block_stage'> }> {
  const d = run.config.deadlines
  const time = stopwatch()
  let writer: CaptureWriter
  try {
    writer = await openCaptureWriter(target, at, options)
  } catch (e) {
    throw run.fail(openCause(e), 'write')
  }
  let report: BlockWriterReport
  try {
    const writeEnd = performance.now() + d.writeMs
    while (await writer.writeNext() !== null) {
      if (performance.now() > writeEnd) throw run.fail({ reason: `timeout: the blocks were not written within ${d.writeMs} ms`, code: PD_ERR.BRIDGE_DEADLINE }, 'write')
      if (run.signal.aborted) throw run.fail(run.abandoned ?? { reason: 'the bridge was abandoned', code: PD_ERR.BRIDGE_ABANDONED }, 'write')
    }
    report = await writer.finalize()
  } catch (e) {
    await writer.close()
    if (e instanceof BridgeFailure) throw e
    throw run.fail(writeCause(e), 'write')
  }
  return { writer, report, timings: { block_stage: time.ms() } }
}

/** A report of no block: the memory budget sealed the capture below one block. */
export function shortCapture (report: BlockWriterReport, captureTokens: number): { reason: string, code: typeof PD_ERR.CAPTURE_SHORT } {
  return { reason: `the capture was sealed at ${report.sealedLength} of ${captureTokens} tokens (memory budget), less than one block`, code: PD_ERR.CAPTURE_SHORT }
}

/**
 * The writer's part of the timings: reading and building (with builder threads, the wall time the
 * write stage waited for them); store.put plus verification.
 */
export function writerTimings (report: BlockWriterReport): Pick<BridgeTimings, 'assembly' | 'block_write'> {
  return {
    assembly: round((report.timings.read ?? 0) + (report.timings.build ?? 0) + (report.timings.buildWait ?? 0)),
    block_write: round((report.timings.write ?? 0) + (report.timings.verify ?? 0)),
  }
}
