// Can the block store be written? A real small write (create, write, fsync, remove) of a probe file
// in the store root, at most once per interval and cached in between, so /health stays cheap. A
// full disk (ENOSPC), a read-only one (EROFS), a permission (EACCES) or a file-size limit (EFBIG)
// all fail it; access() would pass most of them.
import { randomBytes } from 'node:crypto'
import { open, rm } from 'node:fs/promises'
import { join } from 'node:path'

/** How often the probe may really write, by default (ms). */
export const STORE_PROBE_EVERY_MS = 10_000

/**
 * Bytes the probe writes: two pages, more than any file system keeps inline in its metadata
 * (btrfs inlines up to 2 KiB, ext4's inline_data about 60 bytes), so a full data area fails it.
 */
export const STORE_PROBE_BYTES = 8192

/** The probe file's name: a leading dot and no hex shard directory, so the block scan never matches it. */
export function probeFileName (): string {
  return `.pd-store-probe-${process.pid}-${randomBytes(4).toString('hex')}`
}

/** One probe's outcome. */
export interface StoreWriteCheck {
  writable: boolean
  /** errno code of the failure (ENOSPC, EROFS, EACCES, EFBIG, ENOTDIR, EIO...), null when writable or unknown. */
  code: string | null
  /** The failure as a sentence, null when writable. */
  error: string | null
  /** ISO time the probe ran. */
  checkedAt: string
  /** How long the probe took. */
  ms: number
}

/** Write `bytes` bytes into a fresh probe file in `dir`, fsync it, remove it. Never throws. */
export async function probeStoreWrite (dir: string, bytes = STORE_PROBE_BYTES): Promise<StoreWriteCheck> {
  const started = performance.now()
  const checkedAt = new Date().toISOString()
  const path = join(dir, probeFileName())
  let created = false
  try {
    const fh = await open(path, 'wx')
    created = true
    try {
      await fh.writeFile(Buffer.alloc(bytes, 0x70))
      await fh.sync()
    } finally {
      await fh.close()
    }
    await rm(path)
    return { writable: true, code: null, error: null, checkedAt, ms: performance.now() - started }
  } catch (err) {
    if (created) await rm(path, { force: true }).catch(() => {})
    const code = (err as NodeJS.ErrnoException).code ?? null
    return { writable: false, code, error: `cannot write a ${bytes}-byte probe file in ${dir}: ${(err as Error).message}`, checkedAt, ms: performance.now() - started }
  }
}

/** The probe with its cache: `check()` writes at most once per `everyMs`; concurrent callers share one probe. */
export class StoreProbe {
  private last: { at: number, result: StoreWriteCheck } | undefined
  private running: Promise<StoreWriteCheck> | undefined

  constructor (readonly dir: string, readonly everyMs = STORE_PROBE_EVERY_MS, private readonly bytes = STORE_PROBE_BYTES) {}

  /** The cached result when fresh, else a new probe. */
  async check (): Promise<StoreWriteCheck> {
    if (this.last !== undefined && Date.now() - this.last.at < this.everyMs) return this.last.result
    if (this.running !== undefined) return await this.running
    this.running = probeStoreWrite(this.dir, this.bytes).then((result) => {
      this.last = { at: Date.now(), result }
      this.running = undefined
      return result
    })
    return await this.running
  }

  /** Forget the cached result (a block write just failed): the next check writes again. */
  invalidate (): void {
    this.last = undefined
  }

  /** Forget the cached result only when it said unwritable (a block was just written after all). */
  invalidateIfFailing (): void {
    if (this.last !== undefined && !this.last.result.writable) this.last = undefined
  }
}
