// The few config fields the cache path reads, as oMLX's ModelArgs holds them (harness/mlx/omlx_reference.py
// model_args maps transformers' config.json onto them the same way).
import type { DeepseekV4Config, RopeParams } from '../../model/config/types.ts'
import type { SidecarJson } from '../../wire/sidecar-format.ts'
import type { MlxYarn } from '../../numerics/mlx-cpu/rope.ts'
import { MLX_CPU, type RoundingPoints } from '../../numerics/mlx-cpu/rounding-points.ts'

export interface MlxCpuCacheConfig {
  hiddenSize: number
  headDim: number
  /** The indexer compressor's head dim (CSA layers). */
  indexHeadDim: number
  /** qk_rope_head_dim: rotated channels, the last ones of each head. */
  ropeDim: number
  slidingWindow: number
  rmsNormEps: number
  /** Per layer: 0 (sliding), 4 (CSA, overlap) or 128 (HCA). */
  compressRatios: number[]
  /** The sliding layers' rope base (no scaling in oMLX). */
  ropeTheta: number
  /** The compressed layers' base, for their attention and their compressors. */
  compressRopeTheta: number
  /** rope_scaling: YaRN of the compressed layers, or null. */
  compressYarn: MlxYarn | null
  /** Where the backend rounds (src/numerics/mlx-cpu/rounding-points.ts): MLX's CPU unless told otherwise. */
  rounding: RoundingPoints
}

/** oMLX's view of a parsed DeepSeek-V4 config. */
export function mlxCpuCacheConfig (cfg: DeepseekV4Config, rounding: RoundingPoints = MLX_CPU): MlxCpuCacheConfig {
  return fromRope(cfg, cfg.rope.main, cfg.rope.compress, Math.round(cfg.headDim * cfg.rope.main.partialRotaryFactor), cfg.compressRatios, rounding)
}

/** oMLX's view of the decoder a sidecar describes, with the sidecar's rounding points. */
export function mlxCpuCacheConfigFromSidecar (json: SidecarJson, rounding: RoundingPoints): MlxCpuCacheConfig {
  return fromRope(json, json.ropeParameters.sliding_attention, json.ropeParameters.compressed_sparse_attention, json.ropeDim,
    json.layers.map((l) => l.compressRatio), rounding)
}

function fromRope (sizes: Pick<MlxCpuCacheConfig, 'hiddenSize' | 'headDim' | 'indexHeadDim' | 'slidingWindow' | 'rmsNormEps'>,
  main: RopeParams, c: RopeParams, ropeDim: number, compressRatios: readonly number[], rounding: RoundingPoints): MlxCpuCacheConfig {
  if (main.ropeType !== 'default') {
    throw new Error('mlx-cpu cache path: oMLX applies YaRN only to the compressed layers\' rope')
  }
  return {
    hiddenSize: sizes.hiddenSize,
    headDim: sizes.headDim,
    indexHeadDim: sizes.indexHeadDim,
    ropeDim,
    slidingWindow: sizes.slidingWindow,
    rmsNormEps: sizes.rmsNormEps,
    compressRatios: [...compressRatios],
    ropeTheta: main.theta,
    compressRopeTheta: c.theta,
    compressYarn: c.ropeType === 'yarn' && c.originalMaxPositionEmbeddings !== null
      ? { factor: c.factor, originalMaxPositionEmbeddings: c.originalMaxPositionEmbeddings, betaFast: c.betaFast, betaSlow: c.betaSlow }
      : null,
    rounding,
  }
}
