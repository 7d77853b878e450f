// One bridge, end to end, as stages (src/front/stages/): submit the prompt's full blocks to the
// prefill engine, take the capture from its source as it is produced (the share, spooled; or a
// local mount), write one block per boundary into the decoder's store with the streaming writer,
// verify them, ask the decoder to rescan, and retire the capture. Every stage has a deadline; any
// failure is a BridgeFailure (with a PD_ERR code) whose reason becomes the `declined: <reason>`
// verdict, and the request is then served natively. Blocks are written atomically and only from a
// capture whose manifest and checksums validated, so a failed bridge leaves at most complete,
// correct blocks of a prefix, never a torn file.
import { tokenIdsSha256, type CaptureManifest } from '../wire/manifest.ts'
import type { FrontConfig } from '../config/index.ts'
import type { BlockWriterReport } from '../decode/writer/index.ts'
import { deleteFailed, type Retention } from './retention.ts'
import type { BridgeSetup } from './setup.ts'
import { dropCarry, sendCarry } from './stages/carry.ts'
import { captureSource, engineTimings, transferTimings } from './stages/capture-source.ts'
import { rescanDecoder, type RescanOutcome } from './stages/rescan.ts'
import { retainStage } from './stages/retain.ts'
import { BridgeRun } from './stages/run.ts'
import { submitPrefill } from './stages/submit.ts'
import type { BridgeTimings } from './stages/timings.ts'
import { streamsBlocks, streamWriteBlocks } from './stages/stream-write.ts'
import { shortCapture, writeBlocks, writerTimings } from './stages/write.ts'

export { BridgeFailure } from './stages/failure.ts'
export type { BridgeTimings } from './stages/timings.ts'

/** What a finished bridge did. */
export interface BridgeOutcome {
  /** The capture's request id on the prefill side. */
  requestId: string
  /** done: every usable block; partial: the memory budget sealed a shorter prefix. */
  state: 'done' | 'partial'
  /** Tokens in the blocks written (blocks * block size): past P for a warm-extended bridge. */
  bridgedTokens: number
  /** P: the stored boundary a warm-extended bridge continued from (0: from the start). */
  startToken: number
  /** Why a bridge that could have continued from stored blocks ran from token 0 instead. */
  warmDeclined?: string
  /** Tokens the prefill engine was asked for (the usable full blocks). */
  captureTokens: number
  /** T', the capture's valid prefix. */
  sealedLength: number
  /** `tokenIdsSha256` of the tokens the engine was asked for, which the capture manifest and the block writer agreed on. */
  tokensSha256: string
  report: BlockWriterReport
  /** Whether the decoder's rescan answered; the verdict does not depend on it (cached_tokens does). */
  rescan: RescanOutcome
  /** What became of the capture on the prefill side once its blocks were verified (capture.retain). */
  retention: Retention
  /** Milliseconds per stage. */
  timings: BridgeTimings
  /** Byte counts. */
  bytes: Record<string, number>
  /** With blocks written while the engine ran: how many were put before the capture was sealed. */
  stream?: { blocksBeforeSeal: number }
}

/** What to bridge. */
export interface BridgeJob {
  /** The whole prompt's token ids. */
  tokens: number[]
  /** Full blocks to bridge (the usable ones): the engine gets tokens [0, blocks * bs). */
  blocks: number
  /** Full blocks the decoder's store already holds from the start: > 0 asks for a warm-extended bridge. */
  storedBlocks?: number
}

/** Run one bridge. Throws BridgeFailure (with the timings so far) when any stage fails. */
export async function runBridge (config: FrontConfig, setup: BridgeSetup, job: BridgeJob, auth: Record<string, string> = {}): Promise<BridgeOutcome> {
  const run = new BridgeRun(config, auth)
  const { requestId, timings, bytes } = run
  const captureTokens = job.tokens.slice(0, job.blocks * setup.blockSize)
  // Travels with the request into the capture manifest; the writer keys blocks only under ids with this digest.
  const tokensSha256 = tokenIdsSha256(captureTokens)
  try {
    await run.begin()
    let carryId: string | undefined
    let startToken = 0
    let warmDeclined: string | undefined
    if ((job.storedBlocks ?? 0) > 0) {
      const carry = await sendCarry(run, setup.target, job.tokens, { fingerprint: setup.sidecar.fingerprint, profile: setup.sidecar.json.profile.name })
      timings.carry = carry.ms
      if (carry.resume) {
        carryId = carry.carryId
        startToken = carry.startToken
        bytes.carry = carry.bytes
      } else warmDeclined = carry.reason
    }
    const streamed = await streamsBlocks(run, setup.target)
    try {
      Object.assign(timings, await submitPrefill(run, captureTokens, tokensSha256, carryId, streamed))
    } catch (e) {
      // The engine holds a carry no request will use: ask it to let go (best effort).
      if (carryId !== undefined) await dropCarry(run, carryId)
      throw e
    }
    let report: BlockWriterReport
    let manifest: CaptureManifest
    let stream: BridgeOutcome['stream']
    if (streamed) {
      const s = await streamWriteBlocks(run, setup.target, { sidecar: setup.sidecar, requestId, tokens: captureTokens })
      Object.assign(timings, s.timings)
      report = s.report
      manifest = s.manifest
      stream = { blocksBeforeSeal: s.blocksBeforeSeal }
      if (s.fetchedBytes !== undefined) bytes.fetched = s.fetchedBytes
    } else {
      const { at, timings: capture } = await captureSource(run, { requestId, tokenCount: captureTokens.length, sidecarFingerprint: setup.sidecar.fingerprint })
      Object.assign(timings, capture)
      const written = await writeBlocks(run, setup.target, at, { sidecar: setup.sidecar, requestId, tokens: captureTokens })
      Object.assign(timings, written.timings, transferTimings(at))
      report = written.report
      manifest = written.writer.manifest
      if (at.spooled !== undefined) bytes.fetched = at.spooled.stream.fetchedBytes
    }
    if (report.blocks === 0) throw run.fail(shortCapture(report, captureTokens.length), 'write')
    const { rescan, timings: rescanned } = await rescanDecoder(run)
    Object.assign(timings, rescanned)
    const { retention, timings: retained } = await retainStage(run, report.state)
    if (deleteFailed(retention)) run.keepInflightMark()
    Object.assign(timings, retained)

    Object.assign(timings, engineTimings(manifest.timings, run.watch?.last))
    Object.assign(timings, writerTimings(report), { bridge_total: run.elapsed() })
    bytes.capture = manifest.payloadBytes
    bytes.blocks = report.bytes
    return {
      requestId,
      state: report.state,
      bridgedTokens: report.blocks * setup.blockSize,
      startToken,
      ...(warmDeclined === undefined ? {} : { warmDeclined }),
      captureTokens: captureTokens.length,
      sealedLength: report.sealedLength,
      tokensSha256,
      report,
      rescan,
      retention,
      timings: timings as BridgeTimings,
      bytes,
      ...(stream === undefined ? {} : { stream }),
    }
  } finally {
    await run.end()
  }
}
