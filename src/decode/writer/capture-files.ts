// A local capture opened for slice reads: the manifest validated against the request, every layer
// file checked against its listed size and SHA-256 (hashed as a stream, never held whole), then
// opened as a SafetensorsFile whose metadata must name the layer, T', the sidecar fingerprint and
// the block size. Rows are read at their offsets and widened to float32 (BF16 -> F32 is exact).
import { createHash } from 'node:crypto'
import { open, stat } from 'node:fs/promises'
import { join } from 'node:path'
import { CaptureIntegrityError, PdBridgeError } from '../../errors.ts'
import { SafetensorsFile, type TensorInfo } from '../../formats/safetensors/index.ts'
import { parseLayerFileMeta, type LayerFileMeta } from '../../wire/layer-file.ts'
import { readManifest, validateManifestForRequest, type CaptureManifest, type CaptureRequest } from '../../wire/manifest.ts'

/** Bytes per value of the float dtypes a layer file may hold. */
const FLOAT_BYTES: Record<string, number> = { F32: 4, BF16: 2 }

// Hashed through one reused 1 MiB buffer: no per-chunk garbage, so the open costs the same memory
// whatever the file size.
export async function sha256OfFile (path: string): Promise<string> {
  const hash = createHash('sha256')
  const fh = await open(path, 'r')
  try {
    const buffer = new Uint8Array(1 << 20)
    for (;;) {
      const { bytesRead } = await fh.read(buffer, 0, buffer.length, null)
      if (bytesRead === 0) break
      hash.update(buffer.subarray(0, bytesRead))
    }
  } finally {
    await fh.close()
  }
  return hash.digest('hex')
}

/** One opened layer file: its metadata and offset reads of its tensors. */
export class LayerFileReader {
  constructor (
    readonly index: number,
    readonly path: string,
    readonly meta: LayerFileMeta,
    private readonly file: SafetensorsFile,
  ) {}

  /** Whether the file holds tensor `name`. */
  has (name: string): boolean {
    return this.file.tensors.has(name)
  }

  private info (name: string): TensorInfo {
    const info = this.file.tensors.get(name)
    if (info === undefined) throw new PdBridgeError(`${this.path}: no tensor ${name}`)
    return info
  }

  /** The shape of tensor `name`. */
  shape (name: string): number[] {
    return [...this.info(name).shape]
  }

  /**
   * Rows [from, to) of the 2-D float tensor `name`, widened to float32; `rows` and `width`, when
   * given, are the shape it must have. `peakBytes`: the most bytes the read held at once (the raw
   * bytes and, for BF16, the widened copy; F32 values are a view of the raw bytes).
   */
  async readRows (name: string, from: number, to: number, expect?: { rows: number, width: number }): Promise<{ values: Float32Array, peakBytes: number }> {
    const info = this.info(name)
    const size = FLOAT_BYTES[info.dtype]
    if (size === undefined || info.shape.length !== 2) throw new PdBridgeError(`${this.path}: ${name} is ${info.dtype} [${info.shape.join(', ')}], expected a 2-D F32 or BF16 tensor`)
    const [rows, width] = info.shape
    if (expect !== undefined && (rows !== expect.rows || width !== expect.width)) {
      throw new PdBridgeError(`${this.path}: ${name} is [${rows}, ${width}], expected [${expect.rows}, ${expect.width}]`)
    }
    if (!(Number.isSafeInteger(from) && Number.isSafeInteger(to) && from >= 0 && from <= to && to <= rows)) {
      throw new PdBridgeError(`${this.path}: rows [${from}, ${to}) of ${name} are outside its ${rows} rows`)
    }
    if (to === from) return { values: new Float32Array(0), peakBytes: 0 }
    const raw = await this.file.readRange(name, from * width * size, to * width * size)
    if (info.dtype === 'F32') return { values: new Float32Array(raw.buffer, raw.byteOffset, raw.byteLength / 4), peakBytes: raw.byteLength }
    const codes = new Uint16Array(raw.buffer, raw.byteOffset, raw.byteLength / 2)
    const values = new Float32Array(codes.length)
    const bits = new Uint32Array(values.buffer)
    for (let i = 0; i < codes.length; i++) bits[i] = codes[i] << 16
    return { values, peakBytes: raw.byteLength + values.byteLength }
  }

