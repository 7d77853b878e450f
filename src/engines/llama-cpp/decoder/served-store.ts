// The state store as the decoder serves it: refusals logged, write-backs that never fail a request
// (counted, the last failure kept for /health), and what /health and POST /v1/cache/rescan show.
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import type { Logger } from 'pino'
import type { WriteFailure } from '../../../decode/prefix-cache/index.ts'
import type { ServedCacheInfo, StoreHealth } from '../../decoder/server.ts'
import { STORE_PROBE_EVERY_MS, StoreProbe } from '../../decoder/store-probe.ts'
import type { LlamaCppSession } from '../runner.ts'
import type { LlamaCppStateGeometry } from '../state/geometry.ts'
import { LlamaCppStateStore } from '../store/state-store.ts'
import { blockAuthDescription, type BlockKey } from '../../../config/block-key.ts'

export interface ServedStateStoreOptions {
  dir: string
  modelName: string
  blockSize: number
  geometry: LlamaCppStateGeometry
  logger: Logger
  storeProbeMs?: number
  /** The deployment's block key: states are authenticated (state-auth.ts); absent: not. */
  blockKey?: BlockKey
}

/** What saving one boundary did. */
export type SaveResult = 'written' | 'reused' | 'failed'

export class ServedStateStore implements ServedCacheInfo {
  readonly store: LlamaCppStateStore
  private readonly probe: StoreProbe
  /** saveState's own temporary files: outside the store, so a rescan never sees half a state. */
  private readonly scratch = mkdtempSync(join(tmpdir(), 'pd-bridge-llstate-'))
  writeFailures = 0
  lastWriteFailure: WriteFailure | null = null
  /** The last write-back failed and none succeeded since. */
  writesFailing = false
  restoreRejected = 0

  constructor (private readonly opts: ServedStateStoreOptions) {
    this.store = LlamaCppStateStore.open({
      dir: opts.dir, modelName: opts.modelName, blockSize: opts.blockSize, geometry: opts.geometry, authKey: opts.blockKey?.key,
      onRefused: (file, why) => opts.logger.warn({ event: 'cache.refused', file, reason: why }, `prefix cache: refused ${file}: ${why}`),
    })
    this.probe = new StoreProbe(opts.dir, opts.storeProbeMs ?? STORE_PROBE_EVERY_MS)
  }

  get dir (): string { return this.opts.dir }
  get blockSize (): number { return this.opts.blockSize }

  /** A restore llama.cpp (or the guard at load time) refused after the lookup had passed it. */
  restoreFailed (file: string, why: string): void {
    this.restoreRejected++
    this.opts.logger.warn({ event: 'cache.restore-rejected', file, reason: why }, `prefix cache: restore of ${file} refused: ${why}`)
  }

  /**
   * The state at `path` (the boundary after `prefix`) read once, verified (keyed digest, geometry,
   * tokens) and copied into this process's private scratch directory: llama.cpp then reads exactly
   * the bytes verified, not a file someone with write access to the store could change meanwhile.
   * Throws what the verification throws. The caller removes the copy.
   */
  verifiedCopy (path: string, prefix: readonly number[]): string {
    const bytes = new Uint8Array(readFileSync(path))
    this.store.verify(bytes, prefix, path)
    const copy = join(this.scratch, `restore-${prefix.length}.llstate`)
    writeFileSync(copy, bytes)
    return copy
  }

  /** Save the session's state as the boundary after `prefix`, unless stored; never throws. */
  async save (session: LlamaCppSession, prefix: number[]): Promise<SaveResult> {
    if (this.store.has(prefix)) return 'reused'
    const tmp = join(this.scratch, `boundary-${prefix.length}.llstate`)
    try {
      await session.saveState(tmp)
      const { path, bytes } = this.store.put(prefix, new Uint8Array(readFileSync(tmp)))
      this.writesFailing = false
      this.probe.invalidateIfFailing()
      this.opts.logger.info({ event: 'cache.written', file: path, bytes, tokens: prefix.length }, 'prefix cache: written')
      return 'written'
    } catch (e) {
      const err = e as NodeJS.ErrnoException
      this.writeFailures++
      this.writesFailing = true
      this.lastWriteFailure = { at: new Date().toISOString(), block: prefix.length / this.blockSize - 1, hash: this.store.keysOf(prefix).at(-1) ?? '', code: typeof err.code === 'string' ? err.code : null, detail: err.message ?? String(e) }
      this.probe.invalidate()
      this.opts.logger.warn({ event: 'cache.write-failed', detail: this.lastWriteFailure }, 'prefix cache: write-failed')
      return 'failed'
    } finally {
      rmSync(tmp, { force: true })
    }
  }

  describe (): Record<string, unknown> {
    return {
      files: this.store.size, bytes: this.store.totalBytes,
      write_failures: this.writeFailures, last_write_failure: this.lastWriteFailure,
      restore_rejected: this.restoreRejected,
      stats: { ...this.store.stats },
      // Whether states are authenticated or only checked (the key's id, never the key: doctor compares it).
      authentication: blockAuthDescription(this.opts.blockKey),
    }
  }

  async storeHealth (): Promise<StoreHealth> {
    const c = await this.probe.check()
    return {
      dir: this.opts.dir, writable: c.writable, code: c.code, error: c.error, checked_at: c.checkedAt, probe_every_ms: this.probe.everyMs,
      writes_failing: this.writesFailing, write_failures: this.writeFailures, last_write_failure: this.lastWriteFailure,
    }
  }

  async rescan (): Promise<Record<string, unknown>> {
    return { ...this.store.rescan() }
  }

  close (): void {
    rmSync(this.scratch, { recursive: true, force: true })
  }
}
