// One bridge, end to end: submit the prompt's full blocks to the prefill engine, stream the
// capture as it is produced (from the share into a spool, or read locally), write one block per
// boundary into the decoder's store with the streaming writer, verify them, and ask the decoder to
// rescan. Every stage has a deadline; any failure is a BridgeFailure whose reason becomes the
// `declined: <reason>` verdict, and the request is then served natively. Blocks are written
// atomically and only from a capture whose manifest and checksums validated, so a failed bridge
// leaves at most complete, correct blocks of a prefix, never a torn file.
import { randomUUID } from 'node:crypto'
import { rm } from 'node:fs/promises'
import { captureDir, CaptureManifestError, tokenIdsSha256 } from '../wire/manifest.ts'
import type { FrontConfig } from '../config/index.ts'
import { spoolCapture, type BlockWriterReport, type SpoolResult } from '../decode/writer/index.ts'
import { errorCode, PD_ERR, PdBridgeError } from '../errors.ts'
import { CaptureFailedError, ChecksumError, ShareAbortedError, ShareDeadlineError, ShareHttpError, ShareStallError } from '../share/index.ts'
import { EngineWatch, type EngineStatus } from './engine-watch.ts'
import { acceptsConnections, callJson, errorMessageOf, isNoAnswer, joinUrl, LinkError } from './http.ts'
import { retireCapture, type Retention } from './retention.ts'
import type { BridgeSetup } from './setup.ts'
import type { CaptureWriter } from '../decode/writer/index.ts'

/**
 * A bridge that did not happen; `reason` is the verdict's, `stage` where it stopped. `requestId`
 * names the capture the engine accepted, which is then kept (never deleted after a failure).
 */
export class BridgeFailure extends PdBridgeError {
  override name = 'BridgeFailure'
  constructor (readonly reason: string, readonly stage: string, readonly timings: Record<string, number> = {}, readonly requestId?: string) {
    super(`${stage}: ${reason}`)
  }
}

/** What a finished bridge did. */
export interface BridgeOutcome {
  /** The capture's request id on the prefill side. */
  requestId: string
  /** done: every usable block; partial: the memory budget sealed a shorter prefix. */
  state: 'done' | 'partial'
  /** Tokens in the blocks written (B = blocks * block size). */
  bridgedTokens: number
  /** Tokens the prefill engine was asked for (the usable full blocks). */
  captureTokens: number
  /** T', the capture's valid prefix. */
  sealedLength: number
  /** `tokenIdsSha256` of the tokens the engine was asked for, which the capture manifest and the block writer agreed on. */
  tokensSha256: string
  report: BlockWriterReport
  /** Whether the decoder's rescan answered; the verdict does not depend on it (cached_tokens does). */
  rescan: { ok: boolean, error?: string, report?: unknown }
  /** What became of the capture on the prefill side once its blocks were verified (capture.retain). */
  retention: Retention
  /** Milliseconds per stage. */
  timings: Record<string, number>
  /** Byte counts. */
  bytes: Record<string, number>
}

/** What to bridge. */
export interface BridgeJob {
  /** The whole prompt's token ids. */
  tokens: number[]
  /** Full blocks to bridge (the usable ones): the engine gets tokens [0, blocks * bs). */
  blocks: number
}

const round = (ms: number): number => Math.round(ms * 10) / 10

/** The verdict reason for an error of the capture stream. */
function captureReason (e: unknown, watchReason: string | undefined, deadlineMs: number): string {
  if (e instanceof ShareAbortedError) return watchReason ?? 'the bridge deadline passed while the capture streamed'
  if (watchReason !== undefined) return watchReason
  if (e instanceof ChecksumError) return `capture checksum mismatch: ${e.message}`
  if (e instanceof CaptureManifestError) return `capture manifest mismatch: ${e.message}`
  if (e instanceof CaptureFailedError) return `prefill engine failed the capture: ${e.message}`
  if (e instanceof ShareStallError) return `share stalled: ${e.message}`
  if (e instanceof ShareDeadlineError) return `timeout: the capture did not arrive within ${deadlineMs} ms (${e.message})`
  if (e instanceof ShareHttpError) return `share unreachable or refusing: ${e.message}`
  return `capture stream failed: ${e instanceof Error ? e.message : String(e)}`
}

/** Reject with `make()` after `ms`, or when `signal` aborts; whichever comes first wins the race. */
function raceDeadline<T> (work: Promise<T>, ms: number, make: () => BridgeFailure): Promise<T> {
  let timer: NodeJS.Timeout | undefined
  const deadline = new Promise<never>((_resolve, reject) => { timer = setTimeout(() => reject(make()), ms) })
  return Promise.race([work, deadline]).finally(() => clearTimeout(timer))
}

