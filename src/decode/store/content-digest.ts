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
import { createHash } from 'node:crypto'
import type { Dtype } from '../../formats/safetensors/index.ts'

/** The metadata key that holds the digest. A new hashing rule gets a new key, never a new meaning. */
export const CONTENT_DIGEST_KEY = 'content_sha256'

/** Metadata keys the digest leaves out. */
const NOT_HASHED: ReadonlySet<string> = new Set(['created_at', CONTENT_DIGEST_KEY])

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

/** Lowercase hex SHA-256 of a block's content (see the file comment). */
export function blockContentDigest (metadata: Readonly<Record<string, string>>, tensors: Iterable<DigestTensor>): string {
  const h = createHash('sha256')
  h.update(TAG)
  for (const key of Object.keys(metadata).sort()) {
    if (NOT_HASHED.has(key)) continue
    h.update(JSON.stringify([key, metadata[key]]) + '\n')
  }
  for (const t of [...tensors].sort(byName)) {
    h.update(JSON.stringify([t.name, t.dtype, [...t.shape], t.data.byteLength]) + '\n')
    h.update(t.data)
  }
  return h.digest('hex')
}

/** True for a well-formed digest value: 64 lowercase hex digits. */
export function isContentDigest (v: unknown): boolean {
  return typeof v === 'string' && /^[0-9a-f]{64}$/.test(v)
}
