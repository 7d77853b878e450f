// Reading a capture back: the manifest validated (against the request, when given), each listed
// layer file checked against its size and SHA-256 and against the manifest (layer, T', fingerprint),
// and the tensors widened to float32 under ModelCache.tensors' names.
import { readFile } from 'node:fs/promises'
import { join } from 'node:path'
import { CaptureIntegrityError, PdBridgeError } from '../errors.ts'
import type { DumpTensor } from '../model/engine/cache.ts'
import { decodeLayerFile, type LayerFileMeta } from '../wire/layer-file.ts'
import { readManifest, sha256Hex, validateManifestForRequest, type CaptureManifest, type CaptureRequest } from '../wire/manifest.ts'

/** A sealed capture as read from its directory. */
export interface CaptureContents {
  manifest: CaptureManifest
  /** Every layer's tensors, named `${prefix}.layers.{i}...` (or `layers.{i}...` without a prefix). */
  tensors: Map<string, DumpTensor>
  /** Each layer file's metadata, by layer index. */
  layers: LayerFileMeta[]
}

/**
 * Read the capture in `dir`. It must be sealed `done` or `partial` (and, given `request`, match its
 * request id, T and sidecar fingerprint). A file that differs from what the manifest lists is a
 * PdBridgeError naming the file.
 */
export async function readCapture (dir: string, opts: { request?: CaptureRequest, prefix?: string } = {}): Promise<CaptureContents> {
  const manifest = await readManifest(dir)
  const source = join(dir, 'manifest.json')
  if (opts.request !== undefined) validateManifestForRequest(manifest, opts.request, source)
  else if (manifest.state !== 'done' && manifest.state !== 'partial') {
    throw new PdBridgeError(`${source}: the capture is ${manifest.state}${manifest.error === undefined ? '' : ` (${manifest.error})`}; only a done or partial capture can be read`)
  }
  const tensors = new Map<string, DumpTensor>()
  const layers: LayerFileMeta[] = []
  for (const entry of manifest.layers) {
    const path = join(dir, entry.file)
    const bytes = new Uint8Array(await readFile(path))
    if (bytes.length !== entry.bytes) throw new CaptureIntegrityError(path, `${bytes.length} bytes, the manifest lists ${entry.bytes}`)
    const sha = sha256Hex(bytes)
    if (sha !== entry.sha256) throw new CaptureIntegrityError(path, `SHA-256 ${sha} does not match the manifest's ${entry.sha256}`)
    const decoded = decodeLayerFile(bytes, path)
    const m = decoded.meta
    if (m.layer !== entry.index) throw new PdBridgeError(`${path}: holds layer ${m.layer}, the manifest lists it as layer ${entry.index}`)
    if (m.tokens !== manifest.sealedLength) throw new PdBridgeError(`${path}: covers ${m.tokens} tokens, the manifest's sealed length is ${manifest.sealedLength}`)
    if (m.fingerprint !== manifest.sidecarFingerprint) throw new PdBridgeError(`${path}: fingerprint ${m.fingerprint} is not the manifest's ${manifest.sidecarFingerprint}`)
    for (const [name, t] of decoded.tensors) tensors.set(opts.prefix === undefined ? name : `${opts.prefix}.${name}`, t)
    layers[entry.index] = m
  }
  return { manifest, tensors, layers }
}
