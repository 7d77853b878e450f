// The one table between the two ways a DeepSeek-V4 checkpoint names its tensors.
//
// - `transformers`: transformers 5.17's in-memory module names (`model.layers.N.self_attn.q_a_proj.weight`,
//   stacked experts `mlp.experts.gate_up_proj [E, 2*inter, hidden]`). This is the engine's internal
//   layout (params.ts lists it) and what transformers happens to accept on load.
// - `deepseek`: DeepSeek's own names (`model.layers.N.attn.wq_a.weight`, one tensor per expert
//   `ffn.experts.E.w1/w2/w3.weight`, `head.weight`), which `save_pretrained` writes back and the hub
//   ships. The hub's original release also drops the `model.` prefix and names four top-level
//   tensors differently (`embed.weight`, `norm.weight`, `hc_head_fn/base/scale`): aliases below.
//
// Read off transformers itself: `get_checkpoint_conversion_mapping("deepseek_v4")` (its renames,
// applied on load) and a tiny model saved with `save_pretrained`, every saved tensor matched to the
// in-memory one it equals (harness/hf_saved_checkpoint.py names -> harness/fixtures/hf-saved-names-tiny.json).
import type { DeepseekV4Config } from '../config.ts'
import { expectedParameters, type ParamSpec } from './params.ts'

/** Which naming a checkpoint uses. */
export type Naming = 'transformers' | 'deepseek'

/** One renamed tensor: the internal (transformers) name and DeepSeek's, relative to `model.layers.{N}.` or absolute. */
export interface NameRule {
  readonly internal: string
  readonly deepseek: string
}

/** Top-level tensors (absolute names). save_pretrained keeps the first four under transformers' names. */
export const GLOBAL_RULES: readonly NameRule[] = [
  { internal: 'model.embed_tokens.weight', deepseek: 'model.embed_tokens.weight' },
  { internal: 'model.norm.weight', deepseek: 'model.norm.weight' },
  { internal: 'model.hc_head.hc_fn', deepseek: 'model.hc_head.hc_fn' },
  { internal: 'model.hc_head.hc_base', deepseek: 'model.hc_head.hc_base' },
  { internal: 'model.hc_head.hc_scale', deepseek: 'model.hc_head.hc_scale' },
  { internal: 'lm_head.weight', deepseek: 'head.weight' },
]

/** The hub's original names for top-level tensors (no `model.` prefix), as transformers' renames accept them. */
export const HUB_GLOBAL_ALIASES: Readonly<Record<string, string>> = {
  'embed.weight': 'model.embed_tokens.weight',
  'norm.weight': 'model.norm.weight',
  hc_head_fn: 'model.hc_head.hc_fn',
  hc_head_base: 'model.hc_head.hc_base',
  hc_head_scale: 'model.hc_head.hc_scale',
}

