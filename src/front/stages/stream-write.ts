// Stages 2 and 3 overlapped (docs/front-door.md, *Blocks while the engine runs*): the engine
// publishes a segment per block once every layer has passed its boundary, and this stage writes
// those blocks while the engine computes the next chunk, from the local mount or from the share
// (mirrored into the spool, each segment verified). Once the manifest is sealed, only the last
// segments and the verification remain. The engine watch runs meanwhile as in the capture stage;
// a failure stops the bridge with its reason and keeps what was written: every block is whole and
// correct for its own prefix, and the verdict says how many were written before it stopped.
import { access } from 'node:fs/promises'
import { join } from 'node:path'
import type { BlockWriterReport } from '../../decode/writer/index.ts'
import { errorCode, PD_ERR, PdBridgeError, type PdErrorCode } from '../../errors.ts'
import { captureDir, MANIFEST_FILE, readManifest, type CaptureManifest } from '../../wire/manifest.ts'
import { EngineWatch } from '../engine-watch.ts'
import { callJson, joinUrl } from '../http.ts'
import type { CaptureWriterOptions, DecoderTarget, SegmentWriter } from '../target.ts'
import { CaptureWake } from './capture-wake.ts'
import { BridgeFailure, captureCause, openCause, writeCause, type Cause } from './failure.ts'
import type { BridgeRun } from './run.ts'
import { SegmentMirror } from './segment-mirror.ts'
import { round, stopwatch, type BridgeTimings } from './timings.ts'

/** What the streamed stage reports besides the writer's report. */
export interface StreamedWrite {
  report: BlockWriterReport
  manifest: CaptureManifest
  /** Blocks put before the stage saw the capture sealed (written while the engine ran). */
  blocksBeforeSeal: number
  fetchedBytes?: number
  timings: Pick<BridgeTimings, 'capture' | 'block_stage' | 'first_block' | 'after_seal' | 'engine_start' | 'seal_seen' | 'engine_segment_write' | 'segment_writer'>
}

/**
 * Whether this bridge streams its blocks: the config allows it, the target builds blocks from
 * segments, and the prefill engine's /health says it publishes them (`stream_blocks: true`).
 */
export async function streamsBlocks (run: BridgeRun, target: DecoderTarget): Promise<boolean> {
  if (!run.config.capture.streamBlocks || target.openSegmentWriter === undefined) return false
  try {
    const answer = await callJson('prefill engine', joinUrl(run.config.prefill.url as string, '/health'), { timeoutMs: run.config.deadlines.linkMs, headers: run.auth, signal: run.signal })
    return (answer.body as { stream_blocks?: unknown } | null)?.stream_blocks === true
  } catch {
    // Busy or gone: the submit finds out which; the bridge then writes after the seal.
    return false
  }
}

// The local mount's manifest, or null before the engine wrote it (it appears whole: an atomic rename).
async function localManifest (dir: string): Promise<CaptureManifest | null> {
  try {
    await access(join(dir, MANIFEST_FILE))
  } catch {
    return null
  }
  return await readManifest(dir)
}

function withWritten (cause: Cause, written: number): Cause {
  return written === 0 ? cause : { ...cause, reason: `${cause.reason} (${written} whole blocks written before it stopped stay in the store)` }
}

