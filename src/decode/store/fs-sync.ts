// fsync of a directory, so a create or rename in it survives a crash.
import { open, type FileHandle } from 'node:fs/promises'

/** fsync `dir`; filesystems that refuse to sync a directory are not an error (the entry exists either way). */
export async function syncDirectory (dir: string): Promise<void> {
  let fh: FileHandle | undefined
  try {
    fh = await open(dir, 'r')
    await fh.sync()
  } catch {
    // Some platforms cannot open or sync a directory; nothing more can be done there.
  } finally {
    await fh?.close().catch(() => undefined)
  }
}
