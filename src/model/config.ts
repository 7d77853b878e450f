// DeepSeek-V4 config.json: parse (new and legacy styles), validate, write back, pick a layer's rope.
import { readFile, stat } from 'node:fs/promises'
import { join } from 'node:path'
import { ConfigError } from '../errors.ts'
import { DEFAULT_PARTIAL_ROTARY_FACTOR } from './config/defaults.ts'
import { foldAttentionSchedule, foldMlpLayerTypes } from './config/layer-schedule.ts'
import { foldRopeParameters } from './config/rope-params.ts'
import type { RopeContext } from './config/rope-params.ts'
import { issueToConfigError, rawConfigSchema, showValue } from './config/schema.ts'
import type { RawConfig } from './config/schema.ts'
import type { DeepseekV4Config, RopeParams } from './config/types.ts'

export type { DeepseekV4Config, LayerType, MlpLayerType, RopeParams } from './config/types.ts'
export { LAYER_TYPES, MLP_LAYER_TYPES } from './config/types.ts'
export { deepseekV4FlashConfigJson, HF_FORMAT_VERSION, TRANSFORMERS_DEFAULTS } from './config/defaults.ts'
export { defaultYarnAttentionFactor } from './config/rope-params.ts'
export { toHfConfigJson } from './config/hf-json.ts'
export { pythonStyleJson, FLOAT_KEYS } from './config/python-json.ts'

// partial_rotary_factor: explicit > legacy qk_rope_head_dim / head_dim > 64/512; the rope dim must
// come out a positive even integer no larger than head_dim, and agree with qk_rope_head_dim if both are given.
function resolveRopeContext (raw: RawConfig): RopeContext {
  const headDim = raw.head_dim
  const given = raw.partial_rotary_factor != null
    ? { field: 'partial_rotary_factor', prf: raw.partial_rotary_factor }
    : raw.qk_rope_head_dim != null
      ? { field: 'qk_rope_head_dim', prf: raw.qk_rope_head_dim / headDim }
      : { field: 'head_dim', prf: DEFAULT_PARTIAL_ROTARY_FACTOR }
  const ropeDim = headDim * given.prf
  if (!Number.isInteger(ropeDim) || ropeDim % 2 !== 0) {
    throw new ConfigError(given.field,
      `expected head_dim (${headDim}) * partial_rotary_factor (${given.prf}) to be an even integer (interleaved rope pairs), found ${ropeDim}`)
  }
  if (ropeDim > headDim) {
    const found = given.field === 'qk_rope_head_dim' ? ropeDim : given.prf
    throw new ConfigError(given.field, `expected a rope dim no larger than head_dim (${headDim}), found ${showValue(found)}`)
  }
  if (raw.qk_rope_head_dim != null && raw.qk_rope_head_dim !== ropeDim) {
    throw new ConfigError('qk_rope_head_dim', `expected head_dim * partial_rotary_factor = ${ropeDim}, found ${raw.qk_rope_head_dim}`)
  }
  return { headDim, partialRotaryFactor: given.prf, ropeDim, topLevelPartialRotaryFactor: raw.partial_rotary_factor != null }
}

// Cross-field rules that the schema cannot state.
function checkShapes (raw: RawConfig, ropeDim: number): void {
  if (raw.num_attention_heads % raw.o_groups !== 0) {
    throw new ConfigError('o_groups', `expected a divisor of num_attention_heads (${raw.num_attention_heads}), found ${raw.o_groups}`)
  }
  if (raw.num_attention_heads % raw.num_key_value_heads !== 0) {
    throw new ConfigError('num_key_value_heads', `expected a divisor of num_attention_heads (${raw.num_attention_heads}), found ${raw.num_key_value_heads}`)
  }
  if (raw.num_experts_per_tok > raw.n_routed_experts) {
    throw new ConfigError('num_experts_per_tok', `expected at most n_routed_experts (${raw.n_routed_experts}), found ${raw.num_experts_per_tok}`)
  }
  if (raw.index_head_dim < ropeDim) {
    throw new ConfigError('index_head_dim', `expected at least the rope dim (${ropeDim}) the indexer rotates, found ${raw.index_head_dim}`)
  }
}

/**
 * Parse and validate a DeepSeek-V4 config.json object (already JSON-decoded). Accepts transformers'
 * new style and the legacy keys, folds them as transformers' `__post_init__` does and fills its
 * defaults. Throws ConfigError naming the field (and `file`, when given).
 */
export function parseDeepseekV4Config (json: unknown, file?: string): DeepseekV4Config {
  try {
    return parseUnlabelled(json)
  } catch (err) {
    if (err instanceof ConfigError && file !== undefined && err.file === undefined) {
      throw new ConfigError(err.field, err.problem, file)
    }
    throw err
  }
}

