// One capture layer file: a safetensors file holding one layer's cache for the sealed prefix, under
// ModelCache.tensors' names without the prefix (`layers.{i}.window`, `layers.{i}.compressor.
// compressed_kv`, ...). Float tensors are BF16 when the decoder holds bf16 activations and every
// value is a bf16 value (then widening back is exact), else F32; entry counts are I64 [1].
// A file with boundary snapshots also holds, for every multiple b of its `block_size` metadata up
// to T', the layer's window, buffers and carries at b under `layers.{i}.boundary.{b}.`; a file
// without `block_size` holds none (a capture shorter than one block).
// Layer files are written synchronously from inside the hook, so a layer's memory is free the
// moment its file lands, even while a synchronous forward is still running.
// The format sits in the wire layer: the capture session and the block writer's spool write these
// files, readCapture and the block writer read them.
import { closeSync, fsyncSync, openSync, renameSync, rmSync, writeSync } from 'node:fs'
import { dirname } from 'node:path'
import { randomBytes } from 'node:crypto'
import { PdBridgeError, SafetensorsError } from '../errors.ts'
import { parseHeader, serializeSafetensors, tensorFrom, viewAs, type Tensor } from '../formats/safetensors/index.ts'
import type { DumpTensor, LayerCache } from '../model/engine/cache.ts'
import { boundaryTensors, type BoundarySnapshot } from './boundary.ts'

/** The `format` metadata value of a capture layer file. */
export const LAYER_FILE_FORMAT = 'pd-bridge-capture-layer/1'

/** What a layer file says about itself (string metadata). */
export interface LayerFileMeta {
  layer: number
  layerType: string
  /** T': the tokens the layer's cache covers. */
  tokens: number
  /** The sidecar's geometry fingerprint. */
  fingerprint: string
  profile: string
  /** The boundary snapshot interval (the sidecar's block size), when the file holds snapshots. */
  blockSize?: number
  /**
   * P, when the file continues a cache of tokens [0, P): its pooled rows are those from P / ratio,
   * its snapshots those past P (the capture manifest's startToken). Absent: from 0.
   */
  startToken?: number
}

/** Whether every value is exactly a bf16 value (low 16 bits zero, NaN payloads included). */
export function isBf16Exact (values: Float32Array): boolean {
  const bits = new Uint32Array(values.buffer, values.byteOffset, values.length)
  for (let i = 0; i < bits.length; i++) if ((bits[i] & 0xffff) !== 0) return false
  return true
}

/** The bf16 codes of `values` when every value is exactly a bf16 value (isBf16Exact), else null. */
export function exactBf16 (values: Float32Array): Uint16Array | null {
  if (!isBf16Exact(values)) return null
  const bits = new Uint32Array(values.buffer, values.byteOffset, values.length)
  const codes = new Uint16Array(values.length)
  for (let i = 0; i < bits.length; i++) codes[i] = bits[i] >>> 16
  return codes
}

/** The tensors of a layer cache, and of its boundary snapshots when given, in file form (see the file comment). */
export function layerFileTensors (layer: number, state: LayerCache, bf16: boolean, snapshots: readonly BoundarySnapshot[] = []): Map<string, Tensor> {
  const out = new Map<string, Tensor>()
  const all = [state.tensors(`layers.${layer}`), ...snapshots.map((s) => boundaryTensors(layer, s))]
  for (const [name, t] of all.flatMap((m) => [...m])) out.set(name, fileTensor(t, bf16))
  return out
}

/** A cache tensor in file form: I64 as it is; floats BF16 when `bf16` and every value is a bf16 value, else F32. */
export function fileTensor (t: DumpTensor, bf16: boolean): Tensor {
  if (t.dtype === 'I64') return tensorFrom('I64', t.shape, t.data)
  const codes = bf16 ? exactBf16(t.data) : null
  return codes === null ? tensorFrom('F32', t.shape, t.data) : tensorFrom('BF16', t.shape, codes)
}

/**
 * The bytes of one layer file; with `snapshots` (every boundary up to meta.tokens, in order) also
 * their tensors, and meta.blockSize is then required.
 */
export function encodeLayerFile (state: LayerCache, meta: LayerFileMeta, bf16: boolean, snapshots: readonly BoundarySnapshot[] = []): Uint8Array {
  if (snapshots.length > 0 && meta.blockSize === undefined) throw new PdBridgeError(`layer ${meta.layer}: boundary snapshots need the block size in the file's metadata`)
  return serializeSafetensors(layerFileTensors(meta.layer, state, bf16, snapshots), layerFileMetadata(meta))
}

/** A layer file's string metadata (format tag first; `block_size` only when the file holds snapshots). */
export function layerFileMetadata (meta: LayerFileMeta): Record<string, string> {
  const metadata: Record<string, string> = {
    format: LAYER_FILE_FORMAT,
    layer: String(meta.layer),
    layer_type: meta.layerType,
    tokens: String(meta.tokens),
    fingerprint: meta.fingerprint,
    profile: meta.profile,
  }
  if (meta.blockSize !== undefined) metadata.block_size = String(meta.blockSize)
  if (meta.startToken !== undefined) metadata.start_token = String(meta.startToken)
  return metadata
}

/** A decoded layer file: its metadata and its tensors as dump tensors (BF16 widened exactly to F32). */
export interface DecodedLayerFile {
  meta: LayerFileMeta
  tensors: Map<string, DumpTensor>
}

