// A store's identity without its path: what a decoder's /health says about which directory it serves
// from when it may not name the path (callers without the key see `<cacheDir>`), so doctor, on the
// same machine, can still tell whether the config writes where the decoder reads.
import { createHash } from 'node:crypto'
import { realpathSync } from 'node:fs'
import { resolve } from 'node:path'

/** 16 hex digits of SHA-256 of the directory's real path (its resolved path while it does not exist). */
export function storeIdentity (dir: string): string {
  let path = resolve(dir)
  try {
    path = realpathSync(path)
  } catch { /* not there yet: the resolved path is what it will be */ }
  return createHash('sha256').update(`pd-bridge-store/1\n${path}`).digest('hex').slice(0, 16)
}
