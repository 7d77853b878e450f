// A block's string metadata: what a store stamps on every block it writes, how a block's header is
// read back, and the rules that decide whether a block may be served (the compatibility check).
import { BlockStoreError } from './errors.ts'
import { pythonJsonDumps, jsonEqual, tryParseJson, type JsonValue } from '../../wire/python-json.ts'
import { isBlockKeyHex } from './block-key.ts'
import { CONTENT_DIGEST_KEY, CONTENT_MAC_KEY, isContentDigest } from './content-digest.ts'

/** Format of blocks without PoolingCache deltas (oMLX's N-tuple `__nstate__` layout). */
export const FORMAT_VERSION_PLAIN = '3'

/** Format of blocks holding PoolingCache deltas (oMLX's POOLING_CACHE_DELTA_FORMAT_VERSION). */
export const FORMAT_VERSION_POOLING_DELTA = '4'

/** Versions this reader accepts. "5" differs from "4" only by GDN sidecars, which DeepSeek-V4 has none of. */
export const READABLE_FORMAT_VERSIONS: ReadonlySet<string> = new Set(['3', '4', '5'])

export { DEFAULT_BLOCK_SIZE } from '../../wire/block-size.ts'

/** Our payload layout stamp: every state is inside the block file (no sidecar files). */
export const DEFAULT_PAYLOAD_LAYOUT = 'embedded'

/** Metadata keys. */
export const META = {
  formatVersion: 'omlx_cache_format_version',
  blockHash: 'block_hash',
  parentHash: 'parent_hash',
  tokenCount: 'token_count',
  numLayers: 'num_layers',
  modelName: 'model_name',
  blockSize: 'block_size',
  signature: 'cache_signature',
  payloadLayout: 'payload_layout',
  createdAt: 'created_at',
  layerCacheTypes: 'layer_cache_types',
  layerMetaStates: 'layer_meta_states',
  geometry: 'geometry_fingerprint',
  /** Ours: SHA-256 of the block's content (content-digest.ts), stamped at write, checked at every load. */
  contentSha256: CONTENT_DIGEST_KEY,
  /** Ours: HMAC-SHA-256 of the same content under the deployment's block key; stamped and checked only with a key. */
  contentMac: CONTENT_MAC_KEY,
} as const

/**
 * What a store expects of every block it serves and stamps on every block it writes. The layer
 * count is `layerCacheTypes.length` (cache layers, not hidden layers).
 */
export interface StoreLayout {
  /** The model path oMLX hashes and stamps (the key depends on it). */
  modelName: string
  /** Tokens per block. */
  blockSize: number
  /** Per-layer cache class names, e.g. RotatingKVCache, CacheList. */
  layerCacheTypes: string[]
  /** CacheList layers holding a non-sliceable sub-cache: layer index -> sub descriptors ("PoolingCache:5"). */
  cachelistSubtypes?: Record<string, string[]>
  /** Payload layout stamp; `embedded` unless told otherwise. */
  payloadLayout?: string
  /** Geometry fingerprint (rope tables, window, profile); blocks under another one are never served. */
  geometryFingerprint: string
}

/** Renames oMLX applies before comparing cache type names: wrappers that store the same state. */
const CANONICAL_TYPE: Record<string, string> = {
  SizedArraysCache: 'ArraysCache',
  PrefillReadyRotatingKVCache: 'RotatingKVCache',
  BufferedRotatingKVCache: 'RotatingKVCache',
  BatchTurboQuantKVCache: 'TurboQuantKVCache',
}

/** Canonical names of per-layer cache types. */
export function canonicalCacheTypes (types: readonly string[]): string[] {
  return types.map((t) => CANONICAL_TYPE[t] ?? t)
}

