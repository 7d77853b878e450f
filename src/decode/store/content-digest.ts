// A block's content digest: one SHA-256 per block over everything in the file that means
// something, stamped by the writer as metadata `content_sha256` and checked on every load before
// any tensor is used. A block whose content does not hash to its digest (bit rot, a torn copy, a
// flipped bit) or that carries no digest (written before digests existed) is never served.
//
// What is hashed (version 1), in this order:
//   1. the tag `pd-bridge-block-content/1\n`;
//   2. every metadata key except `created_at` (which differs between two writes of the same block)
//      and `content_sha256` itself, sorted by key, each as `JSON.stringify([key, value])` + `\n`;
//   3. every tensor, sorted by name, as `JSON.stringify([name, dtype, shape, byteLength])` + `\n`
//      followed by its raw bytes.
// Safetensors tensors tile the data section with no hole, so (3) covers every data byte, and (2)
// covers what gives the bytes their meaning (meta states, window offsets, None and zero-dim markers,
// class names). Two writes of the same block (the decoder's own and the bridge's) have the same
// digest, so verify-blocks still compares it like any other key.
//
// The digest catches damage, not tampering: whoever can write the store can change a tensor and
// recompute it. With a deployment's block key (src/config/block-key.ts) the writer also stamps
// `content_hmac_sha256`, HMAC-SHA-256 under that key over exactly the bytes the plain digest
// hashes (computed in the same pass); only a holder of the key can make it (docs/block-store.md,
// "Authentication"). Both keys are left out of both digests, so a block's plain digest is the same
// with or without a key.
import { createHash, createHmac, timingSafeEqual, type KeyObject } from 'node:crypto'
import type { Dtype } from '../../formats/safetensors/index.ts'

/** The metadata key that holds the digest. A new hashing rule gets a new key, never a new meaning. */
export const CONTENT_DIGEST_KEY = 'content_sha256'

/** The metadata key that holds the keyed digest (HMAC-SHA-256 under the deployment's block key). */
export const CONTENT_MAC_KEY = 'content_hmac_sha256'

/** Metadata keys the digests leave out. */
const NOT_HASHED: ReadonlySet<string> = new Set(['created_at', CONTENT_DIGEST_KEY, CONTENT_MAC_KEY])

const TAG = 'pd-bridge-block-content/1\n'

/** One tensor as the digest sees it. */
export interface DigestTensor {
  name: string
  dtype: Dtype
  shape: readonly number[]
  data: Uint8Array
}

function byName (a: DigestTensor, b: DigestTensor): number {
  return a.name < b.name ? -1 : a.name > b.name ? 1 : 0
}

/** A block's digests: always the plain one; the keyed one when a key was given. */
export interface BlockDigests {
  sha256: string
  hmac?: string
}

/** Lowercase hex SHA-256 of a block's content and, with `key`, its HMAC-SHA-256 under it: one pass over the bytes. */
export function blockContentDigests (metadata: Readonly<Record<string, string>>, tensors: Iterable<DigestTensor>, key?: KeyObject): BlockDigests {
  const sinks = key === undefined ? [createHash('sha256')] : [createHash('sha256'), createHmac('sha256', key)]
  const update = (data: string | Uint8Array): void => { for (const s of sinks) s.update(data) }
  update(TAG)
  for (const k of Object.keys(metadata).sort()) {
    if (NOT_HASHED.has(k)) continue
    update(JSON.stringify([k, metadata[k]]) + '\n')
  }
  for (const t of [...tensors].sort(byName)) {
    update(JSON.stringify([t.name, t.dtype, [...t.shape], t.data.byteLength]) + '\n')
    update(t.data)
  }
  const [sha256, hmac] = sinks.map((s) => s.digest('hex'))
  return hmac === undefined ? { sha256 } : { sha256, hmac }
}

/** Lowercase hex SHA-256 of a block's content (see the file comment). */
export function blockContentDigest (metadata: Readonly<Record<string, string>>, tensors: Iterable<DigestTensor>): string {
  return blockContentDigests(metadata, tensors).sha256
}

/** True for a well-formed digest value: 64 lowercase hex digits. */
export function isContentDigest (v: unknown): boolean {
  return typeof v === 'string' && /^[0-9a-f]{64}$/.test(v)
}

/**
 * Whether a stored keyed digest equals the one computed, compared in constant time (a comparison
 * that stops at the first wrong digit would let a forger find the tag digit by digit).
 */
export function macMatches (stored: string | undefined, computed: string): boolean {
  if (!isContentDigest(stored) || !isContentDigest(computed)) return false
  return timingSafeEqual(Buffer.from(stored as string, 'hex'), Buffer.from(computed, 'hex'))
}
