// Running one job: start its capture, prefill from position 0 into a fresh cache (no prefix
// caching: every request computes every token the capture pools) or, for a warm-extended request,
// from the boundary P of the carry it was sent (the decoder's own cache, mounted: docs/warm-extend.md),
// in chunks, handing each layer's
// attention input to the capture hook, and yield to the event loop between chunks so status and
// health requests are answered while a long prefill runs. The manifest stays `running` until
// finish(); any failure is recorded with fail(), so no path leaves a capture claiming done early.
import { rm } from 'node:fs/promises'
import { setImmediate as yieldToEventLoop } from 'node:timers/promises'
import { mountCarry } from '../../capture/carry.ts'
import { SafetensorsFile } from '../../formats/safetensors/index.ts'
import type { CaptureManifest } from '../../wire/manifest.ts'
import { PdBridgeError } from '../../errors.ts'
import type { AttnInputHook, DeepseekV4Engine, ModelCache } from '../../model/engine/index.ts'
import { ms, type PrefillJob } from './job.ts'
import type { JobRunner } from './queue.ts'

/** The capture hook's side of a request: src/capture's CaptureSession has exactly this shape. */
export interface CaptureSink {
  readonly dir: string
  /** T until a memory budget seals a shorter prefix T'; rows past it are ignored. */
  readonly sealedLength: number
  onAttentionInput: AttnInputHook
  flush (): Promise<void>
  finish (timings?: Record<string, number>): Promise<CaptureManifest>
  fail (err: unknown): Promise<void>
  /** The most cache bytes the capture held in memory at once (logged with prefill-end). */
  readonly peakHeldBytes?: number
}

/**
 * Opens the capture of one request (CaptureSession.start with the engine's sidecar and root). `tokens`
 * are the very ids the engine prefills; the capture records their digest for the block writer.
 */
export type StartCapture = (opts: { requestId: string, tokenCount: number, tokens: Int32Array, memoryBudgetBytes?: number, resumeFrom?: string, segments?: boolean }) => Promise<CaptureSink>

/** What a runner needs. */
export interface RunnerDeps {
  engine: Pick<DeepseekV4Engine, 'newCache' | 'prefill'>
  startCapture: StartCapture
  /** Tokens per engine call; the event loop runs between calls. */
  maxChunk: number
  /** A reason to abandon the running prefill (shutdown), checked between chunks. */
  stopReason: () => string | undefined
  /** Called after every chunk with its token count and engine time in ms (throughput estimate). */
  onChunk?: (tokens: number, elapsedMs: number) => void
  /** One structured event per state change. */
  log: (event: Record<string, unknown>) => void
}

function messageOf (err: unknown): string {
  return err instanceof Error ? err.message : String(err)
}

/** The engine's cache mounted from the carry at `path` (the decoder's cache at its boundary P). */
async function mountedCache (engine: RunnerDeps['engine'], path: string): Promise<ModelCache> {
  const file = await SafetensorsFile.open(path)
  try {
    return await mountCarry(file, engine.newCache(), path)
  } finally {
    await file.close()
  }
}

/** A JobRunner that prefills with capture; it records every outcome on the job and never throws. */
export function makeCaptureRunner (deps: RunnerDeps): JobRunner {
  return async (job: PrefillJob): Promise<void> => {
    const started = performance.now()
    const tokenCount = job.tokens.length
    job.state = 'running'
    job.timings.queue = ms(started - job.submittedAt)
    deps.log({ event: 'prefill-start', request_id: job.requestId, token_count: tokenCount })
    let session: CaptureSink | undefined
    try {
      const resumeFrom = job.resume?.path
      session = await deps.startCapture({
        requestId: job.requestId, tokenCount, tokens: job.tokens, memoryBudgetBytes: job.memoryBudgetBytes, ...(resumeFrom === undefined ? {} : { resumeFrom }), ...(job.streamBlocks === true ? { segments: true } : {}),
      })
      job.captureDir = session.dir
      const sink = session
      const hook: AttnInputHook = (layer, startPos, rows, count) => { sink.onAttentionInput(layer, startPos, rows, count) }
      const cache = resumeFrom === undefined ? deps.engine.newCache() : await mountedCache(deps.engine, resumeFrom)
      let engineMs = 0
      for (let c0 = cache.tokenCount; c0 < tokenCount; c0 += deps.maxChunk) {
        const reason = deps.stopReason()
        if (reason !== undefined) throw new PdBridgeError(`${reason} after ${c0} of ${tokenCount} tokens`)
        const c1 = Math.min(tokenCount, c0 + deps.maxChunk)
        const t0 = performance.now()
        deps.engine.prefill(job.tokens.subarray(c0, c1), cache, { attnInputHook: hook, logits: 'none', maxChunk: deps.maxChunk })
        const t1 = performance.now()
        engineMs += t1 - t0
        deps.onChunk?.(c1 - c0, t1 - t0)
        await sink.flush()
        job.timings.prefill = ms(engineMs)
        // Past the memory budget the capture sealed a shorter prefix that every layer has now
        // reached: the rest of the prompt would feed nothing, and no logits are wanted.
        if (sink.sealedLength <= c1) break
        await yieldToEventLoop()
      }
      const f0 = performance.now()
      const manifest = await sink.finish({ queue: job.timings.queue, prefill: job.timings.prefill })
      job.timings.finish = ms(performance.now() - f0)
      if (manifest.state !== 'done' && manifest.state !== 'partial') {
        throw new PdBridgeError(`the capture sealed as ${manifest.state}${manifest.error === undefined ? '' : ` (${manifest.error})`}`)
      }
      job.sealedLength = manifest.sealedLength
      job.state = manifest.state
    }
    catch (err) {
      job.state = 'failed'
      job.error = messageOf(err)
      if (session !== undefined) {
        try {
          await session.fail(err)
        }
        catch (failErr) {
          // The manifest then stays `running`, which no reader trusts; the next start marks it failed.
          deps.log({ event: 'capture-fail-error', request_id: job.requestId, error: messageOf(failErr) })
        }
      }
    }
    // A carry serves one request: it goes when the request ends, whatever the outcome.
    if (job.resume !== undefined) await rm(job.resume.path, { force: true })
    job.timings.total = ms(performance.now() - job.submittedAt)
    deps.log({
      event: 'prefill-end', request_id: job.requestId, state: job.state, token_count: tokenCount, ...(job.resume === undefined ? {} : { start_token: job.resume.startToken }),
      sealed_length: job.sealedLength, timings: job.timings,
      ...(session?.peakHeldBytes === undefined ? {} : { capture_peak_held_bytes: session.peakHeldBytes }), ...(job.error === undefined ? {} : { error: job.error }),
    })
  }
}
