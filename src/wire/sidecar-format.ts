// The sidecar's JSON: what the capture hook knows about the decoder, and nothing more. A sidecar
// directory holds `sidecar.json` (this) and `weights.safetensors` (the decoder's kv-path weights as
// it holds them after its own quantisation). The geometry fingerprint is the block store's
// (src/wire/geometry.ts), with the exported weights' digest folded into its profile field.
import { z } from 'zod'
import { ConfigError } from '../errors.ts'
import { Geometry } from './geometry.ts'
import { LAYER_TYPES, type LayerType, type RopeParams } from '../model/config.ts'
import { WEIGHT_FORMATS, WEIGHT_GROUPS, type NumericsProfile, type WeightFormat, type WeightGroup } from '../model/profiles/types.ts'
import type { RoundingPoints } from '../numerics/mlx-cpu/rounding-points.ts'

/** The format tag of sidecar.json; a reader refuses any other version by name. */
export const SIDECAR_FORMAT = 'pd-bridge-sidecar/1'
/** The JSON file of a sidecar directory. */
export const SIDECAR_JSON = 'sidecar.json'
/** The weights file of a sidecar directory. */
export const SIDECAR_WEIGHTS = 'weights.safetensors'

/** One decoder layer as the hook sees it. */
export interface SidecarLayer {
  index: number
  layerType: LayerType
  /** 0 for sliding layers, the CSA or HCA ratio otherwise. */
  compressRatio: number
}

/** The cache arithmetics a deployment can choose (docs/capture.md, "Cache math"). */
export const CACHE_MATHS = ['decoder', 'mlx-cpu'] as const
export type CacheMathName = typeof CACHE_MATHS[number]
/** Today's path, and what a sidecar without a `cacheMath` field means. */
export const DEFAULT_CACHE_MATH: CacheMathName = 'decoder'

/**
 * A sidecar's cache arithmetic other than the decoder's own: MLX's CPU arithmetic (oMLX's cache,
 * docs/mlx-cpu-arithmetic.md) with the rounding points it was exported for, as data.
 */
export interface SidecarCacheMath {
  name: 'mlx-cpu'
  rounding: RoundingPoints
}

/** The contents of sidecar.json (format `pd-bridge-sidecar/1`). */
export interface SidecarJson {
  format: typeof SIDECAR_FORMAT
  /** The decoder's numerics profile, as data: the hook computes with exactly this. */
  profile: NumericsProfile
  /** profileFingerprint(profile): compare it with the decoder's own profile. */
  profileFingerprint: string
  hiddenSize: number
  headDim: number
  /** qk_rope_head_dim: the trailing channels rope rotates. */
  ropeDim: number
  indexHeadDim: number
  rmsNormEps: number
  /** The sliding window (a layer's window holds window - 1 rows). */
  slidingWindow: number
  maxPositionEmbeddings: number
  /** The decoder block store's block size in tokens. */
  blockSize: number
  compressRates: { csa: number, hca: number }
  layers: SidecarLayer[]
  /** Rope parameters per layer type (sliding: the main table; CSA and HCA: the compress table). */
  ropeParameters: Record<LayerType, RopeParams>
  /** ropeFingerprint(params, maxPositionEmbeddings) per layer type: the effective table, for the window check. */
  ropeFingerprints: Record<LayerType, string>
  /**
   * The cache arithmetic when it is not the decoder profile's (absent: `decoder`, the profile's own
   * kv path). With `mlx-cpu` the weights file holds the cache path's weights as MLX quantizes them.
   */
  cacheMath?: SidecarCacheMath
  /** The weights file: name, size, SHA-256 of its bytes, and its tensors in file order. */
  weights: { file: typeof SIDECAR_WEIGHTS, bytes: number, sha256: string, tensors: string[] }
  /** The geometry fingerprint (see `sidecarFingerprint`). */
  fingerprint: string
}

const positiveInt = z.int().positive().max(Number.MAX_SAFE_INTEGER)
const hex64 = z.string().regex(/^[0-9a-f]{64}$/, 'must be 64 lowercase hex digits')

const ropeSchema = z.strictObject({
  ropeType: z.enum(['default', 'yarn']),
  theta: z.number().positive(),
  factor: z.number().positive(),
  originalMaxPositionEmbeddings: positiveInt.nullable(),
  betaFast: z.number(),
  betaSlow: z.number(),
  attentionFactor: z.number(),
  partialRotaryFactor: z.number().positive().max(1),
  ropeDim: positiveInt,
  truncate: z.boolean(),
})

const weightFormat = z.enum(WEIGHT_FORMATS as [WeightFormat, ...WeightFormat[]])
const profileSchema = z.strictObject({
  name: z.string().min(1),
  version: positiveInt,
  activations: z.enum(['f32', 'bf16']),
  vectors: z.enum(['f32', 'bf16']),
  weights: z.strictObject(Object.fromEntries(WEIGHT_GROUPS.map((g) => [g, weightFormat])) as Record<WeightGroup, typeof weightFormat>),
  matmulOrder: z.enum(['lanes8', 'blocks128', 'lanes8-fma', 'sequential-fma']),
  referenceQuant: z.strictObject({ windowFp8: z.boolean(), mainPoolFp8: z.boolean(), indexerFp4: z.boolean() }),
})

const roundTo = z.enum(['bf16', 'f32'])
const cacheMathSchema = z.strictObject({
  name: z.literal('mlx-cpu'),
  rounding: z.strictObject({
    backend: z.string().min(1),
    checked: z.string(),
    quantizedMatmul: z.strictObject({ product: roundTo, sum: roundTo, scaled: roundTo, dequantized: roundTo }),
    rmsNorm: z.strictObject({ scaled: roundTo, weighted: roundTo }),
    rope: z.strictObject({ tables: roundTo, product: roundTo, result: roundTo }),
    pooling: z.strictObject({ overlapGate: roundTo, simpleGate: roundTo, weights: roundTo, product: roundTo, sum: roundTo }),
  }),
})

