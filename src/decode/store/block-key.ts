// Block keys exactly as oMLX's compute_block_hash makes them: one SHA-256 over the model name, the
// parent digest (or "omlx-root"), Python's str() of the block's token tuple, and str(extra_keys).
import { createHash } from 'node:crypto'
import { BlockStoreError } from './errors.ts'
import { PyTuple, pythonRepr, pythonStr, pythonTruthy, type PyValue } from './python-repr.ts'

/** What the first block of a chain hashes in place of a parent digest. */
export const ROOT_PARENT = new TextEncoder().encode('omlx-root')

/** Bytes of a SHA-256 digest, which is what a block key is. */
export const BLOCK_KEY_BYTES = 32

/** Token ids as Python ints would print them: (1, 2, 3), (5,) or (). */
export function tokenTupleText (tokenIds: ArrayLike<number | bigint>): string {
  const items: PyValue[] = []
  for (let i = 0; i < tokenIds.length; i++) {
    const t = tokenIds[i]
    if (typeof t === 'number' && !Number.isSafeInteger(t)) {
      throw new BlockStoreError('block key', `token id at position ${i} is ${t}, not an integer`)
    }
    items.push(t)
  }
  return pythonRepr(new PyTuple(items))
}

/**
 * The key of one block: sha256(modelName if non-empty, parent digest or "omlx-root",
 * str(tuple(tokenIds)), str(extraKeys) if truthy), all text as UTF-8.
 */
export function computeBlockHash (parent: Uint8Array | null, tokenIds: ArrayLike<number | bigint>, extraKeys: PyValue | undefined, modelName: string): Uint8Array {
  if (parent !== null && parent.length !== BLOCK_KEY_BYTES) {
    throw new BlockStoreError('block key', `parent digest must be ${BLOCK_KEY_BYTES} bytes, got ${parent.length}`)
  }
  const h = createHash('sha256')
  if (modelName.length > 0) h.update(modelName, 'utf8')
  // oMLX tests `if parent_hash:`; a digest is never empty, so only null means "first block".
  h.update(parent ?? ROOT_PARENT)
  h.update(tokenTupleText(tokenIds), 'utf8')
  if (pythonTruthy(extraKeys)) h.update(pythonStr(extraKeys as PyValue), 'utf8')
  return new Uint8Array(h.digest())
}

/** Lowercase hex of a block key: the file name and the `block_hash` metadata value. */
export function blockKeyHex (key: Uint8Array): string {
  return Buffer.from(key.buffer, key.byteOffset, key.byteLength).toString('hex')
}

/** Whether `s` is a block key in hex (64 lowercase hex digits). */
export function isBlockKeyHex (s: string): boolean {
  return /^[0-9a-f]{64}$/.test(s)
}

/**
 * The chained keys (hex) of every FULL block of `tokenIds`, in order; a trailing partial block has
 * no key, because only full blocks are stored. `extraKeysFor(i)` gives block i's extra keys.
 */
export function blockKeyChain (modelName: string, tokenIds: ArrayLike<number | bigint>, blockSize: number,
  extraKeysFor?: (blockIndex: number) => PyValue | undefined): string[] {
  if (!Number.isSafeInteger(blockSize) || blockSize <= 0) {
    throw new BlockStoreError('block key', `block size must be a positive integer, got ${blockSize}`)
  }
  const keys: string[] = []
  let parent: Uint8Array | null = null
  const full = Math.floor(tokenIds.length / blockSize)
  for (let b = 0; b < full; b++) {
    const slice = Array.prototype.slice.call(tokenIds, b * blockSize, (b + 1) * blockSize) as (number | bigint)[]
    parent = computeBlockHash(parent, slice, extraKeysFor?.(b), modelName)
    keys.push(blockKeyHex(parent))
  }
  return keys
}
