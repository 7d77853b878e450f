// export-weights: the decoder's kv-path weights, exactly as the decoder holds them after its own
// quantisation (prepareWeights under the decoder's profile), plus sidecar.json. Only the kv-path
// tensors are read from the checkpoint; experts, queries and the head are never loaded.
import { mkdir } from 'node:fs/promises'
import { join, resolve } from 'node:path'
import { CheckpointError } from '../errors.ts'
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
import { SIDECAR_FORMAT, SIDECAR_JSON, SIDECAR_WEIGHTS, sidecarFingerprint, type SidecarJson } from '../wire/sidecar-format.ts'

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
  const modelDir = resolve(opts.model)
  const cfg = await loadDeepseekV4Config(modelDir)
  const base = geometryJson(cfg, profile, blockSize)
  const specs = sidecarWeightSpecs(base)
  const store = await readKvTensors(modelDir, cfg, specs.map((s) => s.name))
  const prepared = prepareWeights(store, cfg, profile)
  const tensors = new Map<string, Tensor>()
  for (const spec of specs) {
    opts.onTensor?.(tensors.size, specs.length)
    const shape = store.shape(spec.name)
    if (shape.length !== spec.shape.length || shape.some((d, i) => d !== spec.shape[i])) {
      throw new CheckpointError(spec.name, `has shape [${shape.join(', ')}], the config implies [${spec.shape.join(', ')}]`, modelDir)
    }
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
  opts.onTensor?.(tensors.size, specs.length)
  const bytes = serializeSafetensors(tensors, { producer: 'pd-bridge export-weights', profile: profile.name, format: SIDECAR_FORMAT })
  const sha256 = sha256Hex(bytes)
  const json: SidecarJson = {
    ...base,
    weights: { file: SIDECAR_WEIGHTS, bytes: bytes.length, sha256, tensors: specs.map((s) => s.name) },
    fingerprint: sidecarFingerprint(base, sha256),
  }
  const out = resolve(opts.out)
  await mkdir(out, { recursive: true })
  await writeFileAtomic(join(out, SIDECAR_WEIGHTS), bytes)
  await writeFileAtomic(join(out, SIDECAR_JSON), new TextEncoder().encode(JSON.stringify(json, null, 2) + '\n'))
  return loadSidecar(out)
}
