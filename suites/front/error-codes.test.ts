// The front door classifies failures by their PD_ERR code, never by message text: every code is
// distinct, every error class the front door tells apart carries its code from where it is thrown,
// and each classification path (link failures, the capture stream, the writer's open and writes,
// the bridge's own deadlines, the queue) gives the reason, verdict and status it always gave.
import { describe, expect, it } from 'vitest'
import { CaptureManifestError } from '../../src/wire/manifest.ts'
import type { FrontConfig } from '../../src/config/index.ts'
import type { BlockWriterReport } from '../../src/decode/writer/index.ts'
import { CaptureIntegrityError, errorCode, PD_ERR, PdBridgeError } from '../../src/errors.ts'
import type { FrontState } from '../../src/front/door-state.ts'
import { FrontApiError, BridgeFailure, QueueFull, QueueLeft, LinkError, describeFailure } from '../../src/front/index.ts'
import { isNoAnswer, linkFailure } from '../../src/front/http.ts'
import { notBridged } from '../../src/front/plan.ts'
import { captureCause, openCause, writeCause } from '../../src/front/stages/failure.ts'
import { BridgeRun } from '../../src/front/stages/run.ts'
import { shortCapture } from '../../src/front/stages/write.ts'
import { CaptureFailedError, ChecksumError, ShareAbortedError, ShareDeadlineError, ShareHttpError, ShareStallError } from '../../src/share/index.ts'

describe('PD_ERR', () => {
  it('every code is distinct and spells its own name', () => {
    const entries = Object.entries(PD_ERR)
    expect(new Set(entries.map(([, v]) => v)).size).toBe(entries.length)
    for (const [k, v] of entries) expect(v).toBe(`PD_ERR_${k}`)
  })

  it('each error class carries its code from where it is thrown', () => {
    expect(errorCode(new CaptureIntegrityError('f', 'p'))).toBe(PD_ERR.CAPTURE_INTEGRITY)
    expect(errorCode(new ChecksumError('f', 'p'))).toBe(PD_ERR.CAPTURE_INTEGRITY)
    expect(errorCode(new CaptureManifestError('state', 'is running'))).toBe(PD_ERR.CAPTURE_MANIFEST)
    expect(errorCode(new CaptureFailedError('r', 'oom'))).toBe(PD_ERR.CAPTURE_FAILED)
    expect(errorCode(new ShareHttpError('u', 503, 'p'))).toBe(PD_ERR.SHARE_HTTP)
    expect(errorCode(new ShareDeadlineError('r', 10, 'p'))).toBe(PD_ERR.SHARE_DEADLINE)
    expect(errorCode(new ShareStallError('r', 10, 'p'))).toBe(PD_ERR.SHARE_STALL)
    expect(errorCode(new ShareAbortedError('r', 'p'))).toBe(PD_ERR.SHARE_ABORTED)
    expect(errorCode(new QueueFull(2))).toBe(PD_ERR.QUEUE_FULL)
    expect(errorCode(new QueueLeft('deadline', 5))).toBe(PD_ERR.QUEUE_LEFT)
    expect(errorCode(new LinkError('decoder', 'u', 'p'))).toBe(PD_ERR.LINK_FAILED)
    expect(errorCode(new PdBridgeError('no code'))).toBeUndefined()
    expect(errorCode(new Error('not ours'))).toBeUndefined()
  })
})