const perLayerType = <T extends z.ZodType>(s: T) => z.strictObject({
  sliding_attention: s, compressed_sparse_attention: s, heavily_compressed_attention: s,
})

const sidecarSchema = z.strictObject({
  format: z.literal(SIDECAR_FORMAT),
  profile: profileSchema,
  profileFingerprint: hex64,
  hiddenSize: positiveInt,
  headDim: positiveInt,
  ropeDim: positiveInt,
  indexHeadDim: positiveInt,
  rmsNormEps: z.number().positive(),
  slidingWindow: positiveInt.min(2),
  maxPositionEmbeddings: positiveInt,
  blockSize: positiveInt,
  compressRates: z.strictObject({ csa: positiveInt, hca: positiveInt }),
  layers: z.array(z.strictObject({ index: z.int().nonnegative(), layerType: z.enum(LAYER_TYPES as [LayerType, ...LayerType[]]), compressRatio: z.int().nonnegative() })).min(1),
  ropeParameters: perLayerType(ropeSchema),
  ropeFingerprints: perLayerType(hex64),
  cacheMath: cacheMathSchema.optional(),
  weights: z.strictObject({ file: z.literal(SIDECAR_WEIGHTS), bytes: positiveInt, sha256: hex64, tensors: z.array(z.string().min(1)) }),
  fingerprint: hex64,
})

// The rope pair of a sidecar lives with the geometry it feeds.
export { sidecarRope } from './geometry.ts'

/**
 * The sidecar's geometry fingerprint: the block store's `geometryFingerprint` over the rope tables
 * (main and compress), max_position_embeddings, the window, the per-layer ratios, and as `profile`
 * the decoder's profile data together with the exported weights' SHA-256, so a re-export under
 * other weights is another geometry; a cache math other than `decoder` is folded in beside the profile.
 */
export function sidecarFingerprint (json: Pick<SidecarJson, 'ropeParameters' | 'maxPositionEmbeddings' | 'slidingWindow' | 'layers' | 'profile' | 'cacheMath'>, weightsSha256: string): string {
  return Geometry.fromSidecar(json, weightsSha256).fingerprint
}

/**
 * Parse sidecar.json text: the format tag first (a newer version is named, not picked apart), then
 * the schema, then the cross-field rules (layers 0..n-1 in order, ratios that match their layer
 * types, one compress table for CSA and HCA, rope dims that match head_dim). `file` names errors.
 */
export function parseSidecarJson (text: string, file: string): SidecarJson {
  let raw: unknown
  try {
    raw = JSON.parse(text)
  }
  catch (e) {
    throw new ConfigError('(json)', `not valid JSON: ${(e as Error).message}`, file)
  }
  if (raw === null || typeof raw !== 'object' || Array.isArray(raw)) throw new ConfigError('(root)', 'must be a JSON object', file)
  const format = (raw as Record<string, unknown>).format
  if (format !== SIDECAR_FORMAT) throw new ConfigError('format', `is ${JSON.stringify(format) ?? 'missing'}, this reader knows only ${SIDECAR_FORMAT}`, file)
  const parsed = sidecarSchema.safeParse(raw)
  if (!parsed.success) {
    const issue = parsed.error.issues[0]
    throw new ConfigError(issue.path.length > 0 ? issue.path.map(String).join('.') : '(root)', issue.message, file)
  }
  const json = parsed.data as SidecarJson
  checkSidecarJson(json, file)
  return json
}

/** Cross-field rules of a sidecar; throws ConfigError naming the field. */
export function checkSidecarJson (json: SidecarJson, file?: string): void {
  const fail = (field: string, problem: string): never => { throw new ConfigError(field, problem, file) }
  // MLX's cache is bf16 values; a profile that stores f32 activations would misstate the blocks.
  if (json.cacheMath !== undefined && json.profile.activations !== 'bf16') {
    fail('profile.activations', `is ${json.profile.activations}, but the ${json.cacheMath.name} cache math computes bf16 values: export with a bf16-activation profile (decoder)`)
  }
  json.layers.forEach((l, i) => {
    if (l.index !== i) fail(`layers.${i}.index`, `is ${l.index}; layers must be listed 0..${json.layers.length - 1} in order`)
    const want = l.layerType === 'sliding_attention' ? 0 : l.layerType === 'compressed_sparse_attention' ? json.compressRates.csa : json.compressRates.hca
    if (l.compressRatio !== want) fail(`layers.${i}.compressRatio`, `is ${l.compressRatio}, but a ${l.layerType} layer has ratio ${want}`)
  })
  const csa = JSON.stringify(json.ropeParameters.compressed_sparse_attention)
  if (JSON.stringify(json.ropeParameters.heavily_compressed_attention) !== csa) {
    fail('ropeParameters.heavily_compressed_attention', 'differs from compressed_sparse_attention; DeepSeek-V4 compressed layers share one compress table')
  }
  for (const type of LAYER_TYPES) {
    const p = json.ropeParameters[type]
    if (p.ropeDim !== json.ropeDim) fail(`ropeParameters.${type}.ropeDim`, `is ${p.ropeDim}, but ropeDim is ${json.ropeDim}`)
  }
  if (json.ropeDim % 2 !== 0 || json.ropeDim > json.headDim || json.ropeDim > json.indexHeadDim) {
    fail('ropeDim', `must be even and at most headDim (${json.headDim}) and indexHeadDim (${json.indexHeadDim}), found ${json.ropeDim}`)
  }
}
