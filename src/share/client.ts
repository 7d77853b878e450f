// The share's streaming client: poll a capture's manifest, deliver each layer as soon as it is listed
// (in index order, verified), and resolve only when a sealed manifest that matches the request has
// had every one of its layers delivered.
import { ConfigError, PdBridgeError } from '../errors.ts'
import {
  CaptureManifestError, isValidRequestId, parseManifest, sha256Hex, validateManifestForRequest, validateManifestIdentity,
  type CaptureManifest, type CaptureRequest,
} from '../wire/manifest.ts'
import { CaptureFailedError, ChecksumError, ShareAbortedError, ShareDeadlineError, ShareHttpError, ShareStallError } from './errors.ts'
import { DEFAULT_RETRY, backoffDelay, describeFailure, isTransientStatus, sleep, type RetryPolicy } from './backoff.ts'
import { downloadLayer, type ShareClientEvent } from './download.ts'
import { StallWatch, type StallSignals } from './stall.ts'

/** Options of `streamCapture`. */
export interface StreamCaptureOptions extends CaptureRequest {
  /** The share's base URL, e.g. `http://127.0.0.1:8010`. */
  baseUrl: string
  /** Receives each verified layer, in index order 0, 1, 2, ...; awaited before the next. */
  onLayer: (index: number, bytes: Uint8Array) => Promise<void> | void
  /** Wait between manifest polls while the capture runs, in ms (default 250). */
  pollMs?: number
  /** Give up (ShareDeadlineError) this many ms after the call (default 600000). */
  deadlineMs?: number
  /**
   * Give up (ShareStallError) when the share shows no life for this many ms while it is waited on:
   * no answer to a poll, no byte of a layer. A stopped share accepts connections and answers
   * nothing, which only this notices before `deadlineMs`. Default: off.
   */
  stallMs?: number
  /** Stops the stream (ShareAbortedError). */
  signal?: AbortSignal
  /** Bounds on transient failures (default DEFAULT_RETRY). */
  retry?: RetryPolicy
  /** Told about retries, resumes and restarts. */
  onEvent?: (event: ShareClientEvent) => void
  /** Extra headers of every request (the API key's Authorization). */
  headers?: Record<string, string>
}

/** How a stream ended. */
export interface StreamCaptureResult {
  /** done (T' == T) or partial (T' < T). */
  state: 'done' | 'partial'
  /** T', the valid prefix length the layers cover. */
  sealedLength: number
  /** Layers delivered (== the manifest's numLayers). */
  layers: number
  /** Layer bytes delivered. */
  bytes: number
  /** Layer bytes received over the wire, including any a restart discarded. */
  fetchedBytes: number
  /** Client-side durations in ms: totalMs, downloadMs, deliverMs, and firstLayerMs. */
  timings: Record<string, number>
  /** The validated sealed manifest (its own `timings` are the prefill side's). */
  manifest: CaptureManifest
}

/**
 * Stream a capture from a share. Every manifest seen must match the request (format, id, T,
 * fingerprint) and keep what earlier ones listed; `failed` rejects with CaptureFailedError; done
 * or partial is trusted only after `validateManifestForRequest`. Each newly listed layer is
 * downloaded once, checked against its entry (ChecksumError otherwise; never delivered) and given
 * to `onLayer` in index order. Rejects with ShareDeadlineError after `deadlineMs`, ShareAbortedError
 * when `signal` aborts, ShareHttpError on refusals or when retries run out.
 */
export async function streamCapture (options: StreamCaptureOptions): Promise<StreamCaptureResult> {
  const o = checkOptions(options)
  const control = new AbortController()
  let deadlineHit = false
  const timer = setTimeout(() => {
    deadlineHit = true
    control.abort(new Error('deadline'))
  }, o.deadlineMs)
  const stall = new StallWatch(o.stallMs, () => control.abort(new Error('stall')))
  const onAbort = (): void => control.abort(options.signal?.reason)
  options.signal?.addEventListener('abort', onAbort, { once: true })
  if (options.signal?.aborted) onAbort()
  const stream = new CaptureStream(o, control.signal, stall)
  try {
    return await stream.run()
  }
  catch (e) {
    // Typed errors (checksum, manifest, failed capture) win; an abort of ours becomes its own error.
    if (e instanceof PdBridgeError) throw e
    if (stall.fired && !deadlineHit) throw new ShareStallError(o.requestId, o.stallMs as number, stream.progress())
    if (deadlineHit) throw new ShareDeadlineError(o.requestId, o.deadlineMs, stream.progress())
    if (options.signal?.aborted) throw new ShareAbortedError(o.requestId, stream.progress())
    throw e
  }
  finally {
    clearTimeout(timer)
    stall.idle()
    options.signal?.removeEventListener('abort', onAbort)
    control.abort(new Error('stream finished'))
  }
}

