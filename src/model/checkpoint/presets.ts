// Named model sizes for synthetic checkpoints, written as the config.json transformers would read.
import { PdBridgeError } from '../../errors.ts'
import { parseDeepseekV4Config, type DeepseekV4Config } from '../config.ts'

const SLIDING = 'sliding_attention'
const CSA = 'compressed_sparse_attention'
const HCA = 'heavily_compressed_attention'

/** Keys shared by every preset (the DeepSeek-V4 choices that do not scale with size). */
function commonKeys (): Record<string, unknown> {
  return {
    architectures: ['DeepseekV4ForCausalLM'],
    model_type: 'deepseek_v4',
    num_key_value_heads: 1,
    compress_rates: { [CSA]: 4, [HCA]: 128 },
    sliding_window: 128,
    hc_mult: 4,
    hc_sinkhorn_iters: 20,
    hc_eps: 1e-6,
    n_shared_experts: 1,
    scoring_func: 'sqrtsoftplus',
    norm_topk_prob: true,
    routed_scaling_factor: 1.5,
    swiglu_limit: 10,
    rope_theta: 10000,
    compress_rope_theta: 160000,
    num_nextn_predict_layers: 0,
    tie_word_embeddings: false,
    rms_norm_eps: 1e-6,
    initializer_range: 0.02,
    hidden_act: 'silu',
    bos_token_id: 0,
    eos_token_id: 1,
    pad_token_id: null,
    torch_dtype: 'bfloat16',
  }
}

function ropeParameters (partialRotaryFactor: number, yarnFactor: number, originalMax: number) {
  return {
    main: { rope_type: 'default', rope_theta: 10000, partial_rotary_factor: partialRotaryFactor },
    compress: {
      rope_type: 'yarn',
      rope_theta: 160000,
      factor: yarnFactor,
      original_max_position_embeddings: originalMax,
      beta_fast: 32,
      beta_slow: 1,
      attention_factor: 1.0,
      partial_rotary_factor: partialRotaryFactor,
    },
  }
}

/**
 * `tiny`: the test model. vocab 512, hidden 256, 4 layers [sliding, CSA, HCA, CSA] with MLPs
 * [hash_moe, moe, moe, moe], 4 heads x 128 (rope 64), q_lora 128, o_groups 2 x o_lora 64,
 * indexer 4 heads x 128 with top-k 8, window 128, 8 experts (top 2, 1 shared, intermediate 128),
 * compress rope YaRN factor 32 over original 1024 (so tests pass the original window quickly),
 * max_position_embeddings 32768.
 */
function tinyJson (): Record<string, unknown> {
  return {
    ...commonKeys(),
    vocab_size: 512,
    hidden_size: 256,
    num_hidden_layers: 4,
    layer_types: [SLIDING, CSA, HCA, CSA],
    mlp_layer_types: ['hash_moe', 'moe', 'moe', 'moe'],
    num_attention_heads: 4,
    head_dim: 128,
    partial_rotary_factor: 0.5,
    q_lora_rank: 128,
    o_groups: 2,
    o_lora_rank: 64,
    index_n_heads: 4,
    index_head_dim: 128,
    index_topk: 8,
    n_routed_experts: 8,
    num_experts_per_tok: 2,
    moe_intermediate_size: 128,
    max_position_embeddings: 32768,
    rope_parameters: ropeParameters(0.5, 32, 1024),
  }
}

/**
 * `small`: the benchmark model, still CPU-friendly (about 138M parameters, 280 MB). vocab 4096,
 * hidden 1024, 8 layers [sliding, sliding, CSA, HCA, CSA, HCA, CSA, sliding] with MLPs
 * [hash_moe, hash_moe, then moe], 8 heads x 256 (rope 64), q_lora 256, o_groups 4 x o_lora 128,
 * indexer 8 heads x 128 with top-k 64, window 128, 16 experts (top 4, 1 shared, intermediate 256),
 * compress rope YaRN factor 16 over original 4096, max_position_embeddings 65536.
 */
function smallJson (): Record<string, unknown> {
  return {
    ...commonKeys(),
    vocab_size: 4096,
    hidden_size: 1024,
    num_hidden_layers: 8,
    layer_types: [SLIDING, SLIDING, CSA, HCA, CSA, HCA, CSA, SLIDING],
    mlp_layer_types: ['hash_moe', 'hash_moe', 'moe', 'moe', 'moe', 'moe', 'moe', 'moe'],
    num_attention_heads: 8,
    head_dim: 256,
    partial_rotary_factor: 0.25,
    q_lora_rank: 256,
    o_groups: 4,
    o_lora_rank: 128,
    index_n_heads: 8,
    index_head_dim: 128,
    index_topk: 64,
    n_routed_experts: 16,
    num_experts_per_tok: 4,
    moe_intermediate_size: 256,
    max_position_embeddings: 65536,
    rope_parameters: ropeParameters(0.25, 16, 4096),
  }
}

/**
 * `needle`: the tiny architecture with handcrafted weights that retrieve a needle through the
 * compressed caches (src/model/checkpoint/needle, docs/needle-checkpoint.md); its tokenizer has
 * the needle protocol's phrases as tokens.
 */
function needleJson (): Record<string, unknown> {
  return tinyJson()
}