/** Run one bridge. Throws BridgeFailure (with the timings so far) when any stage fails. */
export async function runBridge (config: FrontConfig, setup: BridgeSetup, job: BridgeJob, auth: Record<string, string> = {}): Promise<BridgeOutcome> {
  const d = config.deadlines
  const bs = setup.blockSize
  const requestId = `pd-${randomUUID()}`
  const captureTokens = job.tokens.slice(0, job.blocks * bs)
  // Travels with the request into the capture manifest; the writer keys blocks only under ids with this digest.
  const tokensSha256 = tokenIdsSha256(captureTokens)
  const timings: Record<string, number> = {}
  const bytes: Record<string, number> = {}
  const t0 = performance.now()
  const control = new AbortController()
  let watchReason: string | undefined
  const bridgeTimer = setTimeout(() => {
    watchReason ??= `timeout: the bridge took longer than ${d.bridgeMs} ms`
    control.abort()
  }, d.bridgeMs)
  let accepted = false
  const fail = (reason: string, stage: string): BridgeFailure => new BridgeFailure(reason, stage, { ...timings, bridge_total: round(performance.now() - t0) }, accepted ? requestId : undefined)
  const prefillUrl = config.prefill.url as string
  let watch: EngineWatch | undefined
  let spoolDir: string | undefined
  try {
    // 1. submit
    let t = performance.now()
    let answer
    try {
      answer = await callJson('prefill engine', joinUrl(prefillUrl, '/v1/prefill'), {
        method: 'POST',
        json: { request_id: requestId, tokens: captureTokens, tokens_sha256: tokensSha256, ...(config.prefill.memoryBudgetBytes !== undefined ? { memory_budget_bytes: config.prefill.memoryBudgetBytes } : {}) },
        timeoutMs: d.submitMs,
        headers: auth,
      })
    } catch (e) {
      // Connected but silent is a busy engine (its event loop held by a chunk), not a missing one.
      if (isNoAnswer(e) && await acceptsConnections(prefillUrl, d.linkMs)) throw fail(`prefill engine busy: no answer to the submit within ${d.submitMs} ms, though it accepts connections`, 'submit')
      throw fail(`prefill engine unreachable: ${e instanceof LinkError ? e.problem : String(e)}`, 'submit')
    }
    if (answer.status === 429) throw fail(`prefill engine busy: its queue is full (429): ${errorMessageOf(answer.body)}`, 'submit')
    if (answer.status !== 202) throw fail(`prefill engine refused the request (${answer.status}): ${errorMessageOf(answer.body)}`, 'submit')
    accepted = true
    timings.submit = round(performance.now() - t)

    // 2. capture: the engine prefills while the capture streams; the watcher catches a dead engine.
    t = performance.now()
    watch = new EngineWatch({
      url: prefillUrl, requestId, pollMs: d.pollMs, linkMs: d.linkMs, downPolls: d.engineDownPolls, stallMs: d.engineStallMs ?? d.stallMs, headers: auth,
      onFailure: (reason) => {
        watchReason ??= reason
        control.abort()
      },
    })
    watch.start()
    const request = { requestId, tokenCount: captureTokens.length, sidecarFingerprint: setup.sidecar.fingerprint }
    let dir: string
    let spooled: SpoolResult | undefined
    if (config.share.url !== undefined) {
      const spoolRoot = config.capture.spoolDir as string
      spoolDir = captureDir(spoolRoot, requestId)
      try {
        spooled = await spoolCapture({
          ...request, baseUrl: config.share.url, spoolRoot, pollMs: d.pollMs, deadlineMs: d.captureMs, stallMs: d.stallMs, signal: control.signal, headers: auth,
        })
      } catch (e) {
        throw fail(captureReason(e, watchReason, d.captureMs), 'capture')
      }
      dir = spooled.dir
    } else {
      try {
        await raceDeadline(Promise.race([watch.sealed, new Promise<never>((_r, reject) => control.signal.addEventListener('abort', () => reject(new Error('aborted')), { once: true }))]),
          d.captureMs, () => fail(`timeout: the capture was not sealed within ${d.captureMs} ms`, 'capture'))
      } catch (e) {
        if (e instanceof BridgeFailure) throw e
        throw fail(watchReason ?? 'the capture was abandoned', 'capture')
      }
      dir = captureDir(config.capture.dir as string, requestId)
    }
    watch.stop()
    timings.capture = round(performance.now() - t)

    // 3. blocks: one per boundary, released before the next; deadline checked between blocks.
    t = performance.now()
    let writer: CaptureWriter
    try {
      writer = await setup.target.openWriter(dir, { sidecar: setup.sidecar, requestId, tokens: captureTokens })
    } catch (e) {
      const m = e instanceof Error ? e.message : String(e)
      throw fail(e instanceof CaptureManifestError ? `capture manifest mismatch: ${m}` : errorCode(e) === PD_ERR.CAPTURE_INTEGRITY ? `capture checksum mismatch: ${m}` : `capture rejected by the block writer: ${m}`, 'write')
    }
    let report: BlockWriterReport
    try {
      const writeEnd = performance.now() + d.writeMs
      while (await writer.writeNext() !== null) {
        if (performance.now() > writeEnd) throw fail(`timeout: the blocks were not written within ${d.writeMs} ms`, 'write')
        if (control.signal.aborted) throw fail(watchReason ?? 'the bridge was abandoned', 'write')
      }
      report = await writer.finalize()
    } catch (e) {
      await writer.close()
      if (e instanceof BridgeFailure) throw e
      throw fail(`block write failed: ${e instanceof Error ? e.message : String(e)}`, 'write')
    }
    timings.block_stage = round(performance.now() - t)
    if (report.blocks === 0) throw fail(`the capture was sealed at ${report.sealedLength} of ${captureTokens.length} tokens (memory budget), less than one block`, 'write')

    // 4. make the decoder see them; a decoder without a rescan still finds them on its next miss.
    t = performance.now()
    let rescan: BridgeOutcome['rescan']
    try {
      const a = await callJson('decoder', joinUrl(config.decoder.url, '/v1/cache/rescan'), { method: 'POST', timeoutMs: d.rescanMs, headers: auth })
      rescan = a.status === 200 ? { ok: true, report: (a.body as { report?: unknown }).report } : { ok: false, error: `rescan answered ${a.status}: ${errorMessageOf(a.body)}` }
    } catch (e) {
      rescan = { ok: false, error: e instanceof Error ? e.message : String(e) }
    }
    timings.rescan = round(performance.now() - t)

    // 5. retention: every block is written and verified (finalize re-read them), so the capture
    // has served its purpose; the engine deletes it unless capture.retain keeps it.
    t = performance.now()
    const retention = await retireCapture({ prefillUrl, requestId, state: report.state, retain: config.capture.retain, timeoutMs: d.deleteMs, headers: auth })
    timings.capture_delete = round(performance.now() - t)

    const manifest = writer.manifest
    Object.assign(timings, engineTimings(manifest.timings, watch.last))
    if (spooled !== undefined) {
      timings.transfer = round(spooled.stream.timings.downloadMs ?? 0)
      if (spooled.stream.timings.firstLayerMs !== undefined) timings.first_layer = round(spooled.stream.timings.firstLayerMs)
      bytes.fetched = spooled.stream.fetchedBytes
    }
    timings.assembly = round((report.timings.read ?? 0) + (report.timings.build ?? 0))
    timings.block_write = round((report.timings.write ?? 0) + (report.timings.verify ?? 0))
    timings.bridge_total = round(performance.now() - t0)
    bytes.capture = manifest.payloadBytes
    bytes.blocks = report.bytes
    return {
      requestId,
      state: report.state,
      bridgedTokens: report.blocks * bs,
      captureTokens: captureTokens.length,
      sealedLength: report.sealedLength,
      tokensSha256,
      report,
      rescan,
      retention,
      timings,
      bytes,
    }
  } finally {
    clearTimeout(bridgeTimer)
    watch?.stop()
    // The spool is ours, removed whatever the outcome; the capture on the prefill side is the
    // engine's, deleted (above) only through its API and only once its blocks were verified.
    if (spoolDir !== undefined) await rm(spoolDir, { recursive: true, force: true })
  }
}

/** The engine's own timings: from the sealed manifest, else its last status answer. */
function engineTimings (manifestTimings: Record<string, number>, last: EngineStatus | undefined): Record<string, number> {
  const out: Record<string, number> = {}
  const prefill = manifestTimings.prefill ?? last?.timings?.prefill
  const queue = manifestTimings.queue ?? last?.timings?.queue
  if (prefill !== undefined) out.engine_prefill = round(prefill)
  if (queue !== undefined) out.engine_queue = round(queue)
  return out
}
