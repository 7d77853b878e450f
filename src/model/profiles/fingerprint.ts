// A profile's identity for geometry checks: the SHA-256 of its canonical JSON, so two engines
// agree on a profile exactly when every field agrees.
import { createHash } from 'node:crypto'
import type { NumericsProfile } from './types.ts'

/**
 * Canonical JSON of plain data: object keys sorted by UTF-16 code units at every level, no
 * whitespace, arrays in order. Only strings, finite numbers, booleans, null, arrays and plain
 * objects occur in a profile.
 */
export function canonicalJson (value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(',')}]`
  if (typeof value === 'object' && value !== null) {
    const keys = Object.keys(value).sort()
    return `{${keys.map((k) => `${JSON.stringify(k)}:${canonicalJson((value as Record<string, unknown>)[k])}`).join(',')}}`
  }
  return JSON.stringify(value)
}

/** sha256(canonicalJson(profile)) as 64 lowercase hex digits. */
export function profileFingerprint (profile: NumericsProfile): string {
  return createHash('sha256').update(canonicalJson(profile)).digest('hex')
}
