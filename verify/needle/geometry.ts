// The geometry a needle document is cached under, for the seed ledger. Through the bridge the
// decoder's blocks hold rows the capture hook computed with the sidecar's rope tables, filed under
// the decoder store's geometry fingerprint. A stale sidecar therefore writes wrong rows under an
// unchanged store fingerprint, and after the fix they would be served again for the same document.
// So the ledger key is both: the store's fingerprint and the sidecar's, hashed together. Where the
// deployment reports neither, the operator names the geometry with --geometry.
import { createHash } from 'node:crypto'
import { ConfigError, PdBridgeError } from '../../src/errors.ts'
import { apiKeyFromEnv, authHeaders } from '../../src/http/api-key.ts'

/** Where the geometry came from. */
export type GeometrySource = 'front-door' | 'decoder' | 'flag'

/** The geometry a run's documents are cached under, and its parts. */
export interface DeploymentGeometry {
  /** The ledger key: 64 hex digits. */
  fingerprint: string
  source: GeometrySource
  /** The decoder store's geometry fingerprint, when reported. */
  store: string | null
  /** The sidecar's fingerprint, when reported. */
  sidecar: string | null
  /** The --geometry text, when given. */
  label: string | null
  /** The decoder's block size, when reported. */
  blockSize: number | null
}

const HEX64 = /^[0-9a-f]{64}$/

function sha256 (text: string): string {
  return createHash('sha256').update(text).digest('hex')
}

/** The ledger key of a store fingerprint and a sidecar fingerprint (the store's alone without a sidecar). */
export function combinedGeometry (store: string, sidecar: string | null): string {
  return sidecar === null ? store : sha256(`pd-bridge/needle-geometry/v1\nstore ${store}\nsidecar ${sidecar}\n`)
}

/** A geometry named on the command line: 64 hex digits are taken as they are, other text is hashed. */
export function geometryFromFlag (text: string): DeploymentGeometry {
  const t = text.trim()
  if (t === '') throw new ConfigError('--geometry', 'must not be empty')
  return { fingerprint: HEX64.test(t) ? t : sha256(`pd-bridge/needle-geometry-label/v1\n${t}`), source: 'flag', store: null, sidecar: null, label: t, blockSize: null }
}

function isRecord (v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v)
}

function hex (v: unknown): string | null {
  return typeof v === 'string' && HEX64.test(v) ? v : null
}

function positiveInt (v: unknown): number | null {
  return Number.isSafeInteger(v) && (v as number) > 0 ? v as number : null
}

/** The geometry in a front door's /health body (links.store and links.sidecar); undefined when it has no store fingerprint. */
export function geometryFromFrontHealth (health: unknown): DeploymentGeometry | undefined {
  const links = isRecord(health) && isRecord(health.links) ? health.links : undefined
  const store = isRecord(links?.store) ? links.store : undefined
  const sidecar = isRecord(links?.sidecar) ? links.sidecar : undefined
  const storeFp = hex(store?.geometry_fingerprint)
  if (storeFp === null) return undefined
  const sidecarFp = hex(sidecar?.fingerprint)
  const routing = isRecord(health) && isRecord(health.routing) ? health.routing : undefined
  return { fingerprint: combinedGeometry(storeFp, sidecarFp), source: 'front-door', store: storeFp, sidecar: sidecarFp, label: null, blockSize: positiveInt(store?.block_size) ?? positiveInt(routing?.block_size) }
}

/** The geometry in a decoder's /health body (geometry_fingerprint, cache.block_size); undefined without a fingerprint. */
export function geometryFromDecoderHealth (health: unknown): DeploymentGeometry | undefined {
  const fp = isRecord(health) ? hex(health.geometry_fingerprint) : null
  if (fp === null) return undefined
  const cache = isRecord(health) && isRecord(health.cache) ? health.cache : undefined
  return { fingerprint: fp, source: 'decoder', store: fp, sidecar: null, label: null, blockSize: positiveInt(cache?.block_size) }
}

/** GET `<url>/health` as JSON (any status: a degraded front door still describes itself); undefined when it cannot be read. */
export async function readHealth (url: string, timeoutMs: number): Promise<unknown> {
  try {
    const res = await fetch(`${url.replace(/\/+$/, '')}/health`, { headers: authHeaders(apiKeyFromEnv()), signal: AbortSignal.timeout(timeoutMs) })
    return await res.json()
  }
  catch {
    return undefined
  }
}

/** Where to look for the geometry. */
export interface GeometryLookup {
  /** The bridged front door. */
  frontUrl?: string
  /** The decoder-alone URL (asked only without a front door). */
  nativeUrl?: string
  /** --geometry: wins over what the deployment reports. */
  flag?: string
  timeoutMs?: number
}

/**
 * The deployment's geometry: --geometry when given, else the front door's /health, else (without
 * a front door) the decoder's. A deployment that reports none needs --geometry.
 */
export async function discoverGeometry (lookup: GeometryLookup): Promise<DeploymentGeometry> {
  const timeoutMs = lookup.timeoutMs ?? 10_000
  if (lookup.flag !== undefined) {
    const flagged = geometryFromFlag(lookup.flag)
    // The block size is still the deployment's, when it says.
    const health = lookup.frontUrl !== undefined ? geometryFromFrontHealth(await readHealth(lookup.frontUrl, timeoutMs)) : undefined
    return { ...flagged, blockSize: health?.blockSize ?? null }
  }
  if (lookup.frontUrl !== undefined) {
    const g = geometryFromFrontHealth(await readHealth(lookup.frontUrl, timeoutMs))
    if (g !== undefined) return g
    throw new PdBridgeError(`${lookup.frontUrl}/health reports no links.store.geometry_fingerprint; name the deployment's geometry with --geometry (any text that changes when the rope geometry changes)`)
  }
  if (lookup.nativeUrl !== undefined) {
    const g = geometryFromDecoderHealth(await readHealth(lookup.nativeUrl, timeoutMs))
    if (g !== undefined) return g
    throw new PdBridgeError(`${lookup.nativeUrl}/health reports no geometry_fingerprint; name the deployment's geometry with --geometry`)
  }
  throw new PdBridgeError('no deployment to ask for its geometry: give --url or --native-url')
}