/** Run the capture and the block writes overlapped; throws the stage's BridgeFailure. */
export async function streamWriteBlocks (run: BridgeRun, target: DecoderTarget, options: CaptureWriterOptions): Promise<StreamedWrite> {
  const { config, auth } = run
  const d = config.deadlines
  const open = target.openSegmentWriter
  if (open === undefined) throw run.fail({ reason: `capture rejected by the block writer: the ${target.kind} target writes no block segments`, code: PD_ERR.WRITER_REJECTED }, 'capture')
  const time = stopwatch()
  const watch = new EngineWatch({
    url: config.prefill.url as string, requestId: run.requestId, pollMs: d.pollMs, linkMs: d.linkMs, downPolls: d.engineDownPolls, stallMs: d.engineStallMs ?? d.stallMs, headers: auth,
    onFailure: (reason, code) => run.abandon({ reason, code }),
  })
  run.watch = watch
  watch.start()
  let mirror: SegmentMirror | undefined
  let dir: string
  if (config.share.url !== undefined) {
    dir = captureDir(config.capture.spoolDir as string, run.requestId)
    run.spoolDir = dir
    mirror = new SegmentMirror({ baseUrl: config.share.url, requestId: run.requestId, dir, headers: auth, signal: run.signal, timeoutMs: d.linkMs })
  } else {
    dir = captureDir(config.capture.dir as string, run.requestId)
  }
  const deadline = performance.now() + d.captureMs
  // The share holds a look for up to half the link deadline (whole seconds), so the wait never outlasts a GET's own deadline.
  const waitS = Math.floor(d.linkMs / 2000)
  const m = mirror
  const wake = new CaptureWake(m === undefined ? { dir } : { longPoll: async () => waitS >= 1 && await m.waitForChange(waitS) }, d.pollMs, run.signal)
  let writer: SegmentWriter | undefined
  let stage = 'capture'
  let sealedAt: number | undefined
  try {
    for (;;) {
      if (run.signal.aborted) throw run.fail(run.abandoned ?? { reason: 'the capture was abandoned', code: PD_ERR.BRIDGE_ABANDONED }, stage)
      if (performance.now() > deadline) throw run.fail({ reason: `timeout: the capture was not sealed within ${d.captureMs} ms`, code: PD_ERR.BRIDGE_DEADLINE }, stage)
      let manifest: CaptureManifest | null
      try {
        manifest = mirror !== undefined ? await mirror.step() : await localManifest(dir)
      } catch (e) {
        throw run.fail(captureCause(e, run.abandoned, d.captureMs), stage)
      }
      // Seen sealed: the local read or the share's manifest answer (before its last segments were fetched).
      if (manifest !== null && manifest.state !== 'running') sealedAt = mirror !== undefined ? mirror.manifestAt : performance.now()
      if (manifest !== null && writer === undefined) {
        try {
          writer = await open(dir, options)
        } catch (e) {
          throw run.fail(errorCode(e) === PD_ERR.CAPTURE_FAILED ? captureCause(e, run.abandoned, d.captureMs) : openCause(e), stage)
        }
      }
      if (manifest?.state === 'failed') {
        const failed = new PdBridgeError(`capture ${manifest.requestId} failed on the prefill side: ${manifest.error ?? 'no error recorded'}`, { code: PD_ERR.CAPTURE_FAILED })
        throw run.fail(captureCause(failed, run.abandoned, d.captureMs), stage)
      }
      // Sealed: what is still listed is the finish's to write (after_seal).
      if (sealedAt !== undefined) break
      if (writer !== undefined) {
        stage = 'write'
        try {
          await writer.writeReady()
        } catch (e) {
          throw run.fail(writeCause(e), stage)
        }
      }
      await wake.wait()
    }
    watch.stop()
    const w = writer as SegmentWriter
    const beforeSeal = w.blocksWritten
    let report
    try {
      report = await w.finish()
    } catch (e) {
      throw run.fail(errorCode(e) === PD_ERR.CAPTURE_FAILED ? captureCause(e, run.abandoned, d.captureMs) : writeCause(e), 'write')
    }
    const firstBlock = w.putTimes[0]
    const sealed = sealedAt as number
    return {
      report,
      manifest: report.manifest,
      blocksBeforeSeal: beforeSeal,
      ...(mirror !== undefined ? { fetchedBytes: mirror.fetchedBytes } : {}),
      timings: {
        capture: time.ms(),
        block_stage: round(performance.now() - sealed),
        after_seal: round(performance.now() - sealed),
        ...(firstBlock !== undefined ? { first_block: round(firstBlock) } : {}),
        ...engineEdges(report.manifest.timings, performance.timeOrigin + time.started - (run.timings.submit ?? 0), performance.timeOrigin + sealed),
        ...engineSegmentCost(report.manifest.timings),
      },
    }
  } catch (e) {
    // Whatever the writer holds (llama.cpp's staging store) goes; what it put in the store stays, whole.
    await writer?.close().catch(() => {})
    if (e instanceof BridgeFailure) throw withWrittenFailure(run, e, writer?.blocksKept ?? 0)
    throw e
  } finally {
    wake.close()
  }
}

/**
 * Where the engine's clock sits in the stage, from the wall-clock stamps an engine may record in its
 * manifest (the torch engine's `prefillStartAt`, `prefillEndAt`): `engine_start` from the front's
 * POST to the engine's clock starting (the submit, request parsing, the queue), `seal_seen` from the
 * clock stopping to the front seeing the seal. Both compare two processes' wall clocks, so they mean
 * something only with the engine on the front door's host (as in the rung).
 */
export function engineEdges (engine: Record<string, number>, postedAt: number, sealSeenAt: number): Pick<BridgeTimings, 'engine_start' | 'seal_seen'> {
  const { prefillStartAt: start, prefillEndAt: end } = engine
  return {
    ...(start !== undefined ? { engine_start: round(start - postedAt) } : {}),
    ...(end !== undefined ? { seal_seen: round(sealSeenAt - end) } : {}),
  }
}

/**
 * What the engine's manifest says its block segments cost: `segmentWrite` on the engine's own thread
 * (inside the torch engine's clock; ours leaves its flush out of its clock) and `segmentWriter`, a writer thread's time beside it (torch).
 */
export function engineSegmentCost (engine: Record<string, number>): Pick<BridgeTimings, 'engine_segment_write' | 'segment_writer'> {
  const { segmentWrite, segmentWriter } = engine
  return {
    ...(segmentWrite !== undefined ? { engine_segment_write: round(segmentWrite) } : {}),
    ...(segmentWriter !== undefined ? { segment_writer: round(segmentWriter) } : {}),
  }
}

function withWrittenFailure (run: BridgeRun, e: BridgeFailure, written: number): BridgeFailure {
  if (written === 0) return e
  return run.fail(withWritten({ reason: e.reason, code: e.pdCode as PdErrorCode }, written), e.stage)
}
