// A running capture's block segments brought from the share into the bridge's spool directory, in
// the capture's own layout (manifest.json, segments.json, segment-XXXXXX.safetensors), so the
// segment writer reads the spool exactly as it reads a local mount. Each step fetches the manifest
// first and the segment index after it: the engine lists every segment before it seals, so an index
// fetched after a sealed manifest is complete. A segment is written into the spool only after its
// size and SHA-256 matched the index; the local index lists only segments that landed. The manifest
// and the index are asked for conditionally (If-None-Match on the share's ETag): a step that finds
// nothing new costs two 304s. Between steps, `waitForChange` asks the share to hold its 304 until
// the capture changes (`Prefer: wait`, src/share/wait.ts), so the loop looks again when there is
// something to see rather than on a timer (docs/front-door.md).
import { mkdir } from 'node:fs/promises'
import { join } from 'node:path'
import { request } from 'undici'
import { CaptureIntegrityError, PD_ERR, PdBridgeError } from '../../errors.ts'
import { writeFileAtomicSync } from '../../wire/layer-file.ts'
import { MANIFEST_FILE, parseManifest, sha256Hex, writeManifestAtomic, type CaptureManifest } from '../../wire/manifest.ts'
import { encodeSegmentIndex, parseSegmentIndex, SEGMENT_INDEX_FILE, type SegmentEntry } from '../../wire/segment-file.ts'

/** Where a mirror reads from and writes to. */
export interface SegmentMirrorOptions {
  baseUrl: string
  requestId: string
  /** The spool directory of this request (created here). */
  dir: string
  headers: Record<string, string>
  signal: AbortSignal
  /** Each GET must answer within this. */
  timeoutMs: number
}

/** Mirrors one capture's manifest and segments from the share, a step at a time. */
export class SegmentMirror {
  private readonly landed: SegmentEntry[] = []
  private created = false
  // The last 200 of each polled file and its ETag: a 304 answers with these bytes.
  private readonly known = new Map<string, { etag: string, bytes: Uint8Array }>()
  private manifestBytes: Uint8Array | undefined
  fetchedBytes = 0
  /** performance.now() when the last step's manifest answer arrived (when a seal was first seen). */
  manifestAt = 0

  constructor (private readonly o: SegmentMirrorOptions) {}

  // GET one file of the capture: its bytes, or null on a 404 (not there yet). A polled file is asked
  // for with If-None-Match; its 304 means the bytes of the last 200.
  private async get (file: string, polled = false): Promise<Uint8Array | null> {
    const last = polled ? this.known.get(file) : undefined
    let res
    try {
      res = await request(this.fileUrl(file), { headers: last === undefined ? this.o.headers : { ...this.o.headers, 'if-none-match': last.etag }, signal: this.deadline() })
    } catch (e) {
      throw new PdBridgeError(`share: GET ${file}: ${(e as Error).message}`, { code: this.o.signal.aborted ? PD_ERR.SHARE_ABORTED : PD_ERR.SHARE_HTTP })
    }
    const bytes = new Uint8Array(await res.body.arrayBuffer())
    if (res.statusCode === 304 && last !== undefined) return last.bytes
    if (res.statusCode === 404) return null
    if (res.statusCode !== 200) throw new PdBridgeError(`share: GET ${file} answered ${res.statusCode}`, { code: PD_ERR.SHARE_HTTP })
    if (polled) this.remember(file, res.headers.etag, bytes)
    else this.fetchedBytes += bytes.length
    return bytes
  }

  private fileUrl (file: string): string {
    return `${this.o.baseUrl.replace(/\/+$/, '')}/captures/${encodeURIComponent(this.o.requestId)}/${file}`
  }

  private deadline (): AbortSignal {
    return AbortSignal.any([AbortSignal.timeout(this.o.timeoutMs), this.o.signal])
  }

  // A 200 of a polled file: counted, and kept with its ETag so the next 304 answers with these bytes.
  private remember (file: string, etag: string | string[] | undefined, bytes: Uint8Array): void {
    this.fetchedBytes += bytes.length
    if (typeof etag === 'string') this.known.set(file, { etag, bytes })
  }

  /**
   * Wait on the share until the capture changes: the manifest asked for with If-None-Match and
   * `Prefer: wait=<seconds>`. True when something changed or the share waited; false when it answered
   * at once unchanged (a share that does not wait, too many waiting, no manifest yet to compare)
   * or the wait failed: the caller then sleeps a short poll, and its next step finds any failure.
   */
  async waitForChange (seconds: number): Promise<boolean> {
    const last = this.known.get(MANIFEST_FILE)
    if (last === undefined) return false
    try {
      const res = await request(this.fileUrl(MANIFEST_FILE), {
        headers: { ...this.o.headers, 'if-none-match': last.etag, prefer: `wait=${seconds}` },
        signal: this.deadline(),
      })
      const bytes = new Uint8Array(await res.body.arrayBuffer())
      if (res.statusCode === 200) {
        // The next step's conditional GET then answers 304 with these bytes.
        this.remember(MANIFEST_FILE, res.headers.etag, bytes)
        return true
      }
      return res.statusCode === 304 && res.headers['preference-applied'] !== undefined
    } catch {
      return false
    }
  }

  /** One step: the manifest (null before the engine wrote one), then every new segment. */
  async step (): Promise<CaptureManifest | null> {
    if (!this.created) {
      await mkdir(this.o.dir, { recursive: true })
      this.created = true
    }
    const raw = await this.get(MANIFEST_FILE, true)
    this.manifestAt = performance.now()
    if (raw === null) return null
    const manifest = parseManifest(new TextDecoder().decode(raw), `share:${this.o.requestId}/${MANIFEST_FILE}`)
    const indexBytes = await this.get(SEGMENT_INDEX_FILE, true)
    if (indexBytes !== null) {
      const source = `share:${this.o.requestId}/${SEGMENT_INDEX_FILE}`
      const index = parseSegmentIndex(new TextDecoder().decode(indexBytes), source)
      const fresh = index.segments.slice(this.landed.length)
      for (const entry of fresh) {
        const bytes = await this.get(entry.file)
        if (bytes === null) throw new PdBridgeError(`share: ${entry.file} is listed in ${SEGMENT_INDEX_FILE} but not served`, { code: PD_ERR.SHARE_HTTP })
        if (bytes.length !== entry.bytes) throw new CaptureIntegrityError(`share:${entry.file}`, `${bytes.length} bytes, ${SEGMENT_INDEX_FILE} lists ${entry.bytes}`)
        const sha = sha256Hex(bytes)
        if (sha !== entry.sha256) throw new CaptureIntegrityError(`share:${entry.file}`, `SHA-256 ${sha} does not match ${SEGMENT_INDEX_FILE}'s ${entry.sha256}`)
        writeFileAtomicSync(join(this.o.dir, entry.file), bytes)
        this.landed.push(entry)
      }
      if (fresh.length > 0) writeFileAtomicSync(join(this.o.dir, SEGMENT_INDEX_FILE), encodeSegmentIndex({ ...index, segments: this.landed }))
    }
    // Rewritten only when it changed: a 304 leaves the spool's copy as it is.
    if (raw !== this.manifestBytes) await writeManifestAtomic(this.o.dir, manifest)
    this.manifestBytes = raw
    return manifest
  }
}
