// transformers 5.17's DeepseekV4Config defaults (they are V4-Flash sizes), and the real V4-Flash config.

/** Version string written into `transformers_version`: the save_pretrained output we reproduce. */
export const HF_FORMAT_VERSION = '5.17.0'

/** `default_compress_rates` of DeepseekV4Config. */
export const DEFAULT_COMPRESS_RATES = { csa: 4, hca: 128 } as const

/** `default_num_hash_layers`: the first three layers route by token hash. */
export const DEFAULT_NUM_HASH_LAYERS = 3

/** `default_partial_rotary_factor` = 64 / 512, whatever head_dim is. */
export const DEFAULT_PARTIAL_ROTARY_FACTOR = 64 / 512

/** YaRN's beta_fast default (transformers and the DeepSeek reference agree). */
export const DEFAULT_BETA_FAST = 32

/** YaRN's beta_slow default. */
export const DEFAULT_BETA_SLOW = 1

/**
 * The dataclass defaults of transformers' DeepseekV4Config, keyed as in config.json. A key that is
 * absent from a config file takes this value (layer/rope keys are derived separately).
 */
export const TRANSFORMERS_DEFAULTS = {
  vocab_size: 129280,
  hidden_size: 4096,
  moe_intermediate_size: 2048,
  num_hidden_layers: 43,
  num_attention_heads: 64,
  num_key_value_heads: 1,
  head_dim: 512,
  q_lora_rank: 1024,
  num_experts_per_tok: 6,
  n_routed_experts: 256,
  n_shared_experts: 1,
  scoring_func: 'sqrtsoftplus',
  norm_topk_prob: true,
  routed_scaling_factor: 1.5,
  max_position_embeddings: 1048576,
  rope_theta: 10000,
  compress_rope_theta: 160000,
  hc_mult: 4,
  hc_sinkhorn_iters: 20,
  hc_eps: 1e-6,
  swiglu_limit: 10,
  sliding_window: 128,
  o_groups: 8,
  o_lora_rank: 1024,
  index_n_heads: 64,
  index_head_dim: 128,
  index_topk: 512,
  num_nextn_predict_layers: 1,
  hidden_act: 'silu',
  initializer_range: 0.02,
  rms_norm_eps: 1e-6,
  pad_token_id: null,
  bos_token_id: 0,
  eos_token_id: 1,
  tie_word_embeddings: false,
  attention_bias: false,
  mlp_bias: false,
} as const

/** The V4-Flash per-layer compress ratios: 43 layers plus the MTP slot (44 entries, cut to 43 on load). */
function flashCompressRatios (): number[] {
  const ratios = [0, 0]
  for (let layer = 2; layer <= 41; layer++) ratios.push(layer % 2 === 0 ? 4 : 128)
  ratios.push(4, 0)
  return ratios
}

/**
 * A legacy-style config.json for DeepSeek-V4-Flash (flat `rope_scaling`, `compress_ratios`),
 * rebuilt from the values in research/dsv4-architecture.md §1 (not the verbatim upstream file).
 * Returns a fresh object each call.
 */
export function deepseekV4FlashConfigJson (): Record<string, unknown> {
  return {
    model_type: 'deepseek_v4',
    vocab_size: 129280,
    hidden_size: 4096,
    num_hidden_layers: 43,
    num_attention_heads: 64,
    num_key_value_heads: 1,
    head_dim: 512,
    qk_rope_head_dim: 64,
    q_lora_rank: 1024,
    o_groups: 8,
    o_lora_rank: 1024,
    rope_theta: 10000,
    compress_rope_theta: 160000,
    rope_scaling: { type: 'yarn', factor: 16, original_max_position_embeddings: 65536, beta_fast: 32, beta_slow: 1 },
    max_position_embeddings: 1048576,
    sliding_window: 128,
    compress_ratios: flashCompressRatios(),
    index_n_heads: 64,
    index_head_dim: 128,
    index_topk: 512,
    hc_mult: 4,
    hc_sinkhorn_iters: 20,
    hc_eps: 1e-6,
    rms_norm_eps: 1e-6,
    n_routed_experts: 256,
    num_experts_per_tok: 6,
    n_shared_experts: 1,
    moe_intermediate_size: 2048,
    num_hash_layers: 3,
    scoring_func: 'sqrtsoftplus',
    routed_scaling_factor: 1.5,
    swiglu_limit: 10,
    norm_topk_prob: true,
    num_nextn_predict_layers: 1,
    tie_word_embeddings: false,
    bos_token_id: 0,
    eos_token_id: 1,
    torch_dtype: 'bfloat16',
  }
}
