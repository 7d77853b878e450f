// The carry: the decoder's cache at a block boundary P, as one safetensors file the front door sends
// the prefill engine so a prompt that grew past what the decoder has stored is prefilled from P, not
// from 0 (docs/warm-extend.md). It holds, per layer, the boundary snapshot at P (window, buffers,
// overlap carries and the raw previous window, under the layer file's `layers.{i}.boundary.{P}.`
// names) and every pooled row below P (`layers.{i}.{pool}.compressed_kv`). That is the whole resume
// state: mounted, it is the cache a native prefill of tokens [0, P) leaves, bit for bit, so both the
// engine (under the decoder's profile) and the capture hook continue from it exactly.
import { PdBridgeError } from '../errors.ts'
import { SafetensorsFile, serializeSafetensors, tensorFrom, type Tensor } from '../formats/safetensors/index.ts'
import { ModelCache, type CompressorState, type DumpTensor, type LayerCache } from '../model/engine/cache.ts'
import { poolTensorNames } from '../model/engine/cache-layout.ts'
import { boundaryPrefix, boundaryTensors } from '../wire/boundary.ts'
import { takeBoundarySnapshot } from './boundary.ts'

/** The `format` metadata value of a carry file. */
export const CARRY_FORMAT = 'pd-bridge-carry/1'

/** What a carry file says about itself. */
export interface CarryMeta {
  /** P: the tokens the cache covers (a block boundary). */
  tokens: number
  /** The sidecar geometry fingerprint the cache was computed under (the decoder's). */
  fingerprint: string
  profile: string
  numLayers: number
}

function pools (layer: LayerCache): Array<['compressor' | 'indexer', CompressorState]> {
  const out: Array<['compressor' | 'indexer', CompressorState]> = []
  if (layer.compressor !== null) out.push(['compressor', layer.compressor])
  if (layer.indexer !== null) out.push(['indexer', layer.indexer])
  return out
}

/** The bytes of the carry of `cache` (every layer at cache.tokenCount), float32 throughout. */
export function encodeCarry (cache: ModelCache, meta: Omit<CarryMeta, 'tokens' | 'numLayers'>): Uint8Array {
  const p = cache.tokenCount
  if (!Number.isSafeInteger(p) || p < 1) throw new PdBridgeError(`carry: the cache holds ${String(p)} tokens; a carry needs at least one`)
  const out = new Map<string, Tensor>()
  const put = (name: string, t: DumpTensor): void => { out.set(name, t.dtype === 'I64' ? tensorFrom('I64', t.shape, t.data) : tensorFrom('F32', t.shape, t.data)) }
  cache.layers.forEach((layer, i) => {
    for (const [name, t] of boundaryTensors(i, takeBoundarySnapshot(layer, p))) put(name, t)
    for (const [name, pool] of pools(layer)) {
      put(poolTensorNames(`layers.${i}.${name}`).compressedKv, { dtype: 'F32', shape: [pool.entryCount, pool.dim], data: pool.entries.view().slice() })
    }
  })
  return serializeSafetensors(out, {
    format: CARRY_FORMAT, tokens: String(p), fingerprint: meta.fingerprint, profile: meta.profile, num_layers: String(cache.layers.length),
  })
}

/** A carry file's metadata, checked; `file` names errors. */
export function parseCarryMeta (m: Record<string, string>, file: string): CarryMeta {
  if (m.format !== CARRY_FORMAT) throw new PdBridgeError(`${file}: metadata format is ${JSON.stringify(m.format) ?? 'missing'}, expected ${CARRY_FORMAT}`)
  const int = (key: string): number => {
    const v = m[key]
    if (v === undefined || !/^[1-9]\d*$/.test(v)) throw new PdBridgeError(`${file}: metadata ${key} must be a positive integer, found ${JSON.stringify(v) ?? 'nothing'}`)
    return Number(v)
  }
  return { tokens: int('tokens'), fingerprint: m.fingerprint ?? '', profile: m.profile ?? '', numLayers: int('num_layers') }
}

