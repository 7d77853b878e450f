// The updates a running capture makes to its manifest: start the capture directory, add one layer
// file, seal it as done, partial or failed. Only the capture side (the session, the prefill
// engine's recovery) writes these; the format every reader checks is src/wire/manifest.ts.
import { mkdir } from 'node:fs/promises'
import { join, resolve } from 'node:path'
import { SafetensorsError } from '../errors.ts'
import { writeFileAtomic } from '../formats/atomic-file.ts'
import { parseHeader } from '../formats/safetensors/index.ts'
import {
  CAPTURE_FORMAT, CaptureManifestError, captureDir, encodeManifest, layerFileName, MANIFEST_FILE, parseManifest, readManifest, sha256Hex, writeManifestAtomic,
  type CaptureLayerEntry, type CaptureManifest, type CaptureRequest,
} from '../wire/manifest.ts'

/** What the hook knows when a capture starts. */
export interface CaptureStart extends CaptureRequest {
  /** Numerics profile name. */
  profile: string
  /** Number of layers the finished capture will have. */
  numLayers: number
  /** Memory budget in bytes, when one applies. */
  memoryBudgetBytes?: number
  /** `tokenIdsSha256` of the token ids the capture is computed over (recorded in the manifest). */
  tokensSha256?: string
  /** P when the capture continues a cache of tokens [0, P) (CaptureManifest.startToken). */
  startToken?: number
}

/**
 * Start a capture: create `<root>/<requestId>/` (refusing one that already exists, so two captures
 * never share a directory) and write its first `running` manifest. Returns the directory.
 */
export async function startCapture (root: string, start: CaptureStart, now: Date = new Date()): Promise<string> {
  const dir = captureDir(root, start.requestId)
  const stamp = now.toISOString()
  const m: CaptureManifest = {
    format: CAPTURE_FORMAT,
    requestId: start.requestId,
    state: 'running',
    tokenCount: start.tokenCount,
    tokensSha256: start.tokensSha256,
    sealedLength: 0,
    sidecarFingerprint: start.sidecarFingerprint,
    profile: start.profile,
    numLayers: start.numLayers,
    layers: [],
    createdAt: stamp,
    updatedAt: stamp,
    timings: {},
    payloadBytes: 0,
    memoryBudgetBytes: start.memoryBudgetBytes,
    startToken: start.startToken,
  }
  // Validate before touching the disk, so a bad start leaves nothing behind.
  parseManifest(encodeManifest(m), join(dir, MANIFEST_FILE))
  try {
    await mkdir(dir)
  }
  catch (e) {
    const code = (e as NodeJS.ErrnoException).code
    if (code === 'EEXIST') throw new CaptureManifestError('requestId', `capture directory ${dir} already exists`)
    if (code === 'ENOENT') throw new CaptureManifestError('(root)', `capture root ${root} does not exist`)
    throw e
  }
  await writeManifestAtomic(dir, m)
  return dir
}

/**
 * Add one completed layer: check the bytes are one whole safetensors file, write them atomically as
 * `layer-<iii>.safetensors`, then list them (size and SHA-256) in the manifest. The file lands before
 * the manifest names it, so a listed file always exists. Only a running capture takes layers.
 */
export async function addLayerFile (dir: string, index: number, bytes: Uint8Array): Promise<CaptureLayerEntry> {
  return serialized(dir, async () => {
    const m = await readManifest(dir)
    const source = join(dir, MANIFEST_FILE)
    if (m.state !== 'running') throw new CaptureManifestError('state', `is ${m.state}; a sealed capture takes no more layers (layer ${index})`, source)
    if (!Number.isInteger(index) || index < 0 || index >= m.numLayers) {
      throw new CaptureManifestError('layers', `layer index ${index} is not an integer in 0..${m.numLayers - 1}`, source)
    }
    if (m.layers.some((e) => e.index === index)) throw new CaptureManifestError('layers', `layer ${index} is already listed`, source)
    const file = layerFileName(index)
    checkWholeSafetensors(bytes, join(dir, file))
    await writeFileAtomic(join(dir, file), bytes)
    const entry: CaptureLayerEntry = { index, file, bytes: bytes.length, sha256: sha256Hex(bytes) }
    const layers = [...m.layers, entry].sort((a, b) => a.index - b.index)
    await writeManifestAtomic(dir, { ...m, layers, payloadBytes: m.payloadBytes + entry.bytes, updatedAt: laterStamp(m.updatedAt) })
    return entry
  })
}

