// The deployment's block key: with one, every block the bridge or the decoder writes (and every
// llama.cpp state file) carries a keyed digest, HMAC-SHA-256 under this key, and a block without
// the right one is never served (docs/block-store.md, "Authentication").
//
// The key is derived, never a secret as given: HKDF-SHA-256 (RFC 5869) of PD_BLOCK_KEY when set,
// else of PD_API_KEY, with a fixed salt and label. So the bearer token that travels on every
// request never keys the store directly, a leaked block key is no bearer token, and PD_BLOCK_KEY
// lets a deployment key its store apart from its API key (or authenticate blocks with no API key).
// Like PD_API_KEY it is read from each process's own environment, never from a config file or a
// command line, and never printed: a KeyObject shows no bytes when logged or serialised.
import { createHmac, createSecretKey, hkdfSync, type KeyObject } from 'node:crypto'
import { API_KEY_ENV, apiKeyFromEnv } from '../http/api-key.ts'

/** The variable that keys the store apart from the API key. */
export const BLOCK_KEY_ENV = 'PD_BLOCK_KEY'

/** HKDF's salt and info: fixed, so every process of a deployment derives the same key. */
const SALT = 'pd-bridge'
const INFO = 'pd-bridge block authentication key/1'

/** The derived key, where its secret came from, and a public identifier of it. */
export interface BlockKey {
  key: KeyObject
  /** Which variable the secret came from. */
  source: typeof BLOCK_KEY_ENV | typeof API_KEY_ENV
  /**
   * 16 hex digits of HMAC(key, "pd-bridge block key id/1"): two processes with the same id use the
   * same key (what doctor compares). It reveals nothing of the key, but like any value computed
   * from a short secret it allows guessing offline, so it is shown only behind the API key.
   */
  id: string
}

/** The block key derived from `secret` (as HKDF-SHA-256 with this module's salt and label). */
export function deriveBlockKey (secret: string, source: BlockKey['source'] = BLOCK_KEY_ENV): BlockKey {
  if (typeof secret !== 'string' || secret.length === 0) throw new TypeError('a block key is derived from a non-empty secret')
  const key = createSecretKey(Buffer.from(hkdfSync('sha256', secret, SALT, INFO, 32)))
  const id = createHmac('sha256', key).update('pd-bridge block key id/1').digest('hex').slice(0, 16)
  return { key, source, id }
}

/** The block key of `env`: from PD_BLOCK_KEY, else PD_API_KEY (empty counts as unset); undefined without either. */
export function blockKeyFromEnv (env: NodeJS.ProcessEnv = process.env): BlockKey | undefined {
  const own = env[BLOCK_KEY_ENV]
  if (own !== undefined && own !== '') return deriveBlockKey(own, BLOCK_KEY_ENV)
  const api = apiKeyFromEnv(env)
  return api === undefined ? undefined : deriveBlockKey(api, API_KEY_ENV)
}

/** What /health and doctor say about a process's blocks: authenticated (with the key's id and source) or not. */
export function blockAuthDescription (key: BlockKey | undefined): { authenticated: boolean, key_id: string | null, key_source: string | null } {
  return key === undefined ? { authenticated: false, key_id: null, key_source: null } : { authenticated: true, key_id: key.id, key_source: key.source }
}
