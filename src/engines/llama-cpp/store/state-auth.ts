// The keyed digest of a llama.cpp state file, for a store with a block key (src/config/block-key.ts).
// A state file is llama.cpp's own format, which has no room for metadata and is read by llama.cpp
// byte for byte, so the digest lives beside it: `<key>.llstate.hmac`, one line of 64 hex digits,
// HMAC-SHA-256 under the block key over the tag `pd-bridge-llstate/1\n`, the file's chain key and
// `\n`, then every byte of the state. The chain key is in it so a state cannot be moved to another
// key's name with its digest; the state's own token check would catch most such moves anyway.
import { createHmac, type KeyObject } from 'node:crypto'
import { readFileSync, renameSync, rmSync, statSync, writeFileSync } from 'node:fs'
import { macMatches } from '../../../decode/store/content-digest.ts'
import { LlamaCppStateError } from '../state/errors.ts'

/** Appended to a state file's name for its keyed digest. */
export const MAC_SUFFIX = '.hmac'

const TAG = 'pd-bridge-llstate/1\n'

/** Lowercase hex HMAC-SHA-256 of the state `bytes` stored under chain key `key`. */
export function stateMac (authKey: KeyObject, key: string, bytes: Uint8Array): string {
  return createHmac('sha256', authKey).update(TAG).update(`${key}\n`).update(bytes).digest('hex')
}

/** Where the keyed digest of the state file at `path` lives. */
export function macPath (path: string): string {
  return path + MAC_SUFFIX
}

/** Write the keyed digest of a state file beside it, atomically (a temporary name, then a rename). */
export function writeStateMac (path: string, mac: string): void {
  const tmp = `${macPath(path)}.tmp-${process.pid}`
  try {
    writeFileSync(tmp, mac + '\n', { flush: true })
    renameSync(tmp, macPath(path))
  } catch (e) {
    rmSync(tmp, { force: true })
    throw e
  }
}

/**
 * Throw unless the keyed digest beside `path` is the HMAC of `bytes` under `authKey` (compared in
 * constant time). A state without one was written without the block key; one with a wrong one was
 * changed by someone without the key, or written under another key. Either is never given to llama.cpp.
 */
export function authenticateState (authKey: KeyObject, key: string, bytes: Uint8Array, path: string): void {
  let stored: string
  try {
    // One line of 64 hex digits; anything much larger is not one, and is not read into memory.
    const size = statSync(macPath(path)).size
    if (size > 256) throw new LlamaCppStateError('authentication', `its keyed digest file is ${size} bytes, not one line of 64 hex digits`, path)
    stored = readFileSync(macPath(path), 'utf8').trim()
  } catch (e) {
    if (e instanceof LlamaCppStateError) throw e
    if ((e as NodeJS.ErrnoException).code !== 'ENOENT') throw e
    throw new LlamaCppStateError('authentication', `no keyed digest (${MAC_SUFFIX} beside it: written without the block key), so nothing vouches that a holder of the key wrote it`, path)
  }
  if (!macMatches(stored, stateMac(authKey, key, bytes))) {
    throw new LlamaCppStateError('authentication', `its keyed digest is not the state's HMAC under this deployment's block key: changed by someone without the key, or written under another key`, path)
  }
}
