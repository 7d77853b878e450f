// The shape of a raw config.json (types only; cross-field rules live with the code that folds them).
import { z } from 'zod'
import { ConfigError } from '../../errors.ts'
import { TRANSFORMERS_DEFAULTS as D } from './defaults.ts'

const positiveInt = z.int().positive()
const nonNegativeInt = z.int().nonnegative()
const positiveNumber = z.number().positive()
const tokenId = nonNegativeInt.nullable()

/** One rope dict (flat `rope_scaling` or a nested `main`/`compress`); semantic checks happen later. */
export const rawRopeDictSchema = z.looseObject({
  rope_type: z.string().optional(),
  type: z.string().optional(),
  rope_theta: positiveNumber.optional(),
  partial_rotary_factor: positiveNumber.nullable().optional(),
  factor: positiveNumber.nullable().optional(),
  original_max_position_embeddings: positiveInt.nullable().optional(),
  beta_fast: z.number().nullable().optional(),
  beta_slow: z.number().nullable().optional(),
  attention_factor: positiveNumber.nullable().optional(),
  mscale: z.number().nullable().optional(),
  mscale_all_dim: z.number().nullable().optional(),
  truncate: z.boolean().nullable().optional(),
})

/** A rope dict after type checking. */
export type RawRopeDict = z.infer<typeof rawRopeDictSchema>

/** config.json as transformers reads it: absent keys take the dataclass defaults, unknown keys are kept. */
export const rawConfigSchema = z.looseObject({
  model_type: z.string().optional(),
  vocab_size: positiveInt.default(D.vocab_size),
  hidden_size: positiveInt.default(D.hidden_size),
  moe_intermediate_size: positiveInt.default(D.moe_intermediate_size),
  num_hidden_layers: positiveInt.default(D.num_hidden_layers),
  num_attention_heads: positiveInt.default(D.num_attention_heads),
  num_key_value_heads: positiveInt.default(D.num_key_value_heads),
  head_dim: positiveInt.default(D.head_dim),
  q_lora_rank: positiveInt.default(D.q_lora_rank),
  num_experts_per_tok: positiveInt.default(D.num_experts_per_tok),
  n_routed_experts: positiveInt.default(D.n_routed_experts),
  n_shared_experts: nonNegativeInt.default(D.n_shared_experts),
  scoring_func: z.enum(['sqrtsoftplus', 'softmax', 'sigmoid']).default(D.scoring_func),
  norm_topk_prob: z.boolean().default(D.norm_topk_prob),
  routed_scaling_factor: positiveNumber.default(D.routed_scaling_factor),
  max_position_embeddings: positiveInt.default(D.max_position_embeddings),
  rope_theta: positiveNumber.default(D.rope_theta),
  compress_rope_theta: positiveNumber.default(D.compress_rope_theta),
  layer_types: z.array(z.string()).nullable().optional(),
  compress_rates: z.looseObject({
    compressed_sparse_attention: positiveInt,
    heavily_compressed_attention: positiveInt,
  }).nullable().optional(),
  mlp_layer_types: z.array(z.string()).nullable().optional(),
  hc_mult: positiveInt.default(D.hc_mult),
  hc_sinkhorn_iters: positiveInt.default(D.hc_sinkhorn_iters),
  hc_eps: positiveNumber.default(D.hc_eps),
  swiglu_limit: positiveNumber.default(D.swiglu_limit),
  sliding_window: positiveInt.default(D.sliding_window),
  o_groups: positiveInt.default(D.o_groups),
  o_lora_rank: positiveInt.default(D.o_lora_rank),
  index_n_heads: positiveInt.default(D.index_n_heads),
  index_head_dim: positiveInt.default(D.index_head_dim),
  index_topk: positiveInt.default(D.index_topk),
  num_nextn_predict_layers: nonNegativeInt.default(D.num_nextn_predict_layers),
  hidden_act: z.literal('silu').default(D.hidden_act),
  initializer_range: z.number().nonnegative().default(D.initializer_range),
  rms_norm_eps: positiveNumber.default(D.rms_norm_eps),
  pad_token_id: tokenId.default(D.pad_token_id),
  bos_token_id: tokenId.default(D.bos_token_id),
  eos_token_id: z.union([nonNegativeInt, z.array(nonNegativeInt), z.null()]).default(D.eos_token_id),
  tie_word_embeddings: z.boolean().default(D.tie_word_embeddings),
  attention_bias: z.literal(false).default(D.attention_bias),
  mlp_bias: z.literal(false).default(D.mlp_bias),
  rope_parameters: z.record(z.string(), z.unknown()).nullable().optional(),
  rope_scaling: z.record(z.string(), z.unknown()).nullable().optional(),
  partial_rotary_factor: positiveNumber.nullable().optional(),
  dtype: z.string().nullable().optional(),
  torch_dtype: z.string().nullable().optional(),
  // Legacy keys that transformers' __post_init__ folds into the fields above.
  compress_ratios: z.array(nonNegativeInt).nullable().optional(),
  compress_rate_csa: positiveInt.nullable().optional(),
  compress_rate_hca: positiveInt.nullable().optional(),
  num_hash_layers: nonNegativeInt.nullable().optional(),
  qk_rope_head_dim: positiveInt.nullable().optional(),
})

