// Whole-buffer reads and writes at file positions. One read(2)/write(2) moves at most ~2 GiB on
// Linux, and FileHandle.read may return short counts, so both loop in bounded chunks.
import type { FileHandle } from 'node:fs/promises'

/** Largest chunk per system call: well under the ~2 GiB a single Linux read or write moves. */
const CHUNK = 1 << 30

/**
 * Fill `target` with the file's bytes starting at `position`. Returns the number of bytes read,
 * which is less than `target.length` only when the file ends first.
 */
export async function readAt (fh: FileHandle, target: Uint8Array, position: number): Promise<number> {
  let done = 0
  while (done < target.length) {
    const length = Math.min(CHUNK, target.length - done)
    const { bytesRead } = await fh.read(target, done, length, position + done)
    if (bytesRead === 0) break
    done += bytesRead
  }
  return done
}

/** Write all of `source` at `position`. */
export async function writeAt (fh: FileHandle, source: Uint8Array, position: number): Promise<void> {
  let done = 0
  while (done < source.length) {
    const length = Math.min(CHUNK, source.length - done)
    const { bytesWritten } = await fh.write(source, done, length, position + done)
    done += bytesWritten
  }
}