/** V4-Flash's layer schedule as transformers writes it (src/model/config/v4-flash-config.json): 43 layers, no sliding one. */
function flashSchedule (): { layerTypes: string[], mlpLayerTypes: string[] } {
  const hashLayers = 3
  const layerTypes = [HCA, HCA]
  while (layerTypes.length < 43) layerTypes.push(layerTypes.length % 2 === 1 ? CSA : HCA)
  return { layerTypes, mlpLayerTypes: layerTypes.map((_, i) => (i < hashLayers ? 'hash_moe' : 'moe')) }
}

/**
 * `flash-schedule`: V4-Flash's 43-layer schedule (20 CSA, 23 HCA; hash MoE in the first 3) at the
 * tiny preset's widths but hidden 128, 2 heads and 4 experts, so a 43-layer prefill stays quick on
 * a CPU. It is the preset on which the seed's per-array and per-block tables are counted.
 */
function flashScheduleJson (): Record<string, unknown> {
  const { layerTypes, mlpLayerTypes } = flashSchedule()
  return {
    ...tinyJson(),
    hidden_size: 128,
    num_hidden_layers: layerTypes.length,
    layer_types: layerTypes,
    mlp_layer_types: mlpLayerTypes,
    num_attention_heads: 2,
    q_lora_rank: 64,
    o_lora_rank: 32,
    index_n_heads: 2,
    n_routed_experts: 4,
    moe_intermediate_size: 64,
  }
}

/**
 * `flash-attn`: V4-Flash's attention geometry (hidden 4096, 64 heads x 512 with rope 64, q_lora
 * 1024, o_groups 8 x o_lora 1024, indexer 64 heads x 128 with top-k 512, window 128) on 4 layers
 * [sliding, CSA, HCA, CSA] with a small MoE (8 experts, top 2, 1 shared, intermediate 1024; about
 * 0.97 B parameters), vocab 4096, compress rope YaRN factor 32 over original 4096, so it serves
 * 131,072 tokens. The CUDA rung's benchmark model (docs/torch-rung.md): big enough that prefill
 * is the cost a GPU takes away, small enough for our decoder on a CPU.
 */
function flashAttnJson (): Record<string, unknown> {
  return {
    ...commonKeys(),
    vocab_size: 4096,
    hidden_size: 4096,
    num_hidden_layers: 4,
    layer_types: [SLIDING, CSA, HCA, CSA],
    mlp_layer_types: ['hash_moe', 'moe', 'moe', 'moe'],
    num_attention_heads: 64,
    head_dim: 512,
    partial_rotary_factor: 0.125,
    q_lora_rank: 1024,
    o_groups: 8,
    o_lora_rank: 1024,
    index_n_heads: 64,
    index_head_dim: 128,
    index_topk: 512,
    n_routed_experts: 8,
    num_experts_per_tok: 2,
    moe_intermediate_size: 1024,
    max_position_embeddings: 131072,
    rope_parameters: ropeParameters(0.125, 32, 4096),
  }
}

/** What the `long` preset serves: 2^20 positions, compress rope YaRN factor 32 over an original 32,768. */
export const LONG_PRESET_WINDOW = 1_048_576

/**
 * `long`: the tiny architecture for million-token prompts (docs/long-runs.md). Its compress rope is
 * YaRN factor 32 over an original 32,768, so it serves 1,048,576 positions, and its indexer is one
 * head of 64, the one cost that grows with the square of the prompt (every CSA query scores every
 * compressed entry before it): at 1M tokens tiny's 4 x 128 would be 2.6e14 flops, one head of 64
 * (the rope dim it rotates) 3.2e13.
 */
function longJson (): Record<string, unknown> {
  return {
    ...tinyJson(),
    layer_types: [SLIDING, CSA, HCA, SLIDING],
    index_n_heads: 1,
    index_head_dim: 64,
    max_position_embeddings: LONG_PRESET_WINDOW,
    rope_parameters: ropeParameters(0.5, 32, LONG_PRESET_WINDOW / 32),
  }
}

/**
 * `needle-long`: the long architecture (and config) with the needle circuit written over it
 * (docs/needle-checkpoint.md, "The long needle"), so retrieval can be asked of a million-token prompt.
 */
function needleLongJson (): Record<string, unknown> {
  return longJson()
}

const PRESETS = { tiny: tinyJson, small: smallJson, needle: needleJson, 'flash-schedule': flashScheduleJson, 'flash-attn': flashAttnJson, long: longJson, 'needle-long': needleLongJson } as const

/** The presets whose weights are the needle circuit (and whose tokenizer holds the needle words). */
export const NEEDLE_PRESETS: readonly string[] = ['needle', 'needle-long']

/** A preset's name. */
export type PresetName = keyof typeof PRESETS

/** The preset names, for CLI help and validation. */
export const PRESET_NAMES = Object.keys(PRESETS) as PresetName[]

/** Whether `name` is a preset. */
export function isPresetName (name: string): name is PresetName {
  return Object.hasOwn(PRESETS, name)
}

/** A preset's config.json object (a fresh copy each call). */
export function presetConfigJson (name: string): Record<string, unknown> {
  if (!isPresetName(name)) {
    throw new PdBridgeError(`unknown preset ${JSON.stringify(name)}: expected one of ${PRESET_NAMES.join(', ')}`)
  }
  return PRESETS[name]()
}

/** A preset's parsed config. */
export function presetConfig (name: string): DeepseekV4Config {
  return parseDeepseekV4Config(presetConfigJson(name), `preset ${name}`)
}