describe('link failures', () => {
  it('words and codes; only a deadline is a no-answer', () => {
    expect(linkFailure({ code: 'ECONNREFUSED' }, 5)).toEqual({ problem: 'connection refused (is it running?)', code: PD_ERR.LINK_FAILED })
    expect(linkFailure({ cause: { code: 'UND_ERR_SOCKET' } }, 5)).toEqual({ problem: 'the connection was reset', code: PD_ERR.LINK_FAILED })
    expect(linkFailure({ code: 'EAI_AGAIN' }, 5)).toEqual({ problem: 'the host name does not resolve', code: PD_ERR.LINK_FAILED })
    expect(linkFailure({ code: 'UND_ERR_HEADERS_TIMEOUT' }, 5)).toEqual({ problem: 'no answer within 5 ms', code: PD_ERR.LINK_NO_ANSWER })
    expect(linkFailure({ name: 'TimeoutError' }, 7)).toEqual({ problem: 'no answer within 7 ms', code: PD_ERR.LINK_NO_ANSWER })
    expect(linkFailure({ name: 'AbortError' }, 5)).toEqual({ problem: 'aborted', code: PD_ERR.LINK_ABORTED })
    expect(linkFailure(new Error('odd: no answer within the text'), 5)).toEqual({ problem: 'odd: no answer within the text', code: PD_ERR.LINK_FAILED })
    expect(describeFailure({ name: 'TimeoutError' }, 9)).toBe('no answer within 9 ms')
    expect(isNoAnswer(new LinkError('prefill engine', 'u', 'no answer within 9 ms', undefined, PD_ERR.LINK_NO_ANSWER))).toBe(true)
    // The message alone decides nothing.
    expect(isNoAnswer(new LinkError('prefill engine', 'u', 'no answer within 9 ms'))).toBe(false)
  })
})

describe('the capture stream', () => {
  const deadline = 1000
  it('each share failure has its reason and keeps its code', () => {
    const cases: Array<[Error, string, string]> = [
      [new ChecksumError('r/layer-000.safetensors', 'bad'), 'capture checksum mismatch: r/layer-000.safetensors: bad', PD_ERR.CAPTURE_INTEGRITY],
      [new CaptureManifestError('tokenCount', 'is 5'), 'capture manifest mismatch: manifest tokenCount: is 5', PD_ERR.CAPTURE_MANIFEST],
      [new CaptureFailedError('r', 'oom'), 'prefill engine failed the capture: capture r failed on the prefill side: oom', PD_ERR.CAPTURE_FAILED],
      [new ShareStallError('r', 50, 'p'), 'share stalled: capture r: nothing from the share for 50 ms (p)', PD_ERR.SHARE_STALL],
      [new ShareDeadlineError('r', 1000, 'p'), 'timeout: the capture did not arrive within 1000 ms (capture r: deadline of 1000 ms passed (p))', PD_ERR.SHARE_DEADLINE],
      [new ShareHttpError('http://s/x', 404, 'gone'), 'share unreachable or refusing: http://s/x: HTTP 404: gone', PD_ERR.SHARE_HTTP],
      [new PdBridgeError('spool: exists'), 'capture stream failed: spool: exists', PD_ERR.CAPTURE_STREAM],
      [new Error('odd'), 'capture stream failed: odd', PD_ERR.CAPTURE_STREAM],
    ]
    for (const [e, reason, code] of cases) expect(captureCause(e, undefined, deadline)).toEqual({ reason, code })
  })

  it('why the bridge was stopped wins; an abort without one is the bridge deadline', () => {
    const watch = { reason: 'capture stalled: ...', code: PD_ERR.ENGINE_STALL }
    expect(captureCause(new ShareAbortedError('r', 'p'), watch, deadline)).toEqual(watch)
    expect(captureCause(new ShareStallError('r', 50, 'p'), watch, deadline)).toEqual(watch)
    expect(captureCause(new ShareAbortedError('r', 'p'), undefined, deadline)).toEqual({ reason: 'the bridge deadline passed while the capture streamed', code: PD_ERR.BRIDGE_DEADLINE })
  })
})

describe('the write stage', () => {
  it('the writer\'s refusals to open, its failures, and a capture below one block', () => {
    expect(openCause(new CaptureManifestError('tokensSha256', 'is missing', '/c/manifest.json'))).toEqual({ reason: 'capture manifest mismatch: /c/manifest.json: manifest tokensSha256: is missing', code: PD_ERR.CAPTURE_MANIFEST })
    expect(openCause(new CaptureIntegrityError('/c/layer-001.safetensors', '100 bytes'))).toEqual({ reason: 'capture checksum mismatch: /c/layer-001.safetensors: 100 bytes', code: PD_ERR.CAPTURE_INTEGRITY })
    expect(openCause(new PdBridgeError('/c/layer-001.safetensors: holds no boundary snapshots'))).toEqual({ reason: 'capture rejected by the block writer: /c/layer-001.safetensors: holds no boundary snapshots', code: PD_ERR.WRITER_REJECTED })
    expect(writeCause(new Error('ENOSPC'))).toEqual({ reason: 'block write failed: ENOSPC', code: PD_ERR.BLOCK_WRITE })
    expect(shortCapture({ sealedLength: 200 } as BlockWriterReport, 512)).toEqual({ reason: 'the capture was sealed at 200 of 512 tokens (memory budget), less than one block', code: PD_ERR.CAPTURE_SHORT })
  })
})