/** What sealing a capture may add: T' for partial, the error for failed, more timings. */
export interface FinishExtra {
  /** Required for partial (T' < T); must equal T if given for done; ignored for failed. */
  sealedLength?: number
  /** Required for failed. */
  error?: string
  /** Merged over the timings already recorded. */
  timings?: Record<string, number>
}

/**
 * Seal a running capture as done, partial or failed. done sets T' = T and needs every layer;
 * partial needs `sealedLength` < T and every layer (each holding the prefix [0, T')); failed needs
 * `error`. The sealed manifest is validated before it is written; a sealed capture cannot be resealed.
 */
export async function finishManifest (dir: string, state: 'done' | 'partial' | 'failed', extra: FinishExtra = {}): Promise<CaptureManifest> {
  return serialized(dir, async () => {
    const m = await readManifest(dir)
    const source = join(dir, MANIFEST_FILE)
    if (m.state !== 'running') throw new CaptureManifestError('state', `is already ${m.state}; cannot seal it again as ${state}`, source)
    let sealedLength = m.sealedLength
    if (state === 'done') sealedLength = extra.sealedLength ?? m.tokenCount
    if (state === 'partial') {
      if (extra.sealedLength === undefined) throw new CaptureManifestError('sealedLength', 'a partial capture must say how long its sealed prefix is', source)
      sealedLength = extra.sealedLength
    }
    if (state === 'failed' && extra.error === undefined) throw new CaptureManifestError('error', 'a failed capture must record its error', source)
    const sealed: CaptureManifest = {
      ...m,
      state,
      sealedLength,
      error: state === 'failed' ? extra.error : undefined,
      timings: { ...m.timings, ...extra.timings },
      updatedAt: laterStamp(m.updatedAt),
    }
    await writeManifestAtomic(dir, sealed)
    return sealed
  })
}

/** A safetensors file is 8 bytes of header length, a valid header, then exactly the data it names. */
function checkWholeSafetensors (bytes: Uint8Array, file: string): void {
  if (bytes.length < 8) throw new SafetensorsError(file, `layer bytes are ${bytes.length} long, shorter than the 8-byte header length`)
  const headerLength = new DataView(bytes.buffer, bytes.byteOffset, 8).getBigUint64(0, true)
  if (headerLength > BigInt(bytes.length - 8)) throw new SafetensorsError(file, `header length ${headerLength} exceeds the ${bytes.length - 8} bytes that follow`)
  const n = Number(headerLength)
  const { dataLength } = parseHeader(bytes.subarray(8, 8 + n), file)
  if (8 + n + dataLength !== bytes.length) {
    throw new SafetensorsError(file, `header names ${dataLength} data bytes but ${bytes.length - 8 - n} follow it`)
  }
}


/** Now, but never before the previous stamp (clocks can step back; updatedAt must not). */
function laterStamp (previous: string): string {
  const now = new Date()
  return now.getTime() >= Date.parse(previous) ? now.toISOString() : previous
}

// One writer process per capture; inside it, manifest updates are read-modify-write and must not
// interleave, so each directory gets a promise chain.
const queues = new Map<string, Promise<unknown>>()

async function serialized<T> (dir: string, task: () => Promise<T>): Promise<T> {
  const key = resolve(dir)
  const before = queues.get(key) ?? Promise.resolve()
  const run = before.then(task, task)
  const tail = run.catch(() => undefined)
  queues.set(key, tail)
  try {
    return await run
  }
  finally {
    if (queues.get(key) === tail) queues.delete(key)
  }
}