/** The signature payload as a JSON object (before it is written as text). */
export function signatureObject (layout: StoreLayout): Record<string, JsonValue> {
  const sig: Record<string, JsonValue> = {
    block_size: layout.blockSize,
    layer_cache_types: canonicalCacheTypes(layout.layerCacheTypes),
    model_name: layout.modelName,
    num_layers: layout.layerCacheTypes.length,
    payload_layout: layout.payloadLayout ?? DEFAULT_PAYLOAD_LAYOUT,
  }
  // oMLX stamps sub composition only when some layer has it, so other signatures stay unchanged.
  if (layout.cachelistSubtypes !== undefined && Object.keys(layout.cachelistSubtypes).length > 0) {
    sig.cachelist_subtypes = layout.cachelistSubtypes
  }
  return sig
}

/** `cache_signature`: compact JSON with sorted keys, exactly as oMLX writes it (our geometry fingerprint is its own key). */
export function compatSignature (layout: StoreLayout): string {
  return pythonJsonDumps(signatureObject(layout), { compact: true, sortKeys: true })
}

// Blocks written before the fingerprint left the signature carry it there too; it was checked above.
function withoutLegacyGeometry (sig: JsonValue | undefined, layout: StoreLayout): JsonValue | undefined {
  if (sig === null || typeof sig !== 'object' || Array.isArray(sig) || sig.geometry_fingerprint !== layout.geometryFingerprint) return sig
  const { geometry_fingerprint: _, ...rest } = sig
  return rest
}

/** Check a layout before a store uses it. */
export function checkLayout (layout: StoreLayout): void {
  const where = 'store layout'
  if (layout == null || typeof layout !== 'object') throw new BlockStoreError(where, 'must be an object')
  if (typeof layout.modelName !== 'string') throw new BlockStoreError(where, 'modelName must be a string')
  if (!Number.isSafeInteger(layout.blockSize) || layout.blockSize <= 0) throw new BlockStoreError(where, `blockSize must be a positive integer, got ${layout.blockSize}`)
  if (!Array.isArray(layout.layerCacheTypes) || layout.layerCacheTypes.length === 0 || !layout.layerCacheTypes.every((t) => typeof t === 'string' && t.length > 0)) {
    throw new BlockStoreError(where, 'layerCacheTypes must be a non-empty list of class names')
  }
  if (typeof layout.geometryFingerprint !== 'string' || layout.geometryFingerprint.length === 0) {
    throw new BlockStoreError(where, 'geometryFingerprint must be a non-empty string')
  }
}

/**
 * All metadata of a block a store writes, except the per-layer keys the encoder adds. JSON lists use
 * Python's default json.dumps separators, as oMLX writes them.
 */
export function blockMetadata (layout: StoreLayout, hashHex: string, tokenCount: number, formatVersion: string,
  layerMetaStates: readonly JsonValue[], createdAt: number, parentHash: string | null = null): Record<string, string> {
  return {
    // oMLX stamps the chain's previous key on every block but the first.
    ...(parentHash === null ? {} : { [META.parentHash]: parentHash }),
    [META.formatVersion]: formatVersion,
    [META.blockHash]: hashHex,
    [META.tokenCount]: String(tokenCount),
    [META.numLayers]: String(layout.layerCacheTypes.length),
    [META.modelName]: layout.modelName,
    [META.blockSize]: String(layout.blockSize),
    [META.signature]: compatSignature(layout),
    [META.payloadLayout]: layout.payloadLayout ?? DEFAULT_PAYLOAD_LAYOUT,
    [META.createdAt]: String(createdAt),
    [META.layerCacheTypes]: pythonJsonDumps(canonicalCacheTypes(layout.layerCacheTypes)),
    [META.layerMetaStates]: pythonJsonDumps([...layerMetaStates]),
    [META.geometry]: layout.geometryFingerprint,
  }
}

/** What a block's header says about it (no tensor data). */
export interface BlockInfo {
  hash: string
  formatVersion: string
  tokenCount: number
  numLayers: number
  modelName: string
  blockSize: number
  signature: string
  payloadLayout: string | undefined
  geometryFingerprint: string | undefined
  createdAt: string | undefined
  layerCacheTypes: string[]
  layerMetaStates: JsonValue[]
  /** The content digest the block was written with; undefined for blocks written before digests. */
  contentSha256: string | undefined
  /** The keyed digest the block was written with; undefined for a block written without a block key. */
  contentMac: string | undefined
}

