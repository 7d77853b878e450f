// The capture directory format: `<root>/<requestId>/manifest.json` plus one safetensors file per
// layer. The manifest is the only thing a consumer trusts, so it is validated on every read and
// rewritten only by atomic rename: a reader sees the old manifest or the new one, never a torn one.
// The format lives in the wire layer (capture writes it; share, decode and the engines read it); the
// capture side's updates (start, add a layer, seal) are src/capture/manifest-updates.ts.
import { createHash } from 'node:crypto'
import { readFile } from 'node:fs/promises'
import { join } from 'node:path'
import { z } from 'zod'
import { PD_ERR, PdBridgeError } from '../errors.ts'
import { writeFileAtomic } from '../formats/atomic-file.ts'

/** The format tag every manifest carries; a reader refuses any other version by name. */
export const CAPTURE_FORMAT = 'pd-bridge-capture/1'

/** The manifest's file name inside a capture directory. */
export const MANIFEST_FILE = 'manifest.json'

/** Layer files use a 3-digit index, so a capture holds at most 1000 layers. */
export const MAX_LAYERS = 1000

/**
 * Request ids name a directory and a URL segment, so they are restricted to characters that need no
 * escaping anywhere: a letter or digit first, then letters, digits, `.`, `_`, `-`; at most 128.
 * Two dots in a row are refused too, so no id can ever read as a parent reference.
 */
export const REQUEST_ID_PATTERN = /^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$/

/** Layer file names: `layer-000.safetensors` .. `layer-999.safetensors`. */
export const LAYER_FILE_PATTERN = /^layer-(\d{3})\.safetensors$/

/** Where a capture is in its life. Only `done` and `partial` are ever trusted by a consumer. */
export type CaptureState = 'running' | 'done' | 'partial' | 'failed'

/** One completed layer file, listed only after the file landed under its final name. */
export interface CaptureLayerEntry {
  /** Layer index, 0-based. */
  index: number
  /** File name inside the capture directory, always `layerFileName(index)`. */
  file: string
  /** File size in bytes. */
  bytes: number
  /** Lowercase hex SHA-256 of the file's bytes. */
  sha256: string
}

/** The manifest of one capture (format `pd-bridge-capture/1`). */
export interface CaptureManifest {
  /** Always CAPTURE_FORMAT. */
  format: typeof CAPTURE_FORMAT
  /** The request this capture belongs to; also the directory name. */
  requestId: string
  /** running while layers land; done, partial or failed once sealed. */
  state: CaptureState
  /** T: the number of prompt tokens the request asked for. */
  tokenCount: number
  /**
   * `tokenIdsSha256` of the T token ids the capture was computed over (absent in captures made
   * before token digests). A block writer keys blocks under its own token ids only when their
   * digest equals this one, so a capture can never be filed under another prompt's keys.
   */
  tokensSha256?: string
  /** T': the length of the valid prefix [0, T'); equals T when done, below T when partial. */
  sealedLength: number
  /** The decoder sidecar's geometry fingerprint the capture was computed under. */
  sidecarFingerprint: string
  /** Name of the numerics profile the capture was computed with. */
  profile: string
  /** How many layers a complete capture has (files 0..numLayers-1). */
  numLayers: number
  /** Completed layer files, ascending by index, no duplicates. */
  layers: CaptureLayerEntry[]
  /** Why the capture failed; present exactly when state is failed. */
  error?: string
  /** ISO 8601 UTC time the capture started. */
  createdAt: string
  /** ISO 8601 UTC time of the last manifest write. */
  updatedAt: string
  /** Named durations in milliseconds (e.g. `prefill`, `write`). */
  timings: Record<string, number>
  /** Sum of `bytes` over `layers`. */
  payloadBytes: number
  /** The memory budget the hook ran under, when one was set. */
  memoryBudgetBytes?: number
  /**
   * P, when the capture continues the decoder's cache of tokens [0, P) (a warm-extended prompt,
   * docs/warm-extend.md): its layer files then hold only what tokens [P, T') added (pooled rows from
   * P / ratio, boundary snapshots past P), and its blocks are those past P. Absent: from 0.
   */
  startToken?: number
}

/** What a consumer asked for; a manifest is trusted only if it matches all of it. */
export interface CaptureRequest {
  /** The request id the consumer is waiting for. */
  requestId: string
  /** T: the prompt length the consumer sent. */
  tokenCount: number
  /** The fingerprint of the decoder sidecar the consumer will mount the cache with. */
  sidecarFingerprint: string
}


