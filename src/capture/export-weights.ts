// export-weights: the decoder's kv-path weights, exactly as the decoder holds them after its own
// quantisation (prepareWeights under the decoder's profile), plus sidecar.json. Only the kv-path
// tensors are read from the checkpoint; experts, queries and the head are never loaded.
import { mkdir } from 'node:fs/promises'
import { join, resolve } from 'node:path'
import { CheckpointError, ConfigError } from '../errors.ts'
import { writeFileAtomic } from '../formats/atomic-file.ts'
import { serializeSafetensors, tensorFrom, type Tensor } from '../formats/safetensors/index.ts'
import { checkBlockSize, DEFAULT_BLOCK_SIZE } from '../wire/block-size.ts'
import { readCheckpointTensors, WeightStore } from '../model/checkpoint/index.ts'
import { LAYER_TYPES, loadDeepseekV4Config, type DeepseekV4Config, type LayerType, type RopeParams } from '../model/config.ts'
import { getProfile, profileFingerprint, type NumericsProfile } from '../model/profiles/index.ts'
import { ropeFingerprint } from '../model/rope.ts'
import { exactBf16Codes } from '../kernels/index.ts'
import { prepareWeights } from '../model/weights/index.ts'
import { sha256Hex } from '../wire/manifest.ts'
import { loadSidecar, sidecarWeightSpecs, type Sidecar } from './sidecar.ts'
import {
  CACHE_MATHS, checkSidecarJson, DEFAULT_CACHE_MATH, SIDECAR_FORMAT, SIDECAR_JSON, SIDECAR_WEIGHTS, sidecarFingerprint,
  type CacheMathName, type SidecarJson,
} from '../wire/sidecar-format.ts'
import { MLX_CPU, type RoundingPoints } from '../numerics/mlx-cpu/rounding-points.ts'
import type { KvWeightSpec } from './kv-weights.ts'
import { mlxCpuCacheWeightsFromCheckpoint } from './mlx-cpu/from-checkpoint.ts'
import { mlxCpuWeightSpecs, mlxCpuWeightTensors } from './mlx-cpu/sidecar-weights.ts'

/** What export-weights is asked to do. */
export interface ExportWeightsOptions {
  /** A checkpoint directory (config.json + safetensors). */
  model: string
  /** The decoder's numerics profile: a name (docs/profiles.md) or the profile data. */
  profile: string | NumericsProfile
  /** The sidecar directory to write (created if absent; its two files are replaced). */
  out: string
  /** The decoder block store's block size in tokens (default 2048). */
  blockSize?: number
  /**
   * The cache arithmetic (default `decoder`: the profile's kv path). `mlx-cpu` exports the cache
   * path's weights as mlx_lm.convert quantizes them and records MLX's CPU rounding points.
   */
  cacheMath?: CacheMathName
  /** Called after each sidecar tensor is prepared (for progress). */
  onTensor?: (done: number, total: number) => void
}


/** The JSON fields that describe the decoder (everything but the weights' entry and the fingerprint); tests build sidecars from it too. */
export function geometryJson (cfg: DeepseekV4Config, profile: NumericsProfile, blockSize: number): Omit<SidecarJson, 'weights' | 'fingerprint'> {
  const rope = (type: LayerType): RopeParams => ({ ...(type === 'sliding_attention' ? cfg.rope.main : cfg.rope.compress) })
  const ropeParameters = Object.fromEntries(LAYER_TYPES.map((t) => [t, rope(t)])) as Record<LayerType, RopeParams>
  return {
    format: SIDECAR_FORMAT,
    profile: JSON.parse(JSON.stringify(profile)) as NumericsProfile,
    profileFingerprint: profileFingerprint(profile),
    hiddenSize: cfg.hiddenSize,
    headDim: cfg.headDim,
    ropeDim: cfg.qkRopeHeadDim,
    indexHeadDim: cfg.indexHeadDim,
    rmsNormEps: cfg.rmsNormEps,
    slidingWindow: cfg.slidingWindow,
    maxPositionEmbeddings: cfg.maxPositionEmbeddings,
    blockSize,
    compressRates: { ...cfg.compressRates },
    layers: cfg.layerTypes.map((layerType, index) => ({ index, layerType, compressRatio: cfg.compressRatios[index] })),
    ropeParameters,
    ropeFingerprints: Object.fromEntries(LAYER_TYPES.map((t) => [t, ropeFingerprint(ropeParameters[t], cfg.maxPositionEmbeddings)])) as Record<LayerType, string>,
  }
}

/** Read only the named (internal) tensors of a checkpoint, under whichever naming it uses, into a WeightStore. */
async function readKvTensors (dir: string, cfg: DeepseekV4Config, names: string[]): Promise<WeightStore> {
  const { tensors } = await readCheckpointTensors(dir, cfg, names)
  return new WeightStore(tensors, dir)
}

/**
 * Export the decoder's kv-path weights of `model` under `profile` into `out`: weights.safetensors
 * (linears as the profile holds them: BF16 codes where the held values are bf16 values, else F32;
 * vectors as F32 after the profile's vector rounding) and sidecar.json. The weights land first,
 * the JSON last, so a directory with a sidecar.json is complete. Returns the loaded sidecar.
 */