function decimal (metadata: Record<string, string>, key: string, file: string): number {
  const v = metadata[key]
  if (v === undefined) throw new BlockStoreError(file, `metadata ${key} is missing`)
  if (!/^(0|[1-9][0-9]*)$/.test(v) || !Number.isSafeInteger(Number(v))) throw new BlockStoreError(file, `metadata ${key} must be a decimal integer, got ${JSON.stringify(v)}`)
  return Number(v)
}

function jsonList (metadata: Record<string, string>, key: string, length: number, file: string): JsonValue[] {
  const text = metadata[key]
  if (text === undefined) throw new BlockStoreError(file, `metadata ${key} is missing`)
  const v = tryParseJson(text)
  if (!Array.isArray(v)) throw new BlockStoreError(file, `metadata ${key} must be a JSON list`)
  if (v.length !== length) throw new BlockStoreError(file, `metadata ${key} lists ${v.length} layers, num_layers says ${length}`)
  return v
}

/** Read and check the keying metadata of a block. Malformed metadata is a BlockStoreError naming `file`. */
export function readBlockInfo (metadata: Record<string, string>, file: string): BlockInfo {
  const hash = metadata[META.blockHash]
  if (hash === undefined) throw new BlockStoreError(file, 'metadata block_hash is missing (not a cache block)')
  if (!isBlockKeyHex(hash)) throw new BlockStoreError(file, `metadata block_hash ${JSON.stringify(hash)} is not 64 lowercase hex digits`)
  const formatVersion = metadata[META.formatVersion]
  if (formatVersion === undefined) throw new BlockStoreError(file, 'metadata omlx_cache_format_version is missing (pre-fix block)')
  const numLayers = decimal(metadata, META.numLayers, file)
  const types = jsonList(metadata, META.layerCacheTypes, numLayers, file)
  if (!types.every((t) => typeof t === 'string')) throw new BlockStoreError(file, 'metadata layer_cache_types must list strings')
  const modelName = metadata[META.modelName]
  if (modelName === undefined) throw new BlockStoreError(file, 'metadata model_name is missing')
  return {
    hash,
    formatVersion,
    tokenCount: decimal(metadata, META.tokenCount, file),
    numLayers,
    modelName,
    blockSize: decimal(metadata, META.blockSize, file),
    signature: metadata[META.signature] ?? '',
    payloadLayout: metadata[META.payloadLayout],
    geometryFingerprint: metadata[META.geometry],
    createdAt: metadata[META.createdAt],
    layerCacheTypes: types as string[],
    layerMetaStates: jsonList(metadata, META.layerMetaStates, numLayers, file),
    contentSha256: metadata[META.contentSha256],
    contentMac: metadata[META.contentMac],
  }
}

/**
 * Why a block may not be served under a layout. The last four are integrity refusals: `unverified`
 * (no content digest: written before digests, so nothing can vouch for its bytes) and `integrity`
 * (a malformed digest here; at load, content that does not hash to its digest), and, only for a
 * store with a block key, `unauthenticated` (no keyed digest: written without the key) and
 * `authentication` (a malformed keyed digest here; at load, one that is not the content's HMAC
 * under the key: tampered with, or written under another key). A store moves blocks refused for
 * any of them into its quarantine, since they can never be served.
 */
export type IncompatibleReason = 'format' | 'hash' | 'model' | 'block-size' | 'layer-count' | 'layer-types' | 'geometry' | 'signature' | 'token-count' | 'unverified' | 'integrity' | 'unauthenticated' | 'authentication'

/** Refusals that say the block's bytes cannot be trusted (as opposed to: built for another layout). */
export const INTEGRITY_REASONS: ReadonlySet<IncompatibleReason> = new Set(['unverified', 'integrity', 'unauthenticated', 'authentication'])

