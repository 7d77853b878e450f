// One block on disk: <root>/<first hex digit>/<64 hex>.safetensors. Reading its header (metadata and
// tensor list, no data), reading its payload, and writing it atomically.
import type { KeyObject } from 'node:crypto'
import { mkdir, readdir, stat } from 'node:fs/promises'
import { dirname, join } from 'node:path'
import { SafetensorsFile, SafetensorsStreamWriter, type Tensor } from '../../formats/safetensors/index.ts'
import { SafetensorsError } from '../../errors.ts'
import { writeFileAtomic } from '../../formats/atomic-file.ts'
import { headerLengthPrefix, planLayout } from '../../formats/safetensors/stream-writer.ts'
import { checkData } from '../../formats/safetensors/write-checks.ts'
import { BlockStoreError } from './errors.ts'
import { planLayers, materializeLayers, type LayerRef } from './decode.ts'
import { encodeLayers } from './encode.ts'
import { blockContentDigests } from './content-digest.ts'
import { blockMetadata, readBlockInfo, FORMAT_VERSION_PLAIN, FORMAT_VERSION_POOLING_DELTA, META, type BlockInfo, type StoreLayout } from './metadata.ts'
import { holdsPoolingDelta, type BlockPayload } from './payload.ts'

/** The sixteen subdirectories a block can live in. */
export const SUBDIRS: readonly string[] = [...'0123456789abcdef']

/** A block file's name. Nothing else in a subdirectory is ever indexed. */
export const BLOCK_FILE_NAME = /^([0-9a-f]{64})\.safetensors$/

/**
 * A temporary file left by AtomicFile: `<hash>.safetensors.partial-<pid>-<random>`. It does not end
 * in `.safetensors`, so no scan (ours or oMLX's `*.safetensors` glob) can take it for a block.
 */
export const TEMP_FILE_NAME = /^([0-9a-f]{64})\.safetensors\.partial-([0-9]+)-([0-9a-f]+)$/

/** Where block `hash` lives under `root`. */
export function blockPath (root: string, hash: string): string {
  return join(root, hash[0], `${hash}.safetensors`)
}

/** A block's header as read from disk. */
export interface BlockHeader {
  path: string
  info: BlockInfo
  plan: LayerRef[]
  fileSize: number
  mtimeMs: number
}

/** A whole block: header and payload, and the digest its content hashes to now. */
export interface BlockContents {
  header: BlockHeader
  payload: BlockPayload
  /**
   * `blockContentDigest` of the file as read (every metadata key but created_at and the digest,
   * every tensor's bytes). The block is intact only when this equals `header.info.contentSha256`;
   * readBlockFile does not judge, the store does (and refuses, quarantines and counts a mismatch).
   */
  contentDigest: string
  /** With a block key: the content's HMAC-SHA-256 under it, to be held against `header.info.contentMac` (the store judges). */
  contentMac?: string
}

/** Wrap anything a broken file throws into a BlockStoreError naming it. */
function asBlockError (path: string, e: unknown): BlockStoreError {
  if (e instanceof BlockStoreError) return e
  if (e instanceof SafetensorsError) return new BlockStoreError(path, e.problem)
  return new BlockStoreError(path, (e as Error).message)
}

async function withFile<T> (path: string, use: (file: SafetensorsFile, header: BlockHeader) => Promise<T>): Promise<T> {
  let file: SafetensorsFile
  try {
    file = await SafetensorsFile.open(path)
  } catch (e) {
    throw asBlockError(path, e)
  }
  try {
    const st = await stat(path)
    const info = readBlockInfo(file.metadata, path)
    const shapes = new Map([...file.tensors].map(([name, t]) => [name, { dtype: t.dtype, shape: t.shape }]))
    const plan = planLayers(file.metadata, info.numLayers, shapes, path)
    return await use(file, { path, info, plan, fileSize: st.size, mtimeMs: st.mtimeMs })
  } catch (e) {
    throw asBlockError(path, e)
  } finally {
    await file.close()
  }
}

/** Read a block's header and check its layer structure against its tensor list (no tensor data is read). */
export async function readBlockHeader (path: string): Promise<BlockHeader> {
  return await withFile(path, async (_file, header) => header)
}

/**
 * Read a whole block: every tensor's bytes (the digest needs them all), then the payload built from
 * those very bytes, so what is verified is exactly what is used. With `authKey` the keyed digest
 * is computed too, in the same pass.
 */
export async function readBlockFile (path: string, authKey?: KeyObject): Promise<BlockContents> {
  return await withFile(path, async (file, header) => {
    const raw = await file.readAll()
    const digests = blockContentDigests(file.metadata, [...raw].map(([name, t]) => ({ name, ...t })), authKey)
    const layers = await materializeLayers(header.plan, async (name) => raw.get(name) ?? await file.read(name))
    const payload = { layers, layerCacheTypes: header.info.layerCacheTypes, layerMetaStates: header.info.layerMetaStates }
    return { header, payload, contentDigest: digests.sha256, ...(digests.hmac === undefined ? {} : { contentMac: digests.hmac }) }
  })
}

/** A block file encoded in memory, not yet written: its bytes and the content digest stamped in them. */
export interface EncodedBlock {
  bytes: Uint8Array
  contentDigest: string
}