/** A manifest that is malformed, inconsistent, or does not match the request it is meant for. */
export class CaptureManifestError extends PdBridgeError {
  override name = 'CaptureManifestError'
  constructor (readonly field: string, readonly problem: string, readonly source?: string) {
    super(`${source ? source + ': ' : ''}manifest ${field}: ${problem}`, { code: PD_ERR.CAPTURE_MANIFEST })
  }
}

const count = z.int().nonnegative().max(Number.MAX_SAFE_INTEGER)
const nonEmpty = z.string().min(1)

const layerEntrySchema = z.strictObject({
  index: z.int().min(0).max(MAX_LAYERS - 1),
  file: z.string().regex(LAYER_FILE_PATTERN),
  bytes: count,
  sha256: z.string().regex(/^[0-9a-f]{64}$/, 'must be 64 lowercase hex digits'),
})

const manifestSchema = z.strictObject({
  format: z.literal(CAPTURE_FORMAT),
  requestId: z.string().regex(REQUEST_ID_PATTERN, 'must match ' + String(REQUEST_ID_PATTERN)),
  state: z.enum(['running', 'done', 'partial', 'failed']),
  tokenCount: count.min(1),
  tokensSha256: z.string().regex(/^[0-9a-f]{64}$/, 'must be 64 lowercase hex digits').optional(),
  sealedLength: count,
  sidecarFingerprint: nonEmpty,
  profile: nonEmpty,
  numLayers: z.int().min(1).max(MAX_LAYERS),
  layers: z.array(layerEntrySchema),
  error: nonEmpty.optional(),
  createdAt: z.iso.datetime(),
  updatedAt: z.iso.datetime(),
  timings: z.record(z.string(), z.number().nonnegative().finite()),
  payloadBytes: count,
  memoryBudgetBytes: count.min(1).optional(),
  startToken: count.min(1).optional(),
})

/** `layer-007.safetensors` for index 7. */
export function layerFileName (index: number): string {
  if (!Number.isInteger(index) || index < 0 || index >= MAX_LAYERS) {
    throw new CaptureManifestError('layers', `layer index ${index} is not an integer in 0..${MAX_LAYERS - 1}`)
  }
  return `layer-${String(index).padStart(3, '0')}.safetensors`
}

/** True when `id` can be used as a request id (directory and URL segment). */
export function isValidRequestId (id: string): boolean {
  return REQUEST_ID_PATTERN.test(id) && !id.includes('..')
}

/** The directory of one capture under a capture root. */
export function captureDir (root: string, requestId: string): string {
  if (!isValidRequestId(requestId)) throw new CaptureManifestError('requestId', `${JSON.stringify(requestId)} must match ${REQUEST_ID_PATTERN} without '..'`)
  return join(root, requestId)
}

/** Lowercase hex SHA-256 of some bytes. */
export function sha256Hex (bytes: Uint8Array): string {
  return createHash('sha256').update(bytes).digest('hex')
}

/**
 * The digest of a prompt's token ids that captures carry: lowercase hex SHA-256 over the ids in
 * order, each as a little-endian unsigned 32-bit integer (so `[1, 2]` hashes the 8 bytes
 * `01 00 00 00 02 00 00 00`). Independent of any model name or block size, so the prefill engine,
 * the front door and the block writer all compute it from the ids alone.
 */
export function tokenIdsSha256 (ids: ArrayLike<number>): string {
  const bytes = new Uint8Array(ids.length * 4)
  const view = new DataView(bytes.buffer)
  for (let i = 0; i < ids.length; i++) {
    const t = ids[i]
    if (!Number.isInteger(t) || t < 0 || t > 0xffffffff) throw new PdBridgeError(`token digest: token ${i} is ${String(t)}, not an integer id in [0, 2^32)`)
    view.setUint32(i * 4, t, true)
  }
  return sha256Hex(bytes)
}

/**
 * Cross-field rules every manifest keeps, whatever its state: layers ascending without duplicates,
 * each named for its index and below numLayers, payloadBytes the sum of their sizes, 0 <= T' <= T,
 * `error` present exactly when failed, updatedAt not before createdAt; done means T' == T and
 * partial means T' < T, and both list every layer 0..numLayers-1 (a sealed prefix covers all layers).
 */
