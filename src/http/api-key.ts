// The optional shared API key (PD_API_KEY). When it is set, every service (front door, prefill
// engine, share, decoder) requires `Authorization: Bearer <key>` on every route but a bare
// `/health`, and every internal caller sends it. It is one secret for the whole deployment, read
// from each process's own environment (never from a config file or a command line, which `ps` and
// logs show); the embedded stack's children inherit it with the rest of the environment.
import { createHash, timingSafeEqual } from 'node:crypto'

/** The variable every process reads its key from. */
export const API_KEY_ENV = 'PD_API_KEY'

/** The key in `env`, or undefined when unset or empty (shells export empty variables freely). */
export function apiKeyFromEnv (env: NodeJS.ProcessEnv = process.env): string | undefined {
  const key = env[API_KEY_ENV]
  return key === undefined || key === '' ? undefined : key
}

/** The header an internal request carries: empty without a key. */
export function authHeaders (key: string | undefined): Record<string, string> {
  return key === undefined ? {} : { authorization: `Bearer ${key}` }
}

/**
 * Whether an Authorization header carries `key`. Both sides are hashed first, so the comparison
 * is constant time and its length says nothing about the key's.
 */
export function bearerMatches (header: string | string[] | undefined, key: string): boolean {
  const value = Array.isArray(header) ? header[0] : header
  const m = value === undefined ? null : /^Bearer +(\S+) *$/i.exec(value)
  const given = createHash('sha256').update(m === null ? '' : m[1]).digest()
  const wanted = createHash('sha256').update(key).digest()
  return timingSafeEqual(given, wanted) && m !== null
}

/** A request that needs no key: a bare liveness probe (its answer then says nothing but the status). */
export function isHealthPath (url: string | undefined): boolean {
  return (url ?? '').split('?')[0] === '/health'
}

/** The sentence every 401 carries (it never echoes what was sent). */
export const UNAUTHORIZED_MESSAGE = 'missing or wrong API key: send Authorization: Bearer <PD_API_KEY>'

/** Whether `host` is this machine's loopback (where only local processes can connect). */
export function isLoopbackHost (host: string): boolean {
  const h = host.trim().toLowerCase().replace(/^\[|\]$/g, '')
  return h === 'localhost' || h === '::1' || /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(h)
}

/**
 * Why a service may not listen on `host` without a key, or null when it may: beyond loopback
 * (another host's address, 0.0.0.0) anyone on the network could use it, so the deployment key is
 * required there. Loopback stays open without one, as the embedded stack and the tests run it.
 */
export function keyRequiredProblem (host: string, key: string | undefined): string | null {
  if (key !== undefined || isLoopbackHost(host)) return null
  return `listening on ${host} (beyond loopback) needs the deployment key: set ${API_KEY_ENV} (the same value for every process of the deployment; docs/two-hosts.md)`
}