async function floats (file: SafetensorsFile, name: string, rows: number, width: number): Promise<Float32Array> {
  const info = file.tensors.get(name)
  if (info === undefined) throw new PdBridgeError(`carry: no tensor ${name}`)
  if (info.dtype !== 'F32' || info.shape.length !== 2 || info.shape[0] !== rows || info.shape[1] !== width) {
    throw new PdBridgeError(`carry: ${name} is ${info.dtype} [${info.shape.join(', ')}], expected F32 [${rows}, ${width}]`)
  }
  const raw = await file.readRange(name, 0, rows * width * 4)
  return new Float32Array(raw.buffer.slice(raw.byteOffset, raw.byteOffset + raw.byteLength))
}

async function count (file: SafetensorsFile, name: string): Promise<number> {
  const info = file.tensors.get(name)
  if (info === undefined || info.dtype !== 'I64' || info.shape.length !== 1 || info.shape[0] !== 1) throw new PdBridgeError(`carry: ${name} must be I64 [1]`)
  const raw = await file.readRange(name, 0, 8)
  return Number(new DataView(raw.buffer, raw.byteOffset, 8).getBigInt64(0, true))
}

async function mountPool (file: SafetensorsFile, layer: number, name: 'compressor' | 'indexer', state: CompressorState, p: number): Promise<void> {
  const at = `${boundaryPrefix(layer, p)}.${name}`
  const entries = Math.floor(p / state.ratio)
  const n = await count(file, `${at}.entry_count`)
  if (n !== entries) throw new PdBridgeError(`carry: ${at}.entry_count is ${n}, ${p} tokens at ratio ${state.ratio} make ${entries}`)
  const pooled = await floats(file, poolTensorNames(`layers.${layer}.${name}`).compressedKv, entries, state.dim)
  for (let r = 0; r < entries; r++) state.entries.append(pooled.subarray(r * state.dim, (r + 1) * state.dim))
  const buffered = p % state.ratio
  state.bufferLength = buffered
  state.bufferKv.set(await floats(file, `${at}.buffer_kv`, buffered, state.width))
  state.bufferGate.set(await floats(file, `${at}.buffer_gate`, buffered, state.width))
  if (!state.overlap || entries === 0) return
  // The derived overlap carry is optional (a cache restored from blocks may not have filled it: the
  // engine derives it from the previous window when it next pools); the previous window is not.
  if (file.tensors.has(`${at}.overlap_kv`)) {
    state.overlapKv = await floats(file, `${at}.overlap_kv`, state.ratio, state.dim)
    state.overlapGate = await floats(file, `${at}.overlap_gate`, state.ratio, state.dim)
  }
  state.prevWindowKv = await floats(file, `${at}.prev_window_kv`, state.ratio, state.width)
  state.prevWindowGate = await floats(file, `${at}.prev_window_gate`, state.ratio, state.width)
}

/**
 * Fill `into` (an empty cache of the decoder's layout: the engine's newCache(), or the hook's) from
 * the open carry file: every layer at P = its metadata's tokens. Throws naming what does not fit.
 */
export async function mountCarry (file: SafetensorsFile, into: ModelCache, path = 'carry'): Promise<ModelCache> {
  const meta = parseCarryMeta(file.metadata, path)
  if (meta.numLayers !== into.layers.length) throw new PdBridgeError(`${path}: holds ${meta.numLayers} layers, the cache has ${into.layers.length}`)
  if (into.tokenCount !== 0) throw new PdBridgeError(`${path}: a carry mounts only into an empty cache, this one holds ${into.tokenCount} tokens`)
  const p = meta.tokens
  for (const [i, layer] of into.layers.entries()) {
    const rows = Math.min(p, layer.windowRowsMax)
    layer.window.set(await floats(file, `${boundaryPrefix(i, p)}.window`, rows, layer.headDim))
    layer.windowLength = rows
    for (const [name, pool] of pools(layer)) await mountPool(file, i, name, pool, p)
  }
  into.tokenCount = p
  return into
}
