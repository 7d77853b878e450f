// Writing a config back out in the new style, key for key as transformers 5.17 save_pretrained does.
import { ConfigError } from '../../errors.ts'
import { HF_FORMAT_VERSION } from './defaults.ts'
import type { DeepseekV4Config, RopeParams } from './types.ts'

// One nested rope dict. mscale keys are not written: attention_factor is always explicit here.
function ropeDictJson (p: RopeParams, field: string): Record<string, unknown> {
  if (!p.truncate) {
    throw new ConfigError(field, 'expected truncate = true: transformers ignores a nested "truncate" for DeepSeek-V4, so truncate = false cannot be written')
  }
  if (p.ropeType === 'default') {
    return { partial_rotary_factor: p.partialRotaryFactor, rope_theta: p.theta, rope_type: 'default' }
  }
  return {
    attention_factor: p.attentionFactor,
    beta_fast: p.betaFast,
    beta_slow: p.betaSlow,
    factor: p.factor,
    original_max_position_embeddings: p.originalMaxPositionEmbeddings,
    partial_rotary_factor: p.partialRotaryFactor,
    rope_theta: p.theta,
    rope_type: 'yarn',
  }
}

// Keys in code-point order at every level, as Python's json.dumps(sort_keys=True) writes them.
function sortKeys (value: unknown): unknown {
  if (Array.isArray(value)) return value.map(sortKeys)
  if (value !== null && typeof value === 'object') {
    const out: Record<string, unknown> = {}
    for (const key of Object.keys(value).sort()) out[key] = sortKeys((value as Record<string, unknown>)[key])
    return out
  }
  return value
}

/**
 * The new-style config.json object for `cfg`: nested `rope_parameters` {main, compress},
 * `layer_types`, `compress_rates`, `mlp_layer_types`, plus the fixed keys transformers always
 * writes. Keys are sorted. The one key transformers may add that this does not is the legacy
 * `type` inside a rope dict (it only echoes `rope_type`).
 */
export function toHfConfigJson (cfg: DeepseekV4Config): Record<string, unknown> {
  const out: Record<string, unknown> = {
    attention_bias: false,
    attention_dropout: 0,
    bos_token_id: cfg.bosTokenId,
    compress_rates: {
      compressed_sparse_attention: cfg.compressRates.csa,
      heavily_compressed_attention: cfg.compressRates.hca,
    },
    compress_rope_theta: cfg.rope.compress.theta,
    eos_token_id: Array.isArray(cfg.eosTokenId) ? [...cfg.eosTokenId] : cfg.eosTokenId,
    hc_eps: cfg.hcEps,
    hc_mult: cfg.hcMult,
    hc_sinkhorn_iters: cfg.hcSinkhornIters,
    head_dim: cfg.headDim,
    hidden_act: 'silu',
    hidden_size: cfg.hiddenSize,
    index_head_dim: cfg.indexHeadDim,
    index_n_heads: cfg.indexNHeads,
    index_topk: cfg.indexTopk,
    initializer_range: cfg.initializerRange,
    layer_types: [...cfg.layerTypes],
    max_position_embeddings: cfg.maxPositionEmbeddings,
    mlp_bias: false,
    mlp_layer_types: [...cfg.mlpLayerTypes],
    model_type: 'deepseek_v4',
    moe_intermediate_size: cfg.moeIntermediateSize,
    n_routed_experts: cfg.nRoutedExperts,
    n_shared_experts: cfg.nSharedExperts,
    norm_topk_prob: cfg.normTopkProb,
    num_attention_heads: cfg.numAttentionHeads,
    num_experts_per_tok: cfg.numExpertsPerTok,
    num_hidden_layers: cfg.numHiddenLayers,
    num_key_value_heads: cfg.numKeyValueHeads,
    num_nextn_predict_layers: cfg.numNextnPredictLayers,
    o_groups: cfg.oGroups,
    o_lora_rank: cfg.oLoraRank,
    output_router_logits: false,
    pad_token_id: cfg.padTokenId,
    partial_rotary_factor: cfg.rope.main.partialRotaryFactor,
    q_lora_rank: cfg.qLoraRank,
    qk_rope_head_dim: cfg.qkRopeHeadDim,
    rms_norm_eps: cfg.rmsNormEps,
    rope_parameters: {
      compress: ropeDictJson(cfg.rope.compress, 'rope.compress.truncate'),
      main: ropeDictJson(cfg.rope.main, 'rope.main.truncate'),
    },
    rope_theta: cfg.rope.main.theta,
    routed_scaling_factor: cfg.routedScalingFactor,
    router_aux_loss_coef: 0.001,
    router_jitter_noise: 0,
    scoring_func: cfg.scoringFunc,
    sliding_window: cfg.slidingWindow,
    swiglu_limit: cfg.swigluLimit,
    tie_word_embeddings: cfg.tieWordEmbeddings,
    transformers_version: HF_FORMAT_VERSION,
    use_cache: true,
    vocab_size: cfg.vocabSize,
  }
  // transformers 5 writes the dtype under "dtype", and only when one is set.
  if (cfg.torchDtype !== null) out.dtype = cfg.torchDtype
  return sortKeys(out) as Record<string, unknown>
}