type CheckedOptions = Required<Omit<StreamCaptureOptions, 'signal' | 'onEvent' | 'stallMs' | 'headers'>> & Pick<StreamCaptureOptions, 'onEvent' | 'stallMs' | 'headers'>

function checkOptions (options: StreamCaptureOptions): CheckedOptions {
  const positive = (field: string, value: number): number => {
    if (!Number.isFinite(value) || value <= 0) throw new ConfigError(field, `${value} must be a positive number`)
    return value
  }
  if (!isValidRequestId(options.requestId)) throw new ConfigError('requestId', `${JSON.stringify(options.requestId)} is not a valid capture request id`)
  if (!Number.isSafeInteger(options.tokenCount) || options.tokenCount < 1) throw new ConfigError('tokenCount', `${options.tokenCount} must be a positive integer`)
  if (typeof options.sidecarFingerprint !== 'string' || options.sidecarFingerprint === '') throw new ConfigError('sidecarFingerprint', 'must be a non-empty string')
  if (typeof options.onLayer !== 'function') throw new ConfigError('onLayer', 'must be a function')
  let base: URL
  try {
    base = new URL(options.baseUrl)
  }
  catch {
    throw new ConfigError('baseUrl', `${JSON.stringify(options.baseUrl)} is not a URL`)
  }
  if (base.protocol !== 'http:' && base.protocol !== 'https:') throw new ConfigError('baseUrl', `${options.baseUrl} must be http or https`)
  const retry = options.retry ?? DEFAULT_RETRY
  if (!Number.isInteger(retry.attempts) || retry.attempts < 1) throw new ConfigError('retry.attempts', `${retry.attempts} must be a positive integer`)
  return {
    ...options,
    baseUrl: options.baseUrl.replace(/\/+$/, ''),
    pollMs: positive('pollMs', options.pollMs ?? 250),
    deadlineMs: positive('deadlineMs', options.deadlineMs ?? 600_000),
    stallMs: options.stallMs === undefined ? undefined : positive('stallMs', options.stallMs),
    retry: { attempts: retry.attempts, baseDelayMs: Math.max(0, retry.baseDelayMs), maxDelayMs: Math.max(0, retry.maxDelayMs) },
  }
}

/** One stream's state: what was seen, what was delivered. */
class CaptureStream {
  private manifest: CaptureManifest | undefined
  private manifestEtag: string | undefined
  private pollFailures = 0
  private next = 0
  private bytes = 0
  private fetchedBytes = 0
  private downloadMs = 0
  private deliverMs = 0
  private firstLayerMs: number | undefined
  private readonly started = performance.now()
  private readonly manifestUrl: string

  constructor (private readonly o: CheckedOptions, private readonly signal: AbortSignal, private readonly stall: StallSignals) {
    this.manifestUrl = `${o.baseUrl}/captures/${o.requestId}/manifest.json`
  }

  /** Where the stream got to, for error messages. */
  progress (): string {
    const state = this.manifest === undefined ? 'no manifest seen' : `manifest ${this.manifest.state}, ${this.manifest.layers.length}/${this.manifest.numLayers} layers listed`
    return `${state}, ${this.next} delivered`
  }

  async run (): Promise<StreamCaptureResult> {
    for (;;) {
      const polled = await this.poll()
      this.stall.idle()
      if (polled !== undefined) this.accept(polled)
      const m = this.manifest
      if (m !== undefined) {
        // Ascending, duplicate-free layers: entry `next` has index `next` exactly when 0..next are all listed.
        while (this.next < m.layers.length && m.layers[this.next].index === this.next) await this.deliver(m)
        if ((m.state === 'done' || m.state === 'partial') && this.next === m.numLayers) return this.result(m, m.state)
      }
      await sleep(this.o.pollMs, this.signal)
    }
  }

