// Checking stored blocks against their content digests without serving them: what
// `pd-bridge cache scan --verify` runs. Each block is read whole (one at a time), hashed as the store
// hashes it on every load (content-digest.ts), and compared with the `content_sha256` it was written with;
// with the deployment's block key also its `content_hmac_sha256`, as a store with that key checks it.
import type { KeyObject } from 'node:crypto'
import { BlockStoreError } from './errors.ts'
import { listBlockDir, readBlockFile, requireDirectory } from './block-file.ts'
import { isContentDigest, macMatches } from './content-digest.ts'
import { META } from './metadata.ts'

/** The verdict on one block file. */
export type BlockVerification =
  | { status: 'ok', hash: string, path: string, digest: string }
  /** The content does not hash to the stored digest, or the stored digest is malformed. */
  | { status: 'corrupt', hash: string, path: string, stored: string, computed: string, problem: string }
  /** No digest: written before block digests; the store refuses and quarantines such blocks. */
  | { status: 'unverified', hash: string, path: string, computed: string, problem: string }
  /** Not a readable block at all (bad safetensors, malformed metadata). */
  | { status: 'unreadable', hash: string, path: string, problem: string }
  /** Checked with a block key: intact, but its keyed digest is missing or not the content's HMAC under the key. */
  | { status: 'unauthenticated', hash: string, path: string, problem: string }

/**
 * Read `path` whole and check its content against its digest, and with `authKey` its keyed digest
 * against the content's HMAC under the key. Never throws for a bad file.
 */
export async function verifyBlockFile (path: string, hash: string, authKey?: KeyObject): Promise<BlockVerification> {
  let contents
  try {
    contents = await readBlockFile(path, authKey)
  } catch (e) {
    return { status: 'unreadable', hash, path, problem: e instanceof BlockStoreError ? e.problem : (e as Error).message }
  }
  const stored = contents.header.info.contentSha256
  const computed = contents.contentDigest
  if (stored === undefined) {
    return { status: 'unverified', hash, path, computed, problem: `no ${META.contentSha256} (written before block digests): cannot be verified, never served` }
  }
  if (!isContentDigest(stored)) {
    return { status: 'corrupt', hash, path, stored, computed, problem: `${META.contentSha256} ${JSON.stringify(stored.slice(0, 80))} is not 64 lowercase hex digits` }
  }
  if (stored !== computed) {
    return { status: 'corrupt', hash, path, stored, computed, problem: `content hashes to ${computed}, but ${META.contentSha256} says ${stored}` }
  }
  if (contents.contentMac !== undefined) {
    const mac = contents.header.info.contentMac
    if (mac === undefined) return { status: 'unauthenticated', hash, path, problem: `no ${META.contentMac} (written without the block key): a store with the key refuses it` }
    if (!macMatches(mac, contents.contentMac)) return { status: 'unauthenticated', hash, path, problem: `${META.contentMac} is not the content's HMAC under this key: changed by someone without the key, or written under another key` }
  }
  return { status: 'ok', hash, path, digest: stored }
}

/** Every block under a root, verified. */
export interface DirVerification {
  blocks: BlockVerification[]
  ok: number
  corrupt: number
  unverified: number
  unreadable: number
  unauthenticated: number
  /** Whether keyed digests were checked (a block key was given). */
  authenticated: boolean
}

/** Verify every block file under `root`'s sixteen subdirectories (the quarantine is not looked at); with `authKey`, their keyed digests too. */
export async function verifyBlockDir (root: string, authKey?: KeyObject): Promise<DirVerification> {
  await requireDirectory(root)
  const out: DirVerification = { blocks: [], ok: 0, corrupt: 0, unverified: 0, unreadable: 0, unauthenticated: 0, authenticated: authKey !== undefined }
  for (const entry of await listBlockDir(root)) {
    if (entry.kind !== 'block') continue
    const v = await verifyBlockFile(entry.path, entry.hash, authKey)
    out.blocks.push(v)
    out[v.status]++
  }
  return out
}
