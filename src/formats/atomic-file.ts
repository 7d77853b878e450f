// Files that appear under their final name only when complete: write a temporary sibling, fsync,
// rename, fsync the directory. A reader (or a directory scan for `*.safetensors`) never sees a
// half-written file. The project's one async atomic write (the capture's layer files have a
// synchronous one of their own in src/wire/layer-file.ts, with its own error messages).
import { open, rename, rm, type FileHandle } from 'node:fs/promises'
import { dirname } from 'node:path'
import { randomBytes } from 'node:crypto'

/** A file being written under a temporary name next to its final path. */
export class AtomicFile {
  private constructor (readonly finalPath: string, readonly tempPath: string, readonly handle: FileHandle) {}

  /**
   * Create the temporary sibling `<final>.partial-<pid>-<random>`: same directory (so the rename is
   * atomic), and a name that does not end in `.safetensors`.
   */
  static async create (finalPath: string): Promise<AtomicFile> {
    const tempPath = `${finalPath}.partial-${process.pid}-${randomBytes(6).toString('hex')}`
    const handle = await open(tempPath, 'wx')
    return new AtomicFile(finalPath, tempPath, handle)
  }

  /** Flush to disk, close, and move into place; then flush the directory entry (best effort). */
  async commit (): Promise<void> {
    await this.handle.sync()
    await this.handle.close()
    await rename(this.tempPath, this.finalPath)
    await syncDirectory(dirname(this.finalPath))
  }

  /** Close and delete the temporary file; the final path is left as it was. */
  async discard (): Promise<void> {
    await this.handle.close().catch(() => undefined)
    await rm(this.tempPath, { force: true })
  }
}

/** fsync a directory so a create or rename in it survives a crash; some filesystems refuse, which is not fatal. */
export async function syncDirectory (dir: string): Promise<void> {
  let fh: FileHandle | undefined
  try {
    fh = await open(dir, 'r')
    await fh.sync()
  } catch {
    // Not every platform lets a directory be opened or synced; the rename itself already happened.
  } finally {
    await fh?.close().catch(() => undefined)
  }
}

/** Write `data` to `path` so that it appears complete or not at all. */
export async function writeFileAtomic (path: string, data: Uint8Array | string): Promise<void> {
  const file = await AtomicFile.create(path)
  try {
    await file.handle.writeFile(data)
  }
  catch (e) {
    await file.discard()
    throw e
  }
  await file.commit()
}
