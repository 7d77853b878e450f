// Every tensor a DeepSeek-V4 checkpoint holds, derived from the config: the single list that
// make-checkpoint writes from and loadCheckpoint checks against. Names and shapes follow the
// module tree of transformers 5.17's DeepseekV4ForCausalLM (its state_dict: every nn.Parameter and
// every persistent buffer; the rotary inv_freq buffers are non-persistent and never saved).
import type { DeepseekV4Config } from '../config.ts'

/** The dtypes a checkpoint parameter can have. */
export type ParamDtype = 'BF16' | 'F32' | 'I64'

/** What a parameter is, for the init rules and for tests that look for a kind of parameter. */
export type ParamRole =
  | 'embedding' | 'linear' | 'expert-linear' | 'norm' | 'sink' | 'position-bias'
  | 'hc-fn' | 'hc-base' | 'hc-scale' | 'correction-bias' | 'tid2eid'

/**
 * How make-checkpoint fills a parameter.
 * - `normal`: mean + std * N(0, 1), rounded to the storage dtype; with `bf16Values` an F32
 *   parameter still holds only bf16-representable values (as a real bf16 checkpoint upcast would).
 * - `distinct-ids`: each row holds distinct integers drawn uniformly from [0, range).
 */
export type InitSpec =
  | { kind: 'normal', mean: number, std: number, bf16Values: boolean }
  | { kind: 'distinct-ids', range: number }

/** One tensor of the checkpoint. */
export interface ParamSpec {
  name: string
  shape: number[]
  dtype: ParamDtype
  role: ParamRole
  init: InitSpec
}

/**
 * Module names transformers keeps in float32 (`_keep_in_fp32_modules_strict`). A parameter is F32
 * when one of its dotted name components equals one of these, which is how transformers matches
 * them: `norm` hits `model.norm.weight` but not `q_a_norm`, which is listed on its own.
 */
export const KEEP_IN_FP32_MODULES: readonly string[] = [
  'attn_hc', 'ffn_hc', 'hc_head', 'sinks', 'position_bias', 'e_score_correction_bias',
  'q_a_norm', 'kv_norm', 'input_layernorm', 'post_attention_layernorm', 'norm',
]

/** The storage dtype transformers gives a parameter: I64 for tid2eid, F32 for keep-in-fp32 modules, else BF16. */
export function paramDtype (name: string): ParamDtype {
  const parts = name.split('.')
  if (parts[parts.length - 1] === 'tid2eid') return 'I64'
  return parts.some((p) => KEEP_IN_FP32_MODULES.includes(p)) ? 'F32' : 'BF16'
}

// Scales of the synthetic init. Weights get std 1/sqrt(fan_in): every projection input here is
// RMS-normalised (or a convex mix of normalised rows), so outputs keep unit variance layer after
// layer. Embeddings get std 1 for the same reason. The rest only has to be clearly non-zero and
// non-constant, at a size that moves the forward without swamping it.
const NORM_NOISE = 0.05
const SINK_STD = 1
const POSITION_BIAS_STD = 0.5
const HC_BASE_STD = 0.5
const HC_SCALE_NOISE = 0.1
const CORRECTION_BIAS_STD = 0.1

function initFor (role: ParamRole, shape: number[], cfg: DeepseekV4Config): InitSpec {
  const fanIn = shape[shape.length - 1]
  switch (role) {
    case 'embedding': return { kind: 'normal', mean: 0, std: 1, bf16Values: true }
    case 'linear':
    case 'expert-linear':
    case 'hc-fn': return { kind: 'normal', mean: 0, std: 1 / Math.sqrt(fanIn), bf16Values: role !== 'hc-fn' }
    case 'norm': return { kind: 'normal', mean: 1, std: NORM_NOISE, bf16Values: true }
    case 'sink': return { kind: 'normal', mean: 0, std: SINK_STD, bf16Values: false }
    case 'position-bias': return { kind: 'normal', mean: 0, std: POSITION_BIAS_STD, bf16Values: false }
    case 'hc-base': return { kind: 'normal', mean: 0, std: HC_BASE_STD, bf16Values: false }
    case 'hc-scale': return { kind: 'normal', mean: 1, std: HC_SCALE_NOISE, bf16Values: false }
    case 'correction-bias': return { kind: 'normal', mean: 0, std: CORRECTION_BIAS_STD, bf16Values: false }
    case 'tid2eid': return { kind: 'distinct-ids', range: cfg.nRoutedExperts }
  }
}

/**
 * The full parameter list of a checkpoint for `cfg`, in the order transformers' state_dict lists
 * them (a module's own parameters and buffers, then its children in registration order).
 */
