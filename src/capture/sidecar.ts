// Loading a sidecar directory: sidecar.json and weights.safetensors, every claim checked (format,
// schema, the weights' size and digest, the tensor set and shapes, the rope and profile
// fingerprints, the geometry fingerprint), then the kv path assembled from the tensors.
import { readFile } from 'node:fs/promises'
import { join, resolve } from 'node:path'
import { ConfigError, SafetensorsError } from '../errors.ts'
import { parseHeader, type Tensor } from '../formats/safetensors/index.ts'
import { LAYER_TYPES } from '../model/config.ts'
import { profileFingerprint, type NumericsProfile } from '../model/profiles/index.ts'
import { ropeFingerprint } from '../model/rope.ts'
import { sha256Hex } from '../wire/manifest.ts'
import { buildKvPath, type KvPathModel } from './kv-path.ts'
import { kvWeightSpecs, type KvWeightSpec } from './kv-weights.ts'
import { mlxCpuWeightSpecs } from './mlx-cpu/sidecar-weights.ts'
import { DEFAULT_CACHE_MATH, parseSidecarJson, SIDECAR_JSON, type CacheMathName, SIDECAR_WEIGHTS, sidecarFingerprint, type SidecarJson } from '../wire/sidecar-format.ts'

/** A loaded, verified sidecar: what a capture hook computes with. */
export interface Sidecar {
  /** The sidecar directory (absolute). */
  dir: string
  json: SidecarJson
  /** The geometry fingerprint (checked against the JSON and the weights on load). */
  fingerprint: string
  /** The decoder's numerics profile, from the sidecar. */
  profile: NumericsProfile
  /** The cache arithmetic the kv path computes with (`decoder`: the profile's own). */
  cacheMath: CacheMathName
  numLayers: number
  hiddenSize: number
  /** The engine's kv path over the exported weights. */
  kvPath: KvPathModel
}

/** Every kv-path weight the sidecar of `json` must hold, in file-independent order. */
export function sidecarWeightSpecs (json: Pick<SidecarJson, 'layers' | 'hiddenSize' | 'headDim' | 'indexHeadDim' | 'compressRates'>): KvWeightSpec[] {
  return json.layers.flatMap((l) => kvWeightSpecs(l.index, l.layerType, json))
}

async function readBytes (path: string): Promise<Uint8Array> {
  try {
    return new Uint8Array(await readFile(path))
  }
  catch (e) {
    const code = (e as NodeJS.ErrnoException).code
    const why = code === 'ENOENT' ? 'missing (is this a sidecar directory made by export-weights?)' : `cannot be read: ${code ?? (e as Error).message}`
    throw new ConfigError('(file)', why, path)
  }
}

/** The tensors of a whole safetensors file held in memory (views into `bytes`), and its metadata. */
function tensorsOf (bytes: Uint8Array, file: string): { tensors: Map<string, Tensor>, metadata: Record<string, string> } {
  if (bytes.length < 8) throw new SafetensorsError(file, `file is ${bytes.length} bytes, shorter than the 8-byte header length`)
  const n = Number(new DataView(bytes.buffer, bytes.byteOffset, 8).getBigUint64(0, true))
  if (8 + n > bytes.length) throw new SafetensorsError(file, `header length ${n} runs past the end of the file (${bytes.length} bytes)`)
  const header = parseHeader(bytes.subarray(8, 8 + n), file)
  if (8 + n + header.dataLength !== bytes.length) throw new SafetensorsError(file, `header names ${header.dataLength} data bytes but ${bytes.length - 8 - n} follow it`)
  const out = new Map<string, Tensor>()
  for (const t of header.tensors) out.set(t.name, { dtype: t.dtype, shape: [...t.shape], data: bytes.subarray(8 + n + t.begin, 8 + n + t.end) })
  return { tensors: out, metadata: header.metadata }
}