describe('a bridge run', () => {
  it('fails with the code, the timings so far and the capture only once the engine accepted it', async () => {
    const run = new BridgeRun({ deadlines: { bridgeMs: 60_000 }, capture: {} } as FrontConfig, {})
    try {
      run.timings.submit = 1.5
      const before = run.fail({ reason: 'prefill engine busy: x', code: PD_ERR.ENGINE_BUSY }, 'submit')
      expect(before).toMatchObject({ reason: 'prefill engine busy: x', stage: 'submit', pdCode: PD_ERR.ENGINE_BUSY, message: 'submit: prefill engine busy: x', requestId: undefined })
      expect(Object.keys(before.timings)).toEqual(['submit', 'bridge_total'])
      run.accept()
      expect(run.fail({ reason: 'r', code: PD_ERR.BLOCK_WRITE }, 'write').requestId).toBe(run.requestId)
      run.abandon({ reason: 'first', code: PD_ERR.ENGINE_FAILED })
      run.abandon({ reason: 'second', code: PD_ERR.BRIDGE_DEADLINE })
      expect(run.signal.aborted).toBe(true)
      expect(run.abandoned).toEqual({ reason: 'first', code: PD_ERR.ENGINE_FAILED })
    } finally {
      await run.end()
    }
  })
})

describe('a bridge that did not happen', () => {
  const quiet = { warn: () => {}, error: () => {} }
  const state = (whenFull: 'native' | 'reject', bridgeMsAverage = 0): FrontState => ({ config: { queue: { whenFull } }, logger: quiet, bridgeMsAverage }) as unknown as FrontState
  const info = (): Parameters<typeof notBridged>[2] => ({ timings_ms: {} }) as Parameters<typeof notBridged>[2]

  it('queue full: native, or a 429 with Retry-After under reject', () => {
    expect(notBridged(state('native'), new QueueFull(3), info())).toEqual({ verdict: { kind: 'declined', reason: 'bridge queue full (3 waiting behind the running bridge)' } })
    let thrown: unknown
    try {
      notBridged(state('reject', 2500), new QueueFull(3), info())
    } catch (e) {
      thrown = e
    }
    expect(thrown).toBeInstanceOf(FrontApiError)
    expect(thrown).toMatchObject({
      status: 429, type: 'rate_limit_error', code: 'bridge_queue_full', message: 'the bridge queue is full (3 waiting behind the running bridge); retry later (queue.whenFull is reject)',
      headers: { 'retry-after': '10', 'x-pd-bridge': 'declined: bridge queue full (3 waiting), request refused' },
    })
  })

  it('a waiter that left, a failed bridge (its timings kept), a crash', () => {
    expect(notBridged(state('native'), new QueueLeft('deadline', 1234.4), info())).toEqual({ verdict: { kind: 'declined', reason: 'waited 1234 ms in the bridge queue without getting a turn' } })
    const i = info()
    const failure = new BridgeFailure('share stalled: x', 'capture', PD_ERR.SHARE_STALL, { submit: 2, bridge_total: 9 }, 'pd-1')
    expect(notBridged(state('native'), failure, i)).toEqual({ verdict: { kind: 'declined', reason: 'share stalled: x' } })
    expect(i.timings_ms).toEqual({ submit: 2, bridge_total: 9 })
    expect(notBridged(state('native'), new Error('boom'), info())).toEqual({ verdict: { kind: 'declined', reason: 'bridge failed: boom' } })
  })
})