/** A refusal: the reason (a counter name) and a sentence for the log. */
export interface Incompatibility {
  reason: IncompatibleReason
  detail: string
}

/**
 * Whether a block may be served under `layout`, checked field by field so the refusal names what
 * differs: format, hash (file name vs block_hash), model, block size, layer count, layer types,
 * geometry, the rest of the signature (sub composition, payload layout), full-block token count, and
 * the presence of a well-formed content digest (whether the content matches it needs the tensor
 * data: the store checks that on every load).
 */
export function incompatibility (info: BlockInfo, layout: StoreLayout, fileHash?: string): Incompatibility | null {
  if (!READABLE_FORMAT_VERSIONS.has(info.formatVersion)) {
    return { reason: 'format', detail: `format version ${JSON.stringify(info.formatVersion)} is not one of ${[...READABLE_FORMAT_VERSIONS].join(', ')}` }
  }
  if (fileHash !== undefined && fileHash !== info.hash) return { reason: 'hash', detail: `file is named ${fileHash} but block_hash is ${info.hash}` }
  if (info.modelName !== layout.modelName) return { reason: 'model', detail: `model ${JSON.stringify(info.modelName)}, expected ${JSON.stringify(layout.modelName)}` }
  if (info.blockSize !== layout.blockSize) return { reason: 'block-size', detail: `block size ${info.blockSize}, expected ${layout.blockSize}` }
  if (info.numLayers !== layout.layerCacheTypes.length) return { reason: 'layer-count', detail: `${info.numLayers} cache layers, expected ${layout.layerCacheTypes.length}` }
  const theirs = canonicalCacheTypes(info.layerCacheTypes)
  const ours = canonicalCacheTypes(layout.layerCacheTypes)
  const k = theirs.findIndex((t, i) => t !== ours[i])
  if (k >= 0) return { reason: 'layer-types', detail: `layer ${k} is ${theirs[k]}, expected ${ours[k]}` }
  if (info.geometryFingerprint !== layout.geometryFingerprint) {
    const theirsGeometry = info.geometryFingerprint === undefined ? 'no geometry fingerprint' : `geometry ${info.geometryFingerprint}`
    return { reason: 'geometry', detail: `${theirsGeometry}, expected ${layout.geometryFingerprint}` }
  }
  if (!jsonEqual(withoutLegacyGeometry(tryParseJson(info.signature), layout), signatureObject(layout))) {
    return { reason: 'signature', detail: `cache_signature ${info.signature} differs from ${compatSignature(layout)}` }
  }
  if (info.tokenCount !== layout.blockSize) return { reason: 'token-count', detail: `${info.tokenCount} tokens; only full ${layout.blockSize}-token blocks are served` }
  // Checked last, so a block built for another layout is refused for that (and left alone), and only
  // a block this layout would serve is judged on its digest.
  if (info.contentSha256 === undefined) {
    return { reason: 'unverified', detail: `no ${META.contentSha256} (written before block digests), so its bytes cannot be verified; refused rather than served unchecked` }
  }
  if (!isContentDigest(info.contentSha256)) {
    return { reason: 'integrity', detail: `${META.contentSha256} ${JSON.stringify(info.contentSha256.slice(0, 80))} is not 64 lowercase hex digits (corrupted header)` }
  }
  return null
}

/**
 * For a store with a block key, after `incompatibility` passed: a block must carry a well-formed
 * keyed digest (whether it is the content's HMAC under the key needs the tensor data: the store
 * checks that on every load). A block written without the key is refused, never served unchecked.
 */
export function unauthenticated (info: BlockInfo): Incompatibility | null {
  if (info.contentMac === undefined) {
    return { reason: 'unauthenticated', detail: `no ${META.contentMac} (written without the block key), so nothing vouches that a holder of the key wrote it; refused rather than served unauthenticated` }
  }
  if (!isContentDigest(info.contentMac)) {
    return { reason: 'authentication', detail: `${META.contentMac} ${JSON.stringify(info.contentMac.slice(0, 80))} is not 64 lowercase hex digits` }
  }
  return null
}