// The tensors in oMLX's order and the metadata with the content digest of exactly those bytes
// stamped, and with `authKey` their keyed digest too.
function blockFileParts (layout: StoreLayout, hash: string, payload: BlockPayload, createdAt: number, parentHash: string | null, authKey: KeyObject | undefined):
  { tensors: Array<{ name: string, tensor: Tensor }>, metadata: Record<string, string>, contentDigest: string } {
  const encoded = encodeLayers(payload.layers)
  const formatVersion = holdsPoolingDelta(payload.layers) ? FORMAT_VERSION_POOLING_DELTA : FORMAT_VERSION_PLAIN
  const stamped: Record<string, string> = { ...blockMetadata(layout, hash, layout.blockSize, formatVersion, payload.layerMetaStates, createdAt, parentHash), ...encoded.metadata }
  const digests = blockContentDigests(stamped, encoded.tensors.map((t) => ({ name: t.name, ...t.tensor })), authKey)
  const metadata = { ...stamped, [META.contentSha256]: digests.sha256, ...(digests.hmac === undefined ? {} : { [META.contentMac]: digests.hmac }) }
  return { tensors: encoded.tensors, metadata, contentDigest: digests.sha256 }
}

/**
 * Write a block atomically: a temporary sibling (see TEMP_FILE_NAME), every byte written, fsync,
 * rename onto `<hash>.safetensors`, fsync the directory. Tensors go in oMLX's order. The content
 * digest (content-digest.ts) of exactly the metadata and bytes written is stamped as
 * `content_sha256`, and with `authKey` its HMAC under the key as `content_hmac_sha256`.
 * `parentHash` is the previous block's key (null for a chain's first block). Returns the path, the
 * size and the digest.
 */
export async function writeBlockFile (root: string, layout: StoreLayout, hash: string, payload: BlockPayload, createdAt: number,
  parentHash: string | null = null, authKey?: KeyObject): Promise<{ path: string, bytes: number, contentDigest: string }> {
  const path = blockPath(root, hash)
  const { tensors, metadata, contentDigest } = blockFileParts(layout, hash, payload, createdAt, parentHash, authKey)
  let writer: SafetensorsStreamWriter
  try {
    await mkdir(dirname(path), { recursive: true })
    writer = await SafetensorsStreamWriter.create(path, tensors.map((t) => ({ name: t.name, dtype: t.tensor.dtype, shape: t.tensor.shape })), metadata)
  } catch (e) {
    throw asBlockError(path, e)
  }
  try {
    for (const t of tensors) await writer.write(t.name, t.tensor.data)
  } catch (e) {
    await writer.abort()
    throw asBlockError(path, e)
  }
  try {
    await writer.close()
  } catch (e) {
    throw asBlockError(path, e)
  }
  return { path, bytes: (await stat(path)).size, contentDigest }
}

/**
 * The bytes `writeBlockFile` would write for the same arguments, in memory: the same layout
 * (planLayout, header, tensors back to back in oMLX's order). A builder thread encodes blocks with
 * it; `writeEncodedBlockFile` then puts them on disk.
 */
export function encodeBlockFile (layout: StoreLayout, hash: string, payload: BlockPayload, createdAt: number, parentHash: string | null = null, authKey?: KeyObject): EncodedBlock {
  const { tensors, metadata, contentDigest } = blockFileParts(layout, hash, payload, createdAt, parentHash, authKey)
  const name = `block ${hash}`
  const plan = planLayout(name, tensors.map((t) => ({ name: t.name, dtype: t.tensor.dtype, shape: t.tensor.shape })), metadata)
  const dataStart = 8 + plan.header.length
  const bytes = new Uint8Array(dataStart + plan.dataLength)
  bytes.set(headerLengthPrefix(plan.header.length), 0)
  bytes.set(plan.header, 8)
  tensors.forEach((t, i) => {
    const entry = plan.entries[i]
    checkData(name, t.name, t.tensor.data, entry.end - entry.begin)
    bytes.set(t.tensor.data, dataStart + entry.begin)
  })
  return { bytes, contentDigest }
}

/** Write an encoded block atomically (as writeBlockFile does: temporary sibling, fsync, rename, fsync the directory). */
export async function writeEncodedBlockFile (root: string, hash: string, block: EncodedBlock): Promise<{ path: string, bytes: number, contentDigest: string }> {
  const path = blockPath(root, hash)
  try {
    await mkdir(dirname(path), { recursive: true })
    await writeFileAtomic(path, block.bytes)
  } catch (e) {
    throw asBlockError(path, e)
  }
  return { path, bytes: block.bytes.byteLength, contentDigest: block.contentDigest }
}

/** What one subdirectory entry is. */
export type DirEntry =
  | { kind: 'block', hash: string, path: string }
  | { kind: 'temp', hash: string, pid: number, path: string }

/** Every block file and leftover temporary file under `root`'s sixteen subdirectories. */
export async function listBlockDir (root: string): Promise<DirEntry[]> {
  const out: DirEntry[] = []
  for (const sub of SUBDIRS) {
    let names: string[]
    try {
      names = await readdir(join(root, sub))
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code === 'ENOENT') continue
      throw new BlockStoreError(join(root, sub), `cannot list: ${(e as Error).message}`)
    }
    for (const name of names.sort()) {
      const block = BLOCK_FILE_NAME.exec(name)
      // A block is filed under its first hex digit; one anywhere else is not at its key's path.
      if (block !== null && block[1][0] === sub) out.push({ kind: 'block', hash: block[1], path: join(root, sub, name) })
      const temp = TEMP_FILE_NAME.exec(name)
      if (temp !== null) out.push({ kind: 'temp', hash: temp[1], pid: Number(temp[2]), path: join(root, sub, name) })
    }
  }
  return out
}

/** Check that `dir` exists and is a directory. */
export async function requireDirectory (dir: string): Promise<void> {
  let st
  try {
    st = await stat(dir)
  } catch {
    throw new BlockStoreError(dir, 'no such directory')
  }
  if (!st.isDirectory()) throw new BlockStoreError(dir, 'not a directory')
}