/** Per-layer tensors, relative to `model.layers.{N}.`. */
export const LAYER_RULES: readonly NameRule[] = [
  { internal: 'self_attn.sinks', deepseek: 'attn.attn_sink' },
  { internal: 'self_attn.q_a_proj.weight', deepseek: 'attn.wq_a.weight' },
  { internal: 'self_attn.q_a_norm.weight', deepseek: 'attn.q_norm.weight' },
  { internal: 'self_attn.q_b_proj.weight', deepseek: 'attn.wq_b.weight' },
  { internal: 'self_attn.kv_proj.weight', deepseek: 'attn.wkv.weight' },
  { internal: 'self_attn.kv_norm.weight', deepseek: 'attn.norm.weight' },
  { internal: 'self_attn.o_a_proj.weight', deepseek: 'attn.wo_a.weight' },
  { internal: 'self_attn.o_b_proj.weight', deepseek: 'attn.wo_b.weight' },
  { internal: 'self_attn.compressor.position_bias', deepseek: 'attn.compressor.ape' },
  { internal: 'self_attn.compressor.kv_proj.weight', deepseek: 'attn.compressor.wkv.weight' },
  { internal: 'self_attn.compressor.gate_proj.weight', deepseek: 'attn.compressor.wgate.weight' },
  { internal: 'self_attn.compressor.kv_norm.weight', deepseek: 'attn.compressor.norm.weight' },
  { internal: 'self_attn.compressor.indexer.position_bias', deepseek: 'attn.indexer.compressor.ape' },
  { internal: 'self_attn.compressor.indexer.kv_proj.weight', deepseek: 'attn.indexer.compressor.wkv.weight' },
  { internal: 'self_attn.compressor.indexer.gate_proj.weight', deepseek: 'attn.indexer.compressor.wgate.weight' },
  { internal: 'self_attn.compressor.indexer.kv_norm.weight', deepseek: 'attn.indexer.compressor.norm.weight' },
  { internal: 'self_attn.compressor.indexer.q_b_proj.weight', deepseek: 'attn.indexer.wq_b.weight' },
  { internal: 'self_attn.compressor.indexer.scorer.weights_proj.weight', deepseek: 'attn.indexer.weights_proj.weight' },
  { internal: 'mlp.gate.weight', deepseek: 'ffn.gate.weight' },
  { internal: 'mlp.gate.tid2eid', deepseek: 'ffn.gate.tid2eid' },
  { internal: 'mlp.gate.e_score_correction_bias', deepseek: 'ffn.gate.bias' },
  { internal: 'mlp.shared_experts.gate_proj.weight', deepseek: 'ffn.shared_experts.w1.weight' },
  { internal: 'mlp.shared_experts.up_proj.weight', deepseek: 'ffn.shared_experts.w3.weight' },
  { internal: 'mlp.shared_experts.down_proj.weight', deepseek: 'ffn.shared_experts.w2.weight' },
  { internal: 'input_layernorm.weight', deepseek: 'attn_norm.weight' },
  { internal: 'post_attention_layernorm.weight', deepseek: 'ffn_norm.weight' },
  { internal: 'attn_hc.fn', deepseek: 'hc_attn_fn' },
  { internal: 'attn_hc.base', deepseek: 'hc_attn_base' },
  { internal: 'attn_hc.scale', deepseek: 'hc_attn_scale' },
  { internal: 'ffn_hc.fn', deepseek: 'hc_ffn_fn' },
  { internal: 'ffn_hc.base', deepseek: 'hc_ffn_base' },
  { internal: 'ffn_hc.scale', deepseek: 'hc_ffn_scale' },
]

/**
 * Stacked expert tensors and the per-expert 2-D tensors they are made of, relative to
 * `model.layers.{N}.`, `{E}` the expert. Parts are concatenated along rows in the order given:
 * `gate_up_proj[E] = [w1; w3]` (gate rows first), `down_proj[E] = w2`. transformers' per-expert
 * names (its older MoE layout) are accepted as the same parts.
 */
export const EXPERT_RULES: readonly { internal: string, deepseek: readonly string[], transformers: readonly string[] }[] = [
  { internal: 'mlp.experts.gate_up_proj', deepseek: ['ffn.experts.{E}.w1.weight', 'ffn.experts.{E}.w3.weight'], transformers: ['mlp.experts.{E}.gate_proj.weight', 'mlp.experts.{E}.up_proj.weight'] },
  { internal: 'mlp.experts.down_proj', deepseek: ['ffn.experts.{E}.w2.weight'], transformers: ['mlp.experts.{E}.down_proj.weight'] },
]

const LAYER_PREFIX = /^model\.layers\.(\d+)\.(.+)$/

/** A file tensor's role: which internal tensor it fills, and how. */
export interface SourceName {
  /** The internal tensor it belongs to. */
  readonly internal: string
  /** The namings this exact name belongs to (both for the names save_pretrained leaves unchanged). */
  readonly namings: readonly Naming[]
  /** For one expert's part of a stacked tensor: the expert and the part's index in its concatenation. */
  readonly expert?: number
  readonly part?: number
  /** The hub's original spelling (no `model.` prefix, or a top-level alias). */
  readonly hub?: boolean
}

/**
 * Every name a checkpoint for `cfg` may use for each of its tensors, under either naming (and the
 * hub spellings), keyed by file name. The internal names of expectedParameters(cfg) are the keys'
 * targets.
 */
