// Stage 2, the capture source: the engine prefills while its capture is made available here, from
// the share (streamed into a spool, each layer verified as it arrives) or from a local mount of
// the engine's capture root (waited for until the engine seals it). An engine watch runs
// meanwhile and stops the bridge when the engine dies, fails the request or stalls.
// `captureFromShare` is the one way a capture comes from the share: the bridge and the writer's
// tests both take it, then open the writer on what it returns (write.ts).
import { captureDir, type CaptureRequest } from '../../wire/manifest.ts'
import type { SpoolTimes } from '../../decode/writer/index.ts'
import { PD_ERR } from '../../errors.ts'
import { EngineWatch, type EngineStatus } from '../engine-watch.ts'
import { BridgeFailure, captureCause } from './failure.ts'
import type { BridgeRun } from './run.ts'
import { spoolCapture, type SpoolOptions, type SpoolResult } from './spool.ts'
import { round, stopwatch, type BridgeTimings } from './timings.ts'

/** A sealed capture on local disk, ready for the writer. */
export interface CaptureAtHand {
  /** The capture directory (the spool's, or the mount's). */
  dir: string
  /** From the share: the stream's result, and when the spool was complete (for the writer's report). */
  spooled?: SpoolResult
  spool?: SpoolTimes
}

/**
 * Stream the capture from the share into `<spoolRoot>/<requestId>/` (spoolCapture: each layer
 * verified by the share client, then written; the manifest last). No block can be written before
 * every layer has arrived: each block needs every layer's state at its boundary, and the last
 * layer lands last. Rejects as spoolCapture does.
 */
export async function captureFromShare (options: SpoolOptions): Promise<CaptureAtHand & { spooled: SpoolResult, spool: SpoolTimes }> {
  const started = performance.now()
  const spooled = await spoolCapture(options)
  const landed = spooled.layerLandedMs
  return {
    dir: spooled.dir,
    spooled,
    spool: {
      started,
      spoolMs: performance.now() - started,
      firstLayer: landed.length > 0 ? Math.min(...landed) : 0,
      lastLayer: landed.length > 0 ? Math.max(...landed) : 0,
    },
  }
}

/** Reject with `make()` after `ms`; whichever comes first wins the race. */
function raceDeadline<T> (work: Promise<T>, ms: number, make: () => BridgeFailure): Promise<T> {
  let timer: NodeJS.Timeout | undefined
  const deadline = new Promise<never>((_resolve, reject) => { timer = setTimeout(() => reject(make()), ms) })
  return Promise.race([work, deadline]).finally(() => clearTimeout(timer))
}

/** The local mount: wait until the watch sees the capture sealed in capture.dir. */
async function captureFromMount (run: BridgeRun, watch: EngineWatch): Promise<CaptureAtHand> {
  const d = run.config.deadlines
  const aborted = new Promise<never>((_r, reject) => run.signal.addEventListener('abort', () => reject(new Error('aborted')), { once: true }))
  try {
    await raceDeadline(Promise.race([watch.sealed, aborted]), d.captureMs,
      () => run.fail({ reason: `timeout: the capture was not sealed within ${d.captureMs} ms`, code: PD_ERR.BRIDGE_DEADLINE }, 'capture'))
  } catch (e) {
    if (e instanceof BridgeFailure) throw e
    throw run.fail(run.abandoned ?? { reason: 'the capture was abandoned', code: PD_ERR.BRIDGE_ABANDONED }, 'capture')
  }
  return { dir: captureDir(run.config.capture.dir as string, run.requestId) }
}

/** Run the capture source stage for `request` (share when share.url is set, else the local mount). */
export async function captureSource (run: BridgeRun, request: CaptureRequest): Promise<{ at: CaptureAtHand, timings: Pick<BridgeTimings, 'capture'> }> {
  const { config, auth } = run
  const d = config.deadlines
  const time = stopwatch()
  const watch = new EngineWatch({
    url: config.prefill.url as string, requestId: run.requestId, pollMs: d.pollMs, linkMs: d.linkMs, downPolls: d.engineDownPolls, stallMs: d.engineStallMs ?? d.stallMs, headers: auth,
    onFailure: (reason, code) => run.abandon({ reason, code }),
  })
  run.watch = watch
  watch.start()
  let at: CaptureAtHand
  if (config.share.url !== undefined) {
    const spoolRoot = config.capture.spoolDir as string
    // Ours from here on, removed whatever the outcome (even one the spool did not create).
    run.spoolDir = captureDir(spoolRoot, run.requestId)
    try {
      at = await captureFromShare({
        ...request, baseUrl: config.share.url, spoolRoot, pollMs: d.pollMs, deadlineMs: d.captureMs, stallMs: d.stallMs, signal: run.signal, headers: auth,
      })
    } catch (e) {
      throw run.fail(captureCause(e, run.abandoned, d.captureMs), 'capture')
    }
  } else {
    at = await captureFromMount(run, watch)
  }
  watch.stop()
  return { at, timings: { capture: time.ms() } }
}

/** The engine's own timings: from the sealed manifest, else its last status answer. */
export function engineTimings (manifestTimings: Record<string, number>, last: EngineStatus | undefined): Pick<BridgeTimings, 'engine_prefill' | 'engine_queue'> {
  const out: Pick<BridgeTimings, 'engine_prefill' | 'engine_queue'> = {}
  const prefill = manifestTimings.prefill ?? last?.timings?.prefill
  const queue = manifestTimings.queue ?? last?.timings?.queue
  if (prefill !== undefined) out.engine_prefill = round(prefill)
  if (queue !== undefined) out.engine_queue = round(queue)
  return out
}

/** The share client's timings of a spooled capture (none for a local one). */
export function transferTimings (at: CaptureAtHand): Pick<BridgeTimings, 'transfer' | 'first_layer'> {
  if (at.spooled === undefined) return {}
  const t = at.spooled.stream.timings
  return { transfer: round(t.downloadMs ?? 0), ...(t.firstLayerMs !== undefined ? { first_layer: round(t.firstLayerMs) } : {}) }
}
