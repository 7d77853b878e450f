// Open a file for serving only if its real path, after every symlink, is inside the share root.
import { constants } from 'node:fs'
import { open, realpath, type FileHandle } from 'node:fs/promises'
import type { BigIntStats } from 'node:fs'
import { join, sep } from 'node:path'

/** An open regular file inside the root, or why not. */
export type OpenResult =
  | { kind: 'file', handle: FileHandle, stat: BigIntStats }
  | { kind: 'refused', status: 403 | 404, reason: string }

/**
 * Resolve `<realRoot>/<requestId>/<file>` through every symlink (in any component) and refuse with
 * 403 if the result leaves the root; missing -> 404; not a regular file -> 404. The resolved path is
 * opened with O_NOFOLLOW (a link swapped in after the check is refused, not followed) and O_NONBLOCK
 * (a FIFO planted under a layer name cannot hang the server). `realRoot` must itself be a realpath.
 */
export async function openInsideRoot (realRoot: string, requestId: string, file: string): Promise<OpenResult> {
  let real: string
  try {
    real = await realpath(join(realRoot, requestId, file))
  }
  catch (e) {
    const code = (e as NodeJS.ErrnoException).code
    if (code === 'ENOENT' || code === 'ENOTDIR') return { kind: 'refused', status: 404, reason: 'no such capture file' }
    if (code === 'ELOOP') return { kind: 'refused', status: 403, reason: 'symlink loop' }
    if (code === 'EACCES') return { kind: 'refused', status: 403, reason: 'permission denied' }
    throw e
  }
  const inside = realRoot.endsWith(sep) ? realRoot : realRoot + sep
  if (!real.startsWith(inside)) return { kind: 'refused', status: 403, reason: 'resolves outside the share root (a symlink leads out)' }
  let handle: FileHandle
  try {
    handle = await open(real, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK)
  }
  catch (e) {
    const code = (e as NodeJS.ErrnoException).code
    if (code === 'ENOENT') return { kind: 'refused', status: 404, reason: 'no such capture file' }
    if (code === 'ELOOP') return { kind: 'refused', status: 403, reason: 'became a symlink while being opened' }
    if (code === 'EACCES') return { kind: 'refused', status: 403, reason: 'permission denied' }
    throw e
  }
  const stat = await handle.stat({ bigint: true })
  if (!stat.isFile()) {
    await handle.close()
    return { kind: 'refused', status: 404, reason: 'not a regular file' }
  }
  return { kind: 'file', handle, stat }
}