export function checkManifest (m: CaptureManifest, source?: string): void {
  const fail = (field: string, problem: string): never => { throw new CaptureManifestError(field, problem, source) }
  if (m.format !== CAPTURE_FORMAT) fail('format', `is ${JSON.stringify(m.format)}, this reader knows only ${CAPTURE_FORMAT}`)
  if (!isValidRequestId(m.requestId)) fail('requestId', `${JSON.stringify(m.requestId)} must match ${REQUEST_ID_PATTERN} without '..'`)
  if (m.sealedLength > m.tokenCount) fail('sealedLength', `${m.sealedLength} exceeds tokenCount ${m.tokenCount}`)
  if (m.startToken !== undefined && m.startToken >= m.tokenCount) fail('startToken', `${m.startToken} is not below tokenCount ${m.tokenCount}`)
  let previous = -1
  let total = 0
  for (const entry of m.layers) {
    if (entry.index === previous) fail('layers', `duplicate layer index ${entry.index}`)
    if (entry.index < previous) fail('layers', `layer index ${entry.index} listed after ${previous}; layers must be ascending`)
    if (entry.index >= m.numLayers) fail('layers', `layer index ${entry.index} is not below numLayers ${m.numLayers}`)
    if (entry.file !== layerFileName(entry.index)) fail('layers', `layer ${entry.index} is named ${JSON.stringify(entry.file)}, expected ${layerFileName(entry.index)}`)
    previous = entry.index
    total += entry.bytes
  }
  if (m.payloadBytes !== total) fail('payloadBytes', `is ${m.payloadBytes} but the listed layers hold ${total} bytes`)
  if (Date.parse(m.updatedAt) < Date.parse(m.createdAt)) fail('updatedAt', `${m.updatedAt} is before createdAt ${m.createdAt}`)
  if (m.state === 'failed') {
    if (m.error === undefined) fail('error', 'a failed capture must record its error')
    return
  }
  if (m.error !== undefined) fail('error', `only a failed capture has an error, this one is ${m.state}`)
  if (m.state === 'done' && m.sealedLength !== m.tokenCount) fail('sealedLength', `a done capture seals all of T: sealedLength ${m.sealedLength} != tokenCount ${m.tokenCount}`)
  if (m.state === 'partial' && m.sealedLength === m.tokenCount) fail('sealedLength', `a partial capture seals less than T, but sealedLength == tokenCount == ${m.tokenCount}; that is done`)
  if (m.state === 'done' || m.state === 'partial') {
    if (m.startToken !== undefined && m.sealedLength < m.startToken) fail('sealedLength', `${m.sealedLength} is below startToken ${m.startToken}: a capture cannot seal before the cache it continues`)
    const listed = new Set(m.layers.map((e) => e.index))
    const missing: number[] = []
    for (let i = 0; i < m.numLayers; i++) if (!listed.has(i)) missing.push(i)
    if (missing.length > 0) fail('layers', `a ${m.state} capture must list every layer 0..${m.numLayers - 1}; missing ${describeIndices(missing)}`)
  }
}

function describeIndices (indices: number[]): string {
  const shown = indices.slice(0, 8).join(', ')
  return indices.length > 8 ? `${shown}, ... (${indices.length} in all)` : shown
}

/**
 * Parse manifest JSON text: the format tag first (so a newer version is named, not picked apart),
 * then the schema (types, ranges, no unknown keys), then `checkManifest`. `source` names the file
 * or URL in errors.
 */
export function parseManifest (text: string, source: string): CaptureManifest {
  let raw: unknown
  try {
    raw = JSON.parse(text)
  }
  catch (e) {
    throw new CaptureManifestError('(json)', `not valid JSON: ${(e as Error).message}`, source)
  }
  if (raw === null || typeof raw !== 'object' || Array.isArray(raw)) {
    throw new CaptureManifestError('(json)', 'must be a JSON object', source)
  }
  const format = (raw as Record<string, unknown>).format
  if (format !== CAPTURE_FORMAT) {
    throw new CaptureManifestError('format', `is ${JSON.stringify(format) ?? 'missing'}, this reader knows only ${CAPTURE_FORMAT}`, source)
  }
  const parsed = manifestSchema.safeParse(raw)
  if (!parsed.success) {
    const issue = parsed.error.issues[0]
    const field = issue.path.length > 0 ? issue.path.map(String).join('.') : '(root)'
    throw new CaptureManifestError(field, issue.message, source)
  }
  const m = parsed.data as CaptureManifest
  checkManifest(m, source)
  return m
}

/** The manifest's bytes: keys in a fixed order, two-space indent, trailing newline. */
export function encodeManifest (m: CaptureManifest): string {
  const ordered: Record<string, unknown> = {
    format: m.format,
    requestId: m.requestId,
    state: m.state,
    tokenCount: m.tokenCount,
    tokensSha256: m.tokensSha256,
    sealedLength: m.sealedLength,
    sidecarFingerprint: m.sidecarFingerprint,
    profile: m.profile,
    numLayers: m.numLayers,
    layers: m.layers.map((e) => ({ index: e.index, file: e.file, bytes: e.bytes, sha256: e.sha256 })),
    error: m.error,
    createdAt: m.createdAt,
    updatedAt: m.updatedAt,
    timings: m.timings,
    payloadBytes: m.payloadBytes,
    memoryBudgetBytes: m.memoryBudgetBytes,
    startToken: m.startToken,
  }
  return JSON.stringify(ordered, null, 2) + '\n'
}