/** A layer file's metadata, checked (format tag, integer fields); `file` names errors. */
export function parseLayerFileMeta (m: Record<string, string>, file: string): LayerFileMeta {
  if (m.format !== LAYER_FILE_FORMAT) throw new SafetensorsError(file, `metadata format is ${JSON.stringify(m.format) ?? 'missing'}, expected ${LAYER_FILE_FORMAT}`)
  const int = (key: string): number => {
    const v = m[key]
    if (v === undefined || !/^\d+$/.test(v)) throw new SafetensorsError(file, `metadata ${key} must be a non-negative integer, found ${JSON.stringify(v) ?? 'nothing'}`)
    return Number(v)
  }
  const meta: LayerFileMeta = { layer: int('layer'), layerType: m.layer_type ?? '', tokens: int('tokens'), fingerprint: m.fingerprint ?? '', profile: m.profile ?? '' }
  if (m.block_size !== undefined) {
    meta.blockSize = int('block_size')
    if (meta.blockSize < 1) throw new SafetensorsError(file, 'metadata block_size must be a positive integer, found "0"')
  }
  if (m.start_token !== undefined) {
    meta.startToken = int('start_token')
    if (meta.startToken < 1 || meta.startToken > meta.tokens) throw new SafetensorsError(file, `metadata start_token must be in [1, tokens ${meta.tokens}], found ${JSON.stringify(m.start_token)}`)
  }
  return meta
}

/** Parse the bytes of a layer file; `file` names errors. */
export function decodeLayerFile (bytes: Uint8Array, file: string): DecodedLayerFile {
  if (bytes.length < 8) throw new SafetensorsError(file, `file is ${bytes.length} bytes, shorter than the 8-byte header length`)
  const n = Number(new DataView(bytes.buffer, bytes.byteOffset, 8).getBigUint64(0, true))
  if (8 + n > bytes.length) throw new SafetensorsError(file, `header length ${n} runs past the end of the file (${bytes.length} bytes)`)
  const header = parseHeader(bytes.subarray(8, 8 + n), file)
  if (8 + n + header.dataLength !== bytes.length) throw new SafetensorsError(file, `header names ${header.dataLength} data bytes but ${bytes.length - 8 - n} follow it`)
  const meta = parseLayerFileMeta(header.metadata, file)
  const tensors = new Map<string, DumpTensor>()
  for (const info of header.tensors) {
    const t: Tensor = { dtype: info.dtype, shape: [...info.shape], data: bytes.subarray(8 + n + info.begin, 8 + n + info.end) }
    if (!info.name.startsWith(`layers.${meta.layer}.`)) throw new SafetensorsError(file, `tensor ${info.name} does not belong to layer ${meta.layer}`)
    if (t.dtype === 'I64') tensors.set(info.name, { dtype: 'I64', shape: t.shape, data: viewAs(t, 'I64').slice() })
    else if (t.dtype === 'F32') tensors.set(info.name, { dtype: 'F32', shape: t.shape, data: viewAs(t, 'F32').slice() })
    else if (t.dtype === 'BF16') {
      const codes = viewAs(t, 'BF16')
      const data = new Float32Array(codes.length)
      const bits = new Uint32Array(data.buffer)
      for (let i = 0; i < codes.length; i++) bits[i] = codes[i] << 16
      tensors.set(info.name, { dtype: 'F32', shape: t.shape, data })
    }
    else throw new SafetensorsError(file, `tensor ${info.name} is ${t.dtype}; a capture layer file holds F32, BF16 and I64 only`)
  }
  return { meta, tensors }
}

/**
 * Write `bytes` to `path` so it appears complete or not at all, synchronously: a temporary sibling
 * (a name not ending in .safetensors), fsync, rename, then fsync the directory (best effort).
 */
export function writeFileAtomicSync (path: string, bytes: Uint8Array): void {
  writeFileAtomicSyncStreamed(path, (write) => write(bytes))
}

/**
 * writeFileAtomicSync with the bytes made piece by piece: `fill(write)` passes them to `write` in
 * file order (a streaming capture's layer file, far larger than what it holds in memory).
 */
export function writeFileAtomicSyncStreamed (path: string, fill: (write: (chunk: Uint8Array) => void) => void): void {
  const temp = `${path}.partial-${process.pid}-${randomBytes(6).toString('hex')}`
  let fd: number
  try {
    fd = openSync(temp, 'wx')
  }
  catch (e) {
    throw new PdBridgeError(`${path}: cannot create the layer file: ${(e as NodeJS.ErrnoException).code ?? (e as Error).message}`)
  }
  try {
    fill((bytes) => {
      let off = 0
      while (off < bytes.length) off += writeSync(fd, bytes, off, bytes.length - off)
    })
    fsyncSync(fd)
  }
  catch (e) {
    closeSync(fd)
    rmSync(temp, { force: true })
    if (e instanceof PdBridgeError) throw e
    throw new PdBridgeError(`${path}: writing the layer file failed: ${(e as NodeJS.ErrnoException).code ?? (e as Error).message}`)
  }
  closeSync(fd)
  renameSync(temp, path)
  try {
    const dfd = openSync(dirname(path), 'r')
    try {
      fsyncSync(dfd)
    }
    finally {
      closeSync(dfd)
    }
  }
  catch {
    // Some platforms cannot fsync a directory; the rename already happened.
  }
}