  /** Check a newly fetched manifest against the request and against what came before, then adopt it. */
  private accept (m: CaptureManifest): void {
    validateManifestIdentity(m, this.o, this.manifestUrl)
    const previous = this.manifest
    if (previous !== undefined) {
      const fail = (field: string, problem: string): never => { throw new CaptureManifestError(field, problem, this.manifestUrl) }
      if (m.numLayers !== previous.numLayers) fail('numLayers', `changed from ${previous.numLayers} to ${m.numLayers} between polls`)
      if (m.profile !== previous.profile) fail('profile', `changed from ${previous.profile} to ${m.profile} between polls`)
      if (m.createdAt !== previous.createdAt) fail('createdAt', 'changed between polls (a different capture replaced this one)')
      for (const old of previous.layers) {
        const now = m.layers.find((e) => e.index === old.index)
        if (now === undefined) fail('layers', `layer ${old.index} was listed and is now gone`)
        else if (now.sha256 !== old.sha256 || now.bytes !== old.bytes) fail('layers', `layer ${old.index} changed after it was listed`)
      }
    }
    if (m.state === 'failed') throw new CaptureFailedError(this.o.requestId, m.error ?? '(no error recorded)')
    if (m.state !== 'running') validateManifestForRequest(m, this.o, this.manifestUrl)
    this.manifest = m
  }

  private async deliver (m: CaptureManifest): Promise<void> {
    const entry = m.layers[this.next]
    const t0 = performance.now()
    const got = await downloadLayer({
      url: `${this.o.baseUrl}/captures/${this.o.requestId}/${entry.file}`,
      label: `${this.o.requestId}/${entry.file}`,
      entry,
      signal: this.signal,
      retry: this.o.retry,
      note: (event) => this.o.onEvent?.(event),
      stall: this.stall,
      headers: this.o.headers,
    })
    const t1 = performance.now()
    this.downloadMs += t1 - t0
    this.fetchedBytes += got.fetchedBytes
    this.firstLayerMs ??= t1 - this.started
    // Our own write is not the share's silence.
    this.stall.idle()
    await this.o.onLayer(entry.index, got.bytes)
    this.deliverMs += performance.now() - t1
    this.bytes += entry.bytes
    this.next++
  }

  /** One manifest poll: a new manifest, or undefined when unchanged (304) or not there yet (404). */
  private async poll (): Promise<CaptureManifest | undefined> {
    for (;;) {
      const headers: Record<string, string> = { ...this.o.headers }
      if (this.manifestEtag !== undefined) headers['if-none-match'] = this.manifestEtag
      let status: number | undefined
      try {
        this.stall.alive()
        const res = await fetch(this.manifestUrl, { headers, signal: this.signal })
        this.stall.alive()
        status = res.status
        if (res.status === 304) {
          await res.body?.cancel()
          this.pollFailures = 0
          return undefined
        }
        if (res.status === 404 && this.manifest === undefined) {
          await res.body?.cancel()
          this.pollFailures = 0
          return undefined
        }
        if (res.status === 200) {
          const body = new Uint8Array(await res.arrayBuffer())
          const claimed = res.headers.get('x-content-sha256')
          if (claimed !== null && claimed !== sha256Hex(body)) throw new ChecksumError(`${this.o.requestId}/manifest.json`, `body SHA-256 differs from the server's ${claimed}`)
          const m = parseManifest(new TextDecoder().decode(body), this.manifestUrl)
          const tag = res.headers.get('etag')
          this.manifestEtag = tag !== null && tag.startsWith('"') ? tag : undefined
          this.pollFailures = 0
          return m
        }
        const text = (await res.text().catch(() => '')).trim().slice(0, 200)
        if (!isTransientStatus(res.status)) {
          throw new ShareHttpError(this.manifestUrl, res.status, res.status === 404 ? 'the manifest disappeared after it was seen' : text || 'refused')
        }
        await this.pollFailed(`HTTP ${res.status}`, res.status)
      }
      catch (e) {
        if (e instanceof PdBridgeError || this.signal.aborted) throw e
        await this.pollFailed(describeFailure(e), status)
      }
    }
  }

  private async pollFailed (reason: string, status: number | undefined): Promise<void> {
    this.pollFailures++
    if (this.pollFailures >= this.o.retry.attempts) {
      throw new ShareHttpError(this.manifestUrl, status, `gave up after ${this.pollFailures} failures in a row; last: ${reason}`)
    }
    const delayMs = backoffDelay(this.o.retry, this.pollFailures)
    this.o.onEvent?.({ event: 'retry', url: this.manifestUrl, failure: this.pollFailures, delayMs, reason })
    this.stall.idle()
    await sleep(delayMs, this.signal)
  }

  private result (m: CaptureManifest, state: 'done' | 'partial'): StreamCaptureResult {
    const timings: Record<string, number> = {
      totalMs: performance.now() - this.started,
      downloadMs: this.downloadMs,
      deliverMs: this.deliverMs,
    }
    if (this.firstLayerMs !== undefined) timings.firstLayerMs = this.firstLayerMs
    return { state, sealedLength: m.sealedLength, layers: this.next, bytes: this.bytes, fetchedBytes: this.fetchedBytes, timings, manifest: m }
  }
}