  /** The single value of the I64 [1] tensor `name`. */
  async readCount (name: string): Promise<number> {
    const info = this.info(name)
    if (info.dtype !== 'I64' || info.shape.length !== 1 || info.shape[0] !== 1) throw new PdBridgeError(`${this.path}: ${name} is ${info.dtype} [${info.shape.join(', ')}], expected I64 [1]`)
    const raw = await this.file.readRange(name, 0, 8)
    return Number(new DataView(raw.buffer, raw.byteOffset, 8).getBigInt64(0, true))
  }

  /** Close the file. */
  async close (): Promise<void> {
    await this.file.close()
  }
}

/** A validated capture, every layer file open. */
export interface OpenedCapture {
  dir: string
  manifest: CaptureManifest
  layers: LayerFileReader[]
  close: () => Promise<void>
}

/**
 * Open the capture in `dir` for the request (T, fingerprint). It must be sealed done or partial,
 * list every one of `numLayers` layers, and each file must match its listed size and SHA-256 and
 * say it holds that layer at T' under the fingerprint; with blocks to write (T' >= blockSize) each
 * must carry boundary snapshots at `blockSize`. Anything else is a PdBridgeError naming the file.
 */
export async function openCaptureFiles (dir: string, request: CaptureRequest, numLayers: number, blockSize: number): Promise<OpenedCapture> {
  const manifest = await readManifest(dir)
  const source = join(dir, 'manifest.json')
  validateManifestForRequest(manifest, request, source)
  if (manifest.numLayers !== numLayers || manifest.layers.length !== numLayers) {
    throw new PdBridgeError(`${source}: lists ${manifest.layers.length} of ${manifest.numLayers} layer files, the decoder has ${numLayers} layers`)
  }
  const layers: LayerFileReader[] = []
  const close = async (): Promise<void> => { await Promise.all(layers.map(async (l) => await l.close())) }
  try {
    for (const entry of manifest.layers) {
      const path = join(dir, entry.file)
      const size = (await stat(path).catch(() => { throw new PdBridgeError(`${path}: listed in the manifest but missing`) })).size
      if (size !== entry.bytes) throw new CaptureIntegrityError(path, `${size} bytes, the manifest lists ${entry.bytes}`)
      const sha = await sha256OfFile(path)
      if (sha !== entry.sha256) throw new CaptureIntegrityError(path, `SHA-256 ${sha} does not match the manifest's ${entry.sha256}`)
      const file = await SafetensorsFile.open(path)
      const reader = new LayerFileReader(entry.index, path, parseLayerFileMeta(file.metadata, path), file)
      layers.push(reader)
      const m = reader.meta
      if (m.layer !== entry.index) throw new PdBridgeError(`${path}: holds layer ${m.layer}, the manifest lists it as layer ${entry.index}`)
      if (m.tokens !== manifest.sealedLength) throw new PdBridgeError(`${path}: covers ${m.tokens} tokens, the manifest's sealed length is ${manifest.sealedLength}`)
      if (m.fingerprint !== manifest.sidecarFingerprint) throw new PdBridgeError(`${path}: fingerprint ${m.fingerprint} is not the manifest's ${manifest.sidecarFingerprint}`)
      if (m.startToken !== manifest.startToken) {
        throw new PdBridgeError(`${path}: continues from token ${m.startToken ?? 0}, the manifest's capture from ${manifest.startToken ?? 0}`)
      }
      if (manifest.sealedLength - (manifest.startToken ?? 0) >= blockSize && m.blockSize !== blockSize) {
        throw new PdBridgeError(`${path}: ${m.blockSize === undefined ? 'holds no boundary snapshots' : `holds boundary snapshots every ${m.blockSize} tokens`}, the store's blocks need them every ${blockSize}`)
      }
    }
  } catch (e) {
    await close()
    throw e
  }
  return { dir, manifest, layers, close }
}