/** What the weights file must hold: the decoder profile's kv-path weights, or MLX's layout for mlx-cpu. */
function expectedTensors (json: SidecarJson): Array<{ name: string, shape: number[], dtypes: string[] }> {
  if (json.cacheMath !== undefined) {
    let specs
    try {
      specs = mlxCpuWeightSpecs(json)
    }
    catch (e) {
      throw new ConfigError('hiddenSize', (e as Error).message)
    }
    return specs.map((s) => ({ name: s.name, shape: s.shape, dtypes: [s.dtype] }))
  }
  return sidecarWeightSpecs(json).map((s) => ({ name: s.name, shape: s.shape, dtypes: s.kind === 'vector' ? ['F32'] : ['F32', 'BF16'] }))
}

/** Check the weights file holds exactly the kv-path tensors, in the right shapes and dtypes. */
function checkWeights (json: SidecarJson, tensors: ReadonlyMap<string, Tensor>, file: string): void {
  const specs = expectedTensors(json)
  const wanted = new Set(specs.map((s) => s.name))
  for (const name of tensors.keys()) {
    if (!wanted.has(name)) throw new SafetensorsError(file, `tensor ${name} is not a kv-path weight of this sidecar's layers`)
  }
  for (const spec of specs) {
    const t = tensors.get(spec.name)
    if (t === undefined) throw new SafetensorsError(file, `tensor ${spec.name} is missing`)
    if (t.shape.length !== spec.shape.length || t.shape.some((d, i) => d !== spec.shape[i])) {
      throw new SafetensorsError(file, `tensor ${spec.name} has shape [${t.shape.join(', ')}], expected [${spec.shape.join(', ')}]`)
    }
    if (!spec.dtypes.includes(t.dtype)) throw new SafetensorsError(file, `tensor ${spec.name} is ${t.dtype}, expected ${spec.dtypes.join(' or ')}`)
  }
  const listed = json.weights.tensors
  if (listed.length !== specs.length || [...listed].sort().join('\n') !== [...wanted].sort().join('\n')) {
    throw new ConfigError('weights.tensors', `does not list exactly the ${specs.length} tensors of ${SIDECAR_WEIGHTS}`, join(file, '..', SIDECAR_JSON))
  }
}

/**
 * Load and verify the sidecar in `dir`. Any mismatch (a stale or edited JSON, other weights, a
 * wrong rope table) is a ConfigError or SafetensorsError naming the file and the field.
 */
export async function loadSidecar (dir: string): Promise<Sidecar> {
  const abs = resolve(dir)
  const jsonFile = join(abs, SIDECAR_JSON)
  const json = parseSidecarJson(new TextDecoder().decode(await readBytes(jsonFile)), jsonFile)
  const weightsFile = join(abs, json.weights.file)
  const bytes = await readBytes(weightsFile)
  if (bytes.length !== json.weights.bytes) throw new ConfigError('weights.bytes', `is ${json.weights.bytes} but ${weightsFile} has ${bytes.length} bytes`, jsonFile)
  const sha = sha256Hex(bytes)
  if (sha !== json.weights.sha256) throw new ConfigError('weights.sha256', `is ${json.weights.sha256} but ${weightsFile} hashes to ${sha}`, jsonFile)
  const { tensors, metadata } = tensorsOf(bytes, weightsFile)
  checkWeights(json, tensors, weightsFile)
  const pf = profileFingerprint(json.profile)
  if (pf !== json.profileFingerprint) throw new ConfigError('profileFingerprint', `is ${json.profileFingerprint} but the profile's data hashes to ${pf}`, jsonFile)
  for (const type of LAYER_TYPES) {
    const want = ropeFingerprint(json.ropeParameters[type], json.maxPositionEmbeddings)
    if (json.ropeFingerprints[type] !== want) throw new ConfigError(`ropeFingerprints.${type}`, `is ${json.ropeFingerprints[type]} but the rope parameters give ${want}`, jsonFile)
  }
  const fingerprint = sidecarFingerprint(json, sha)
  if (fingerprint !== json.fingerprint) {
    throw new ConfigError('fingerprint', `is ${json.fingerprint} but the geometry and weights give ${fingerprint} (edited or stale sidecar: re-run export-weights)`, jsonFile)
  }
  return {
    dir: abs,
    json,
    fingerprint,
    profile: json.profile,
    cacheMath: json.cacheMath?.name ?? DEFAULT_CACHE_MATH,
    numLayers: json.layers.length,
    hiddenSize: json.hiddenSize,
    kvPath: buildKvPath(json, tensors, metadata),
  }
}
