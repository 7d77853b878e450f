// Fetch one listed layer file completely, resuming a dropped transfer from the byte reached, and
// hand back its bytes only if size and SHA-256 equal the manifest entry.
import type { CaptureLayerEntry } from '../wire/manifest.ts'
import { sha256Hex } from '../wire/manifest.ts'
import { ChecksumError, ShareHttpError } from './errors.ts'
import { backoffDelay, describeFailure, isTransientStatus, sleep, type RetryPolicy } from './backoff.ts'
import type { StallSignals } from './stall.ts'

/** Something the client did on the way that a log should show. */
export type ShareClientEvent =
  | { event: 'retry', url: string, failure: number, delayMs: number, reason: string }
  | { event: 'resume', url: string, from: number }
  | { event: 'restart', url: string, reason: string }

/** One layer download. */
export interface LayerDownload {
  /** Full URL of the layer file. */
  url: string
  /** `<requestId>/<file>`, the name errors use. */
  label: string
  /** The manifest entry the bytes must match. */
  entry: CaptureLayerEntry
  /** Aborts every request and wait. */
  signal: AbortSignal
  /** Bounds on transient failures. */
  retry: RetryPolicy
  /** Told about retries, resumes and restarts. */
  note: (event: ShareClientEvent) => void
  /** The stall deadline: told when the download waits on the share and when it sleeps. */
  stall?: StallSignals
  /** Extra headers of every request (the API key's Authorization). */
  headers?: Record<string, string>
}

/** A verified layer file. */
export interface DownloadedLayer {
  /** Exactly the file's bytes. */
  bytes: Uint8Array
  /** Body bytes received, counting any that a restart threw away. */
  fetchedBytes: number
  /** HTTP requests made. */
  requests: number
}

/**
 * Download a layer. A body cut short is resumed with `Range: bytes=<reached>-` and `If-Range:
 * <ETag>`: a 206 starting exactly there continues the buffer; a 200 means the file changed and the
 * download starts over. Transient failures are retried with `retry` (the count resets whenever
 * bytes arrive). A size or SHA-256 different from the entry throws ChecksumError; nothing unverified
 * is returned.
 */
export async function downloadLayer (d: LayerDownload): Promise<DownloadedLayer> {
  const { url, label, entry, signal } = d
  const size = entry.bytes
  const buffer = new Uint8Array(size)
  let reached = 0
  let etag: string | undefined
  let failures = 0
  let fetchedBytes = 0
  let requests = 0

  const failed = async (reason: string, status?: number): Promise<void> => {
    failures++
    if (failures >= d.retry.attempts) throw new ShareHttpError(url, status, `gave up after ${failures} failures in a row; last: ${reason}`)
    const delayMs = backoffDelay(d.retry, failures)
    d.note({ event: 'retry', url, failure: failures, delayMs, reason })
    d.stall?.idle()
    await sleep(delayMs, signal)
  }

  for (;;) {
    // Resuming needs a strong validator; without one a partial buffer cannot be trusted to continue.
    const resuming = reached > 0 && etag !== undefined
    if (!resuming) reached = 0
    const headers: Record<string, string> = { ...d.headers }
    if (resuming) {
      headers.range = `bytes=${reached}-`
      headers['if-range'] = etag as string
      d.note({ event: 'resume', url, from: reached })
    }
    let res: Response
    try {
      d.stall?.alive()
      res = await fetch(url, { headers, signal })
    }
    catch (e) {
      if (signal.aborted) throw e
      await failed(describeFailure(e))
      continue
    }
    d.stall?.alive()
    requests++

    if (res.status === 206 && resuming) {
      const range = res.headers.get('content-range')
      if (range !== `bytes ${reached}-${size - 1}/${size}`) {
        await res.body?.cancel()
        const total = /\/(\d+)$/.exec(range ?? '')?.[1]
        if (total !== undefined && Number(total) !== size) throw new ChecksumError(label, `the server has ${total} bytes, the manifest lists ${size}`)
        d.note({ event: 'restart', url, reason: `Content-Range ${range ?? '(none)'} does not continue at byte ${reached}` })
        etag = undefined
        await failed(`unexpected Content-Range ${range ?? '(none)'}`, 206)
        continue
      }
    }
    else if (res.status === 200) {
      if (resuming) d.note({ event: 'restart', url, reason: 'the file changed (If-Range did not match); starting over' })
      reached = 0
      const tag = res.headers.get('etag')
      etag = tag !== null && tag.startsWith('"') ? tag : undefined
      const length = res.headers.get('content-length')
      if (length !== null && Number(length) !== size) {
        await res.body?.cancel()
        throw new ChecksumError(label, `the server has ${length} bytes, the manifest lists ${size}`)
      }
    }
    else if (res.status === 416 || isTransientStatus(res.status)) {
      await res.body?.cancel()
      if (res.status === 416) etag = undefined
      await failed(`HTTP ${res.status}`, res.status)
      continue
    }
    else {
      const text = await res.text().catch(() => '')
      throw new ShareHttpError(url, res.status, text.trim().slice(0, 200) || 'refused')
    }

    const claimed = res.headers.get('x-content-sha256')
    if (claimed !== null && claimed !== entry.sha256) {
      await res.body?.cancel()
      throw new ChecksumError(label, `the server reports SHA-256 ${claimed}, the manifest lists ${entry.sha256}`)
    }

    const before = reached
    try {
      for await (const chunk of res.body ?? []) {
        if (reached + chunk.length > size) throw new ChecksumError(label, `the server sent more than the manifest's ${size} bytes`)
        buffer.set(chunk, reached)
        reached += chunk.length
        fetchedBytes += chunk.length
        d.stall?.alive()
      }
    }
    catch (e) {
      if (e instanceof ChecksumError || signal.aborted) throw e
      if (reached > before) failures = 0
      await failed(`connection dropped at byte ${reached} of ${size}: ${describeFailure(e)}`)
      continue
    }
    if (reached < size) {
      if (reached > before) failures = 0
      await failed(`body ended at byte ${reached} of ${size}`)
      continue
    }
    const sha = sha256Hex(buffer)
    if (sha !== entry.sha256) throw new ChecksumError(label, `SHA-256 of the downloaded bytes is ${sha}, the manifest lists ${entry.sha256}`)
    return { bytes: buffer, fetchedBytes, requests }
  }
}