export function expectedParameters (cfg: DeepseekV4Config): ParamSpec[] {
  const out: ParamSpec[] = []
  const add = (name: string, shape: number[], role: ParamRole) => {
    out.push({ name, shape, dtype: paramDtype(name), role, init: initFor(role, shape, cfg) })
  }
  const hidden = cfg.hiddenSize
  const heads = cfg.numAttentionHeads
  const headDim = cfg.headDim
  const hc = cfg.hcMult
  const mix = (2 + hc) * hc

  add('model.embed_tokens.weight', [cfg.vocabSize, hidden], 'embedding')
  for (let n = 0; n < cfg.numHiddenLayers; n++) {
    const layer = `model.layers.${n}`
    const attn = `${layer}.self_attn`
    add(`${attn}.sinks`, [heads], 'sink')
    add(`${attn}.q_a_proj.weight`, [cfg.qLoraRank, hidden], 'linear')
    add(`${attn}.q_a_norm.weight`, [cfg.qLoraRank], 'norm')
    add(`${attn}.q_b_proj.weight`, [heads * headDim, cfg.qLoraRank], 'linear')
    // One shared KV head whatever num_key_value_heads says: transformers hard-wires it.
    add(`${attn}.kv_proj.weight`, [headDim, hidden], 'linear')
    add(`${attn}.kv_norm.weight`, [headDim], 'norm')
    // Grouped output projection: an nn.Linear(heads*head_dim/o_groups -> o_groups*o_lora_rank).
    add(`${attn}.o_a_proj.weight`, [cfg.oGroups * cfg.oLoraRank, (heads * headDim) / cfg.oGroups], 'linear')
    add(`${attn}.o_b_proj.weight`, [hidden, cfg.oGroups * cfg.oLoraRank], 'linear')

    const type = cfg.layerTypes[n]
    const comp = `${attn}.compressor`
    if (type === 'compressed_sparse_attention') {
      // CSA projects two series (Ca, Cb) per token: 2 * head_dim wide.
      const rate = cfg.compressRates.csa
      add(`${comp}.position_bias`, [rate, 2 * headDim], 'position-bias')
      add(`${comp}.kv_proj.weight`, [2 * headDim, hidden], 'linear')
      add(`${comp}.gate_proj.weight`, [2 * headDim, hidden], 'linear')
      add(`${comp}.kv_norm.weight`, [headDim], 'norm')
      const idx = `${comp}.indexer`
      const indexDim = cfg.indexHeadDim
      add(`${idx}.position_bias`, [rate, 2 * indexDim], 'position-bias')
      add(`${idx}.kv_proj.weight`, [2 * indexDim, hidden], 'linear')
      add(`${idx}.gate_proj.weight`, [2 * indexDim, hidden], 'linear')
      add(`${idx}.kv_norm.weight`, [indexDim], 'norm')
      add(`${idx}.q_b_proj.weight`, [cfg.indexNHeads * indexDim, cfg.qLoraRank], 'linear')
      add(`${idx}.scorer.weights_proj.weight`, [cfg.indexNHeads, hidden], 'linear')
    }
    else if (type === 'heavily_compressed_attention') {
      add(`${comp}.position_bias`, [cfg.compressRates.hca, headDim], 'position-bias')
      add(`${comp}.kv_proj.weight`, [headDim, hidden], 'linear')
      add(`${comp}.gate_proj.weight`, [headDim, hidden], 'linear')
      add(`${comp}.kv_norm.weight`, [headDim], 'norm')
    }

    const mlp = `${layer}.mlp`
    const experts = cfg.nRoutedExperts
    const inter = cfg.moeIntermediateSize
    add(`${mlp}.gate.weight`, [experts, hidden], 'linear')
    if (cfg.mlpLayerTypes[n] === 'hash_moe') add(`${mlp}.gate.tid2eid`, [cfg.vocabSize, cfg.numExpertsPerTok], 'tid2eid')
    else add(`${mlp}.gate.e_score_correction_bias`, [experts], 'correction-bias')
    add(`${mlp}.experts.gate_up_proj`, [experts, 2 * inter, hidden], 'expert-linear')
    add(`${mlp}.experts.down_proj`, [experts, hidden, inter], 'expert-linear')
    // One shared MLP of moe_intermediate_size, whatever n_shared_experts says (as transformers builds it).
    add(`${mlp}.shared_experts.gate_proj.weight`, [inter, hidden], 'linear')
    add(`${mlp}.shared_experts.up_proj.weight`, [inter, hidden], 'linear')
    add(`${mlp}.shared_experts.down_proj.weight`, [hidden, inter], 'linear')

    add(`${layer}.input_layernorm.weight`, [hidden], 'norm')
    add(`${layer}.post_attention_layernorm.weight`, [hidden], 'norm')
    for (const site of ['attn_hc', 'ffn_hc']) {
      add(`${layer}.${site}.fn`, [mix, hc * hidden], 'hc-fn')
      add(`${layer}.${site}.base`, [mix], 'hc-base')
      add(`${layer}.${site}.scale`, [3], 'hc-scale')
    }
  }
  add('model.norm.weight', [hidden], 'norm')
  add('model.hc_head.hc_fn', [hc, hc * hidden], 'hc-fn')
  add('model.hc_head.hc_base', [hc], 'hc-base')
  add('model.hc_head.hc_scale', [1], 'hc-scale')
  // Tied embeddings: transformers saves no lm_head.weight.
  if (!cfg.tieWordEmbeddings) add('lm_head.weight', [cfg.vocabSize, hidden], 'linear')
  return out
}