/** config.json after type checking and defaults. */
export type RawConfig = z.infer<typeof rawConfigSchema>

/** `a.b[2].c`: the JSON path of a field, as a user would look for it in config.json. */
export function fieldPath (path: readonly PropertyKey[]): string {
  let out = ''
  for (const part of path) {
    if (typeof part === 'number') out += `[${part}]`
    else out += (out === '' ? '' : '.') + String(part)
  }
  return out === '' ? '(root)' : out
}

/** A short rendering of a found value for error messages. */
export function showValue (value: unknown): string {
  if (value === undefined) return 'nothing (key missing)'
  let text: string
  try {
    text = JSON.stringify(value) ?? String(value)
  } catch {
    text = String(value)
  }
  return text.length > 80 ? text.slice(0, 77) + '...' : text
}

const typeNames: Record<string, string> = {
  int: 'an integer',
  number: 'a number',
  string: 'a string',
  boolean: 'a boolean',
  array: 'an array',
  object: 'an object',
  record: 'an object',
  null: 'null',
}

// What one zod issue expected, in words.
function expectedText (issue: z.core.$ZodIssue): string {
  switch (issue.code) {
    case 'invalid_type':
      return typeNames[issue.expected] ?? issue.expected
    case 'too_small':
      return issue.origin === 'array'
        ? `at least ${String(issue.minimum)} entries`
        : `a number ${issue.inclusive ? '>=' : '>'} ${String(issue.minimum)}`
    case 'too_big':
      return `a number ${issue.inclusive ? '<=' : '<'} ${String(issue.maximum)}`
    case 'invalid_value':
      return issue.values.length === 1
        ? showValue(issue.values[0])
        : `one of ${issue.values.map(showValue).join(', ')}`
    case 'invalid_union':
      return [...new Set(issue.errors.map(branch => branch[0] ? expectedText(branch[0]) : '?'))].join(' or ')
    default:
      return issue.message
  }
}

/** Turn the first zod issue into a ConfigError that names the field, what was expected and what was found. */
export function issueToConfigError (issue: z.core.$ZodIssue, root: unknown, file?: string): ConfigError {
  const found = issue.input !== undefined ? issue.input : valueAt(root, issue.path)
  return new ConfigError(fieldPath(issue.path), `expected ${expectedText(issue)}, found ${showValue(found)}`, file)
}

// The value at `path` inside `root`, or undefined.
function valueAt (root: unknown, path: readonly PropertyKey[]): unknown {
  let at: unknown = root
  for (const part of path) {
    if (at === null || typeof at !== 'object') return undefined
    at = (at as Record<PropertyKey, unknown>)[part]
  }
  return at
}
