// Which weight group a linear's name belongs to, by transformers' DeepseekV4ForCausalLM names.
import type { WeightGroup } from '../profiles/types.ts'

/** A linear name taken apart: the checkpoint tensor, the expert (3-D tensors) and the group. */
export interface LinearName {
  /** The checkpoint tensor that holds the weight. */
  tensor: string
  /** The expert index for `...experts.{gate_up_proj|down_proj}[e]`, else null. */
  expert: number | null
  group: WeightGroup
}

const LAYER = String.raw`model\.layers\.\d+\.`
const PATTERNS: Array<[RegExp, WeightGroup]> = [
  [/^lm_head\.weight$/, 'lmHead'],
  // Used as a linear, the embedding matrix is the (tied) LM head.
  [/^model\.embed_tokens\.weight$/, 'lmHead'],
  [new RegExp(`^${LAYER}self_attn\\.(q_a_proj|q_b_proj|kv_proj|o_a_proj|o_b_proj)\\.weight$`), 'attention'],
  [new RegExp(`^${LAYER}self_attn\\.compressor\\.(indexer\\.)?(kv_proj|gate_proj)\\.weight$`), 'compressor'],
  [new RegExp(`^${LAYER}self_attn\\.compressor\\.indexer\\.(q_b_proj|scorer\\.weights_proj)\\.weight$`), 'indexerQ'],
  [new RegExp(`^${LAYER}mlp\\.gate\\.weight$`), 'router'],
  [new RegExp(`^${LAYER}mlp\\.shared_experts\\.(gate_proj|up_proj|down_proj)\\.weight$`), 'sharedExperts'],
]
const EXPERT = new RegExp(`^(${LAYER}mlp\\.experts\\.(?:gate_up_proj|down_proj))\\[(0|[1-9]\\d{0,8})\\]$`)
const EXPERT_TENSOR = new RegExp(`^${LAYER}mlp\\.experts\\.(gate_up_proj|down_proj)$`)

/** The group of a linear weight name, or null when the name is no DeepSeek-V4 linear. */
export function parseLinearName (name: string): LinearName | null {
  const expert = EXPERT.exec(name)
  if (expert !== null) return { tensor: expert[1], expert: Number(expert[2]), group: 'experts' }
  for (const [pattern, group] of PATTERNS) if (pattern.test(name)) return { tensor: name, expert: null, group }
  return null
}

/** Whether `name` is a whole 3-D routed-expert tensor (which linear() addresses one expert at a time). */
export function isExpertTensor (name: string): boolean {
  return EXPERT_TENSOR.test(name)
}