function parseUnlabelled (json: unknown): DeepseekV4Config {
  const result = rawConfigSchema.safeParse(json, { reportInput: true })
  if (!result.success) throw issueToConfigError(result.error.issues[0], json)
  const raw = result.data
  if (raw.model_type !== 'deepseek_v4') {
    throw new ConfigError('model_type', `expected "deepseek_v4", found ${showValue(raw.model_type)}`)
  }
  const ropeContext = resolveRopeContext(raw)
  checkShapes(raw, ropeContext.ropeDim)
  const schedule = foldAttentionSchedule(raw)
  return {
    vocabSize: raw.vocab_size,
    hiddenSize: raw.hidden_size,
    numHiddenLayers: raw.num_hidden_layers,
    numAttentionHeads: raw.num_attention_heads,
    numKeyValueHeads: raw.num_key_value_heads,
    headDim: raw.head_dim,
    qkRopeHeadDim: ropeContext.ropeDim,
    qLoraRank: raw.q_lora_rank,
    oGroups: raw.o_groups,
    oLoraRank: raw.o_lora_rank,
    slidingWindow: raw.sliding_window,
    layerTypes: schedule.layerTypes,
    compressRatios: schedule.compressRatios,
    compressRates: schedule.compressRates,
    mlpLayerTypes: foldMlpLayerTypes(raw),
    indexNHeads: raw.index_n_heads,
    indexHeadDim: raw.index_head_dim,
    indexTopk: raw.index_topk,
    hcMult: raw.hc_mult,
    hcSinkhornIters: raw.hc_sinkhorn_iters,
    hcEps: raw.hc_eps,
    rmsNormEps: raw.rms_norm_eps,
    nRoutedExperts: raw.n_routed_experts,
    numExpertsPerTok: raw.num_experts_per_tok,
    nSharedExperts: raw.n_shared_experts,
    moeIntermediateSize: raw.moe_intermediate_size,
    scoringFunc: raw.scoring_func,
    routedScalingFactor: raw.routed_scaling_factor,
    swigluLimit: raw.swiglu_limit,
    normTopkProb: raw.norm_topk_prob,
    maxPositionEmbeddings: raw.max_position_embeddings,
    rope: foldRopeParameters(raw, ropeContext),
    tieWordEmbeddings: raw.tie_word_embeddings,
    bosTokenId: raw.bos_token_id,
    eosTokenId: Array.isArray(raw.eos_token_id) ? [...raw.eos_token_id] : raw.eos_token_id,
    padTokenId: raw.pad_token_id,
    numNextnPredictLayers: raw.num_nextn_predict_layers,
    initializerRange: raw.initializer_range,
    torchDtype: raw.dtype ?? raw.torch_dtype ?? null,
  }
}

/** Read `config.json` from a checkpoint directory (or the given .json file) and parse it. */
export async function loadDeepseekV4Config (pathToDirOrConfigJson: string): Promise<DeepseekV4Config> {
  let file = pathToDirOrConfigJson
  let text: string
  try {
    if ((await stat(file)).isDirectory()) file = join(file, 'config.json')
    text = await readFile(file, 'utf8')
  } catch (err) {
    throw new ConfigError('config.json', `cannot read the file: ${(err as Error).message}`, file)
  }
  let json: unknown
  try {
    json = JSON.parse(text)
  } catch (err) {
    throw new ConfigError('(root)', `expected valid JSON: ${(err as Error).message}`, file)
  }
  return parseDeepseekV4Config(json, file)
}

/** The rope parameters a layer uses: `main` for sliding layers, `compress` for CSA and HCA layers. */
export function ropeParamsForLayer (cfg: DeepseekV4Config, layer: number): RopeParams {
  if (!Number.isInteger(layer) || layer < 0 || layer >= cfg.layerTypes.length) {
    throw new ConfigError('layer', `expected an integer layer index in [0, ${cfg.layerTypes.length - 1}], found ${showValue(layer)}`)
  }
  return cfg.layerTypes[layer] === 'sliding_attention' ? cfg.rope.main : cfg.rope.compress
}

/**
 * transformers' `DeepseekV4Config()` with the given config.json keys overriding its defaults
 * (`model_type` is filled in). Note transformers' bare defaults are V4-Flash sizes but the V4-Pro
 * layer pattern and no YaRN; use `deepseekV4FlashConfigJson()` for the real Flash config.
 */
export function defaultDeepseekV4Config (overrides: Record<string, unknown> = {}): DeepseekV4Config {
  return parseDeepseekV4Config({ model_type: 'deepseek_v4', ...overrides })
}