/**
 * Write `<dir>/manifest.json` atomically: temporary sibling, fsync, rename, fsync the directory.
 * The manifest is checked first, so an invalid manifest is never written.
 */
export async function writeManifestAtomic (dir: string, m: CaptureManifest): Promise<void> {
  const path = join(dir, MANIFEST_FILE)
  // Round-trip through the parser: the same rules a reader applies, applied before anyone can read it.
  parseManifest(encodeManifest(m), path)
  await writeFileAtomic(path, new TextEncoder().encode(encodeManifest(m)))
}

/** Read and validate `<dir>/manifest.json`; every problem is a CaptureManifestError naming the file. */
export async function readManifest (dir: string): Promise<CaptureManifest> {
  const path = join(dir, MANIFEST_FILE)
  let text: string
  try {
    text = await readFile(path, 'utf8')
  }
  catch (e) {
    const code = (e as NodeJS.ErrnoException).code
    if (code === 'ENOENT') throw new CaptureManifestError('(file)', 'no manifest.json here (capture not started?)', path)
    throw new CaptureManifestError('(file)', `cannot be read: ${code ?? (e as Error).message}`, path)
  }
  return parseManifest(text, path)
}

/**
 * The checks that hold for a manifest in any state: format version, request id, T and fingerprint
 * equal what the consumer asked for. A running manifest that fails these can never become right.
 */
export function validateManifestIdentity (m: CaptureManifest, request: CaptureRequest, source?: string): void {
  const fail = (field: string, problem: string): never => { throw new CaptureManifestError(field, problem, source) }
  if (m.format !== CAPTURE_FORMAT) fail('format', `is ${JSON.stringify(m.format)}, this reader knows only ${CAPTURE_FORMAT}`)
  if (m.requestId !== request.requestId) fail('requestId', `is ${JSON.stringify(m.requestId)}, the request is ${JSON.stringify(request.requestId)}`)
  if (m.tokenCount !== request.tokenCount) fail('tokenCount', `T is ${m.tokenCount} in the manifest but the request has ${request.tokenCount} tokens`)
  if (m.sidecarFingerprint !== request.sidecarFingerprint) {
    fail('sidecarFingerprint', `is ${JSON.stringify(m.sidecarFingerprint)}, the decoder's sidecar is ${JSON.stringify(request.sidecarFingerprint)}`)
  }
}

/**
 * What a block writer checks before it keys a single block: the manifest names the digest of the
 * token ids it was computed over, and it is the digest of `tokens`, the ids the blocks are about to
 * be keyed under. A capture without a digest is refused too: nothing ties it to these tokens.
 */
export function checkManifestTokens (m: CaptureManifest, tokens: ArrayLike<number>, source?: string): void {
  const fail = (problem: string): never => { throw new CaptureManifestError('tokensSha256', problem, source) }
  if (m.tokenCount !== tokens.length) fail(`the manifest's T is ${m.tokenCount} but ${tokens.length} token ids were given`)
  const ours = tokenIdsSha256(tokens)
  if (m.tokensSha256 === undefined) fail(`is missing: the capture does not say which token ids it was computed over (made by a prefill engine without token digests?), so its blocks cannot be keyed under these ${tokens.length} ids (sha256 ${ours})`)
  if (m.tokensSha256 !== ours) fail(`is ${m.tokensSha256}, but the ${tokens.length} token ids the blocks would be keyed under hash to ${ours}: the capture was computed over another prompt`)
}

/**
 * Everything a consumer checks before it trusts a sealed capture: identity (format, request id, T,
 * fingerprint), a state of done or partial, and every rule of `checkManifest` (T' <= T, partial
 * means T' < T, every layer listed exactly once). Throws a CaptureManifestError naming the field.
 */
export function validateManifestForRequest (m: CaptureManifest, request: CaptureRequest, source?: string): void {
  validateManifestIdentity(m, request, source)
  if (m.state === 'running') throw new CaptureManifestError('state', 'is running; only a done or partial capture can be trusted', source)
  if (m.state === 'failed') throw new CaptureManifestError('state', `is failed (${m.error ?? 'no error recorded'}); only a done or partial capture can be trusted`, source)
  checkManifest(m, source)
}