export function sourceNames (cfg: DeepseekV4Config, specs: readonly ParamSpec[] = expectedParameters(cfg)): Map<string, SourceName> {
  const out = new Map<string, SourceName>()
  const add = (name: string, source: SourceName) => {
    const prior = out.get(name)
    // A name both namings spell alike (model.embed_tokens.weight) belongs to both.
    if (prior !== undefined) out.set(name, { ...prior, namings: [...new Set([...prior.namings, ...source.namings])] })
    else out.set(name, source)
  }
  const addDeepseek = (name: string, source: Omit<SourceName, 'namings'>) => {
    add(name, { ...source, namings: ['deepseek'] })
    const hub = hubSpelling(name)
    if (hub !== name) add(hub, { ...source, namings: ['deepseek'], hub: true })
  }
  const experts = cfg.nRoutedExperts
  for (const spec of specs) {
    add(spec.name, { internal: spec.name, namings: ['transformers'] })
    const expertRule = EXPERT_RULES.find((r) => layerRelative(spec.name)?.rest === r.internal)
    if (expertRule !== undefined) {
      const layer = layerRelative(spec.name)!.layer
      for (let e = 0; e < experts; e++) {
        expertRule.deepseek.forEach((p, part) => addDeepseek(layerName(layer, p.replace('{E}', String(e))), { internal: spec.name, expert: e, part }))
        expertRule.transformers.forEach((p, part) => add(layerName(layer, p.replace('{E}', String(e))), { internal: spec.name, namings: ['transformers'], expert: e, part }))
      }
      continue
    }
    addDeepseek(deepseekName(spec.name), { internal: spec.name })
  }
  return out
}

function layerRelative (name: string): { layer: number, rest: string } | null {
  const m = LAYER_PREFIX.exec(name)
  return m === null ? null : { layer: Number(m[1]), rest: m[2] }
}

function layerName (layer: number, rest: string): string {
  return `model.layers.${layer}.${rest}`
}

/** The hub's spelling of a DeepSeek name: top-level aliases, and per-layer names without `model.`. */
function hubSpelling (deepseek: string): string {
  const alias = Object.entries(HUB_GLOBAL_ALIASES).find(([, target]) => target === deepseek)
  if (alias !== undefined) return alias[0]
  return deepseek.startsWith('model.layers.') ? deepseek.slice('model.'.length) : deepseek
}

/**
 * DeepSeek's (save_pretrained's) name for an internal tensor that is not a stacked expert tensor.
 * Throws for a name the table does not hold: the table is the only place names are mapped.
 */
export function deepseekName (internal: string): string {
  const global = GLOBAL_RULES.find((r) => r.internal === internal)
  if (global !== undefined) return global.deepseek
  const rel = layerRelative(internal)
  const rule = rel === null ? undefined : LAYER_RULES.find((r) => r.internal === rel.rest)
  if (rel === null || rule === undefined) throw new Error(`naming table: no DeepSeek name for ${internal}`)
  return layerName(rel.layer, rule.deepseek)
}

/** One tensor as save_pretrained writes it: its name, shape, and where its values come from internally. */
export interface SavedTensor {
  readonly name: string
  readonly shape: number[]
  readonly internal: string
  /** For an expert's part: the expert index and the row range of internal[expert] it takes. */
  readonly expert?: number
  readonly rows?: readonly [number, number]
}

/** The tensors a DeepSeek-named checkpoint for `cfg` holds, in the internal list's order (experts split per expert). */
export function deepseekLayout (cfg: DeepseekV4Config, specs: readonly ParamSpec[] = expectedParameters(cfg)): SavedTensor[] {
  const out: SavedTensor[] = []
  for (const spec of specs) {
    const rel = layerRelative(spec.name)
    const rule = rel === null ? undefined : EXPERT_RULES.find((r) => r.internal === rel.rest)
    if (rel === null || rule === undefined) {
      out.push({ name: deepseekName(spec.name), shape: [...spec.shape], internal: spec.name })
      continue
    }
    const [experts, rows, cols] = spec.shape
    const partRows = rows / rule.deepseek.length
    for (let e = 0; e < experts; e++) {
      rule.deepseek.forEach((p, part) => {
        out.push({
          name: layerName(rel.layer, p.replace('{E}', String(e))),
          shape: [partRows, cols],
          internal: spec.name,
          expert: e,
          rows: [part * partRows, (part + 1) * partRows],
        })
      })
    }
  }
  return out
}