export async function exportWeights (opts: ExportWeightsOptions): Promise<Sidecar> {
  const profile = typeof opts.profile === 'string' ? getProfile(opts.profile) : opts.profile
  const blockSize = opts.blockSize ?? DEFAULT_BLOCK_SIZE
  // Positive here; the pool ratios are the block store's rule, checked where one is opened (a
  // llama.cpp store's states end at any boundary).
  checkBlockSize(blockSize, [], 'blockSize')
  const cacheMath = opts.cacheMath ?? DEFAULT_CACHE_MATH
  if (!(CACHE_MATHS as readonly string[]).includes(cacheMath)) throw new ConfigError('cacheMath', `is ${JSON.stringify(cacheMath)}, expected one of ${CACHE_MATHS.join(', ')}`)
  const modelDir = resolve(opts.model)
  const cfg = await loadDeepseekV4Config(modelDir)
  const record = cacheMath === 'mlx-cpu' ? { name: 'mlx-cpu' as const, rounding: JSON.parse(JSON.stringify(MLX_CPU)) as RoundingPoints } : undefined
  const base = { ...geometryJson(cfg, profile, blockSize), ...(record === undefined ? {} : { cacheMath: record }) }
  // The cross-field rules (a bf16-activation profile for mlx-cpu among them) before any tensor is read.
  checkSidecarJson({ ...base, weights: { file: SIDECAR_WEIGHTS, bytes: 1, sha256: '0'.repeat(64), tensors: [] }, fingerprint: '0'.repeat(64) })
  const kvSpecs = sidecarWeightSpecs(base)
  const store = await readKvTensors(modelDir, cfg, kvSpecs.map((s) => s.name))
  for (const spec of kvSpecs) {
    const shape = store.shape(spec.name)
    if (shape.length !== spec.shape.length || shape.some((d, i) => d !== spec.shape[i])) {
      throw new CheckpointError(spec.name, `has shape [${shape.join(', ')}], the config implies [${spec.shape.join(', ')}]`, modelDir)
    }
  }
  const { tensors, metadata } = record === undefined
    ? decoderTensors(store, cfg, profile, kvSpecs, modelDir, opts.onTensor)
    : mlxCpuTensors(store, cfg, base, modelDir)
  opts.onTensor?.(tensors.size, tensors.size)
  const bytes = serializeSafetensors(tensors, { producer: 'pd-bridge export-weights', profile: profile.name, format: SIDECAR_FORMAT, ...metadata })
  const sha256 = sha256Hex(bytes)
  const json: SidecarJson = {
    ...base,
    weights: { file: SIDECAR_WEIGHTS, bytes: bytes.length, sha256, tensors: [...tensors.keys()] },
    fingerprint: sidecarFingerprint(base, sha256),
  }
  const out = resolve(opts.out)
  await mkdir(out, { recursive: true })
  await writeFileAtomic(join(out, SIDECAR_WEIGHTS), bytes)
  await writeFileAtomic(join(out, SIDECAR_JSON), new TextEncoder().encode(JSON.stringify(json, null, 2) + '\n'))
  return loadSidecar(out)
}

interface ExportedTensors { tensors: Map<string, Tensor>, metadata: Record<string, string> }

/** The decoder's kv-path weights as its profile holds them. */
function decoderTensors (store: WeightStore, cfg: DeepseekV4Config, profile: NumericsProfile, specs: KvWeightSpec[], modelDir: string,
  onTensor: ExportWeightsOptions['onTensor']): ExportedTensors {
  const prepared = prepareWeights(store, cfg, profile)
  const tensors = new Map<string, Tensor>()
  for (const spec of specs) {
    onTensor?.(tensors.size, specs.length)
    if (spec.kind === 'vector') {
      tensors.set(spec.name, tensorFrom('F32', spec.shape, Float32Array.from(prepared.vector(spec.name))))
      continue
    }
    const linear = prepared.linear(spec.name)
    const values = linear.values()
    if (linear.container === 'bf16') {
      const codes = exactBf16Codes(values)
      if (codes === null) throw new CheckpointError(spec.name, 'held in a bf16 container but its values are not all bf16 values', modelDir)
      tensors.set(spec.name, tensorFrom('BF16', spec.shape, codes))
    } else {
      tensors.set(spec.name, tensorFrom('F32', spec.shape, values))
    }
  }
  return { tensors, metadata: {} }
}

/**
 * The cache path's weights as MLX holds them after mlx_lm.convert's bf16 cast and quantization
 * (mxfp8 g32 wkv, affine 8-bit g64 compressors: src/capture/mlx-cpu/from-checkpoint.ts), in MLX's
 * names and layout, with the whole model's quantization table as the file's metadata.
 */
function mlxCpuTensors (store: WeightStore, cfg: DeepseekV4Config, base: Parameters<typeof mlxCpuWeightSpecs>[0], modelDir: string): ExportedTensors {
  let specs
  try {
    specs = mlxCpuWeightSpecs(base)
  }
  catch (e) {
    throw new ConfigError('hidden_size', (e as Error).message, join(modelDir, 'config.json'))
  }
  const weights = mlxCpuCacheWeightsFromCheckpoint({ config: cfg, weights: store })
  const built = mlxCpuWeightTensors(weights)
  const tensors = new Map<string, Tensor>()
  for (const spec of specs) {
    const t = built.get(spec.name)
    if (t === undefined) throw new CheckpointError(spec.name, 'is not among the cache path\'s weights built from this checkpoint', modelDir)
    tensors.set(spec.name, t)
  }
  return { tensors, metadata: { quantization: weights.metadata.quantization } }
}
