// The parsed DeepSeek-V4 config: camelCase, fully resolved (no absent keys, legacy keys folded in).

/** Attention kind of one decoder layer, as transformers names it in `layer_types`. */
export type LayerType = 'sliding_attention' | 'compressed_sparse_attention' | 'heavily_compressed_attention'

/** MoE routing kind of one decoder layer, as transformers names it in `mlp_layer_types`. */
export type MlpLayerType = 'hash_moe' | 'moe'

/** The attention kinds DeepSeek-V4 ships, in transformers' order. */
export const LAYER_TYPES: readonly LayerType[] = ['sliding_attention', 'compressed_sparse_attention', 'heavily_compressed_attention']

/** The MoE routing kinds DeepSeek-V4 ships. */
export const MLP_LAYER_TYPES: readonly MlpLayerType[] = ['hash_moe', 'moe']

/** The router activations DeepSeek-V4's config allows. */
export const SCORING_FUNCS = ['sqrtsoftplus', 'softmax', 'sigmoid'] as const

/**
 * Everything needed to build one RoPE table. `originalMaxPositionEmbeddings` is null exactly when
 * YaRN is off; for plain rope `factor` and `attentionFactor` are 1 and the betas hold the YaRN defaults.
 */
export interface RopeParams {
  ropeType: 'default' | 'yarn'
  theta: number
  factor: number
  originalMaxPositionEmbeddings: number | null
  betaFast: number
  betaSlow: number
  /** Multiplies cos and sin when != 1 (transformers' `attention_scaling`); V4 wants 1. */
  attentionFactor: number
  partialRotaryFactor: number
  /** Rotated channels per head: head_dim * partial_rotary_factor (even). */
  ropeDim: number
  /** Floor/ceil the YaRN correction range; always true for configs parsed from JSON (see docs). */
  truncate: boolean
}

/** A DeepSeek-V4 model config with every field resolved and validated. */
export interface DeepseekV4Config {
  vocabSize: number
  hiddenSize: number
  numHiddenLayers: number
  numAttentionHeads: number
  numKeyValueHeads: number
  headDim: number
  qkRopeHeadDim: number
  qLoraRank: number
  oGroups: number
  oLoraRank: number
  slidingWindow: number
  layerTypes: LayerType[]
  /** Per layer: 0 (sliding), the CSA rate or the HCA rate. */
  compressRatios: number[]
  compressRates: { csa: number, hca: number }
  mlpLayerTypes: MlpLayerType[]
  indexNHeads: number
  indexHeadDim: number
  indexTopk: number
  hcMult: number
  hcSinkhornIters: number
  hcEps: number
  rmsNormEps: number
  nRoutedExperts: number
  numExpertsPerTok: number
  nSharedExperts: number
  moeIntermediateSize: number
  scoringFunc: 'sqrtsoftplus' | 'softmax' | 'sigmoid'
  routedScalingFactor: number
  swigluLimit: number
  normTopkProb: boolean
  maxPositionEmbeddings: number
  rope: { main: RopeParams, compress: RopeParams }
  tieWordEmbeddings: boolean
  bosTokenId: number | null
  eosTokenId: number | number[] | null
  padTokenId: number | null
  numNextnPredictLayers: number
  initializerRange: number
  torchDtype: string | null
}
