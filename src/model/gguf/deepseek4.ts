// A loaded DeepSeek-V4 checkpoint as the GGUF that llama.cpp's `deepseek4` loader reads (the
// llama.cpp bundled with node-llama-cpp 3.22.1, release v0.5.0): its metadata keys and its tensor
// names. Tensors keep their numpy layout; GGUF dims are the numpy shape reversed (ggml lists the
// fastest-varying dimension first), so no data is transposed. Routed experts are stacked
// [E, out, in] per projection, tid2eid is I32. What llama.cpp cannot express is refused with a
// GgufExportError naming the config field or tensor.
import { PdBridgeError } from '../../errors.ts'
import { viewAs, type Tensor } from '../../formats/safetensors/index.ts'
import type { GgmlType, GgufTensorSource, GgufValue } from '../../formats/gguf/index.ts'
import type { LoadedCheckpoint } from '../checkpoint/index.ts'
import { paramDtype } from '../checkpoint/params.ts'
import { convertFloats, FloatConversionError, type GgufFloatType } from './convert-floats.ts'
import type { DeepseekV4Config } from '../config.ts'

/** Something a GGUF for llama.cpp's deepseek4 cannot hold or llama.cpp would compute differently; the message names it. */
export class GgufExportError extends PdBridgeError {
  override name = 'GgufExportError'
}

/** The architecture name llama.cpp registers DeepSeek-V4 under. */
export const DEEPSEEK4_ARCH = 'deepseek4'

/** The weight types export-gguf writes (2-D weights only; see ggufTensorType). */
export const GGUF_WEIGHT_TYPES = ['f32', 'f16', 'bf16'] as const
export type GgufWeightType = typeof GGUF_WEIGHT_TYPES[number]

/** llama.cpp's `llama_ftype` numbers for general.file_type. */
const FILE_TYPE: Record<GgufWeightType, number> = { f32: 0, f16: 1, bf16: 32 }

/** llama.cpp's LLAMA_EXPERT_GATING_FUNC_TYPE_SQRT_SOFTPLUS, the only gating its deepseek4 loader accepts. */
export const EXPERT_GATING_SQRT_SOFTPLUS = 4

/** YaRN betas llama.cpp uses for deepseek4: its defaults (the loader never reads the GGUF keys). */
const LLAMA_CPP_YARN_BETA_FAST = 32
const LLAMA_CPP_YARN_BETA_SLOW = 1

/** One GGUF tensor and the internal tensor (and expert rows) it comes from. */
export interface GgufTensorPlan {
  /** The GGUF name (`blk.N.attn_q_a.weight`, ...). */
  name: string
  /** Internal (transformers module) name of the source tensor. */
  source: string
  /** numpy shape of what is written. */
  shape: number[]
  type: GgmlType
  /** For a stacked expert tensor split in two ([E, 2I, H] -> gate or up): the rows [from, to) of each expert. */
  rows?: [number, number]
}

const u32 = (value: number): GgufValue => ({ type: 'UINT32', value })
const f32 = (value: number): GgufValue => ({ type: 'FLOAT32', value: Math.fround(value) })
const str = (value: string): GgufValue => ({ type: 'STRING', value })
const bool = (value: boolean): GgufValue => ({ type: 'BOOL', value })

function refuse (field: string, problem: string): never {
  throw new GgufExportError(`config.json ${field}: ${problem}; llama.cpp's deepseek4 (node-llama-cpp 3.22.1) cannot express this`)
}

/** The config checks: everything llama.cpp's deepseek4 hard-wires or reads from one shared key. */
export function checkExpressible (cfg: DeepseekV4Config): void {
  if (cfg.scoringFunc !== 'sqrtsoftplus') refuse('scoring_func', `is ${JSON.stringify(cfg.scoringFunc)}, the loader accepts only "sqrtsoftplus" (expert_gating_func 4)`)
  if (cfg.compressRates.csa !== 4) refuse('compress_rates', `the compressed-sparse rate is ${cfg.compressRates.csa}, llama.cpp fixes it at 4`)
  if (cfg.compressRates.hca !== 128) refuse('compress_rates', `the heavily-compressed rate is ${cfg.compressRates.hca}, llama.cpp fixes it at 128`)
  const firstMoe = cfg.mlpLayerTypes.indexOf('moe')
  if (firstMoe >= 0 && cfg.mlpLayerTypes.slice(firstMoe).includes('hash_moe')) {
    refuse('mlp_layer_types', `hash_moe layers must come first (llama.cpp's hash_layer_count routes layers [0, N) by tid2eid), found ${JSON.stringify(cfg.mlpLayerTypes)}`)
  }
  const { main, compress } = cfg.rope
  if (main.ropeType !== 'default' || main.factor !== 1 || main.attentionFactor !== 1) {
    refuse('rope_parameters.main', `is ${main.ropeType} with factor ${main.factor}: llama.cpp runs the sliding layers' rope unscaled (freq_scale 1, no YaRN)`)
  }
  if (main.ropeDim !== compress.ropeDim || main.ropeDim !== cfg.qkRopeHeadDim) {
    refuse('partial_rotary_factor', `main and compress rope rotate ${main.ropeDim} and ${compress.ropeDim} channels, llama.cpp has one rope.dimension_count`)
  }
  if (cfg.indexHeadDim < cfg.qkRopeHeadDim) refuse('index_head_dim', `is smaller than the rope dim ${cfg.qkRopeHeadDim}`)
  if (compress.ropeType === 'yarn') {
    if (compress.betaFast !== LLAMA_CPP_YARN_BETA_FAST || compress.betaSlow !== LLAMA_CPP_YARN_BETA_SLOW) {
      refuse('rope_parameters.compress', `YaRN betas ${compress.betaFast} / ${compress.betaSlow}: llama.cpp's deepseek4 ignores the GGUF keys and uses ${LLAMA_CPP_YARN_BETA_FAST} / ${LLAMA_CPP_YARN_BETA_SLOW}`)
    }
    if (compress.attentionFactor !== 1) {
      refuse('rope_parameters.compress.attention_factor', `is ${compress.attentionFactor}: llama.cpp's deepseek4 cancels YaRN's magnitude scaling, i.e. always uses 1`)
    }
    if (!compress.truncate) refuse('rope_parameters.compress.truncate', 'is false: ggml floors and ceils the YaRN correction range')
    if (compress.originalMaxPositionEmbeddings === null) refuse('rope_parameters.compress.original_max_position_embeddings', 'is missing')
  }
  else if (compress.factor !== 1 || compress.attentionFactor !== 1) {
    refuse('rope_parameters.compress', `is ${compress.ropeType} with factor ${compress.factor}, only YaRN or unscaled rope is written`)
  }
  if (cfg.numNextnPredictLayers !== 0) refuse('num_nextn_predict_layers', `is ${cfg.numNextnPredictLayers}: MTP layers are not exported`)
  if (cfg.layerTypes.some((t, i) => (t === 'sliding_attention') !== (cfg.compressRatios[i] === 0))) {
    refuse('compress_ratios', 'a sliding layer with a ratio, or a compressed layer without one')
  }
}

/** The architecture metadata (every key the deepseek4 loader reads, with the types it wants: u32 ints, f32 floats). */
export function deepseek4Metadata (cfg: DeepseekV4Config, opts: { name: string, type: GgufWeightType }): Array<[string, GgufValue]> {
  checkExpressible(cfg)
  const a = (key: string) => `${DEEPSEEK4_ARCH}.${key}`
  const { main, compress } = cfg.rope
  const hashLayers = cfg.mlpLayerTypes.filter((t) => t === 'hash_moe').length
  const layers = cfg.numHiddenLayers
  const kv: Array<[string, GgufValue]> = [
    ['general.architecture', str(DEEPSEEK4_ARCH)],
    ['general.name', str(opts.name)],
    ['general.file_type', u32(FILE_TYPE[opts.type])],
    [a('context_length'), u32(cfg.maxPositionEmbeddings)],
    [a('embedding_length'), u32(cfg.hiddenSize)],
    [a('embedding_length_out'), u32(cfg.hiddenSize * cfg.hcMult)],
    [a('block_count'), u32(layers)],
    [a('attention.head_count'), u32(cfg.numAttentionHeads)],
    // One K=V head whatever num_key_value_heads says: transformers hard-wires it, and so do the tensors.
    [a('attention.head_count_kv'), u32(1)],
    [a('attention.key_length'), u32(cfg.headDim)],
    [a('attention.value_length'), u32(cfg.headDim)],
    [a('attention.layer_norm_rms_epsilon'), f32(cfg.rmsNormEps)],
    [a('attention.q_lora_rank'), u32(cfg.qLoraRank)],
    [a('attention.sliding_window'), u32(cfg.slidingWindow)],
    [a('attention.output_group_count'), u32(cfg.oGroups)],
    [a('attention.output_lora_rank'), u32(cfg.oLoraRank)],
    [a('attention.compress_ratios'), { type: 'ARRAY', itemType: 'UINT32', value: [...cfg.compressRatios] }],
    [a('attention.compress_rope_freq_base'), f32(compress.theta)],
    [a('attention.indexer.head_count'), u32(cfg.indexNHeads)],
    [a('attention.indexer.key_length'), u32(cfg.indexHeadDim)],
    [a('attention.indexer.top_k'), u32(cfg.indexTopk)],
    [a('rope.dimension_count'), u32(cfg.qkRopeHeadDim)],
    [a('rope.freq_base'), f32(main.theta)],
  ]
  if (compress.ropeType === 'yarn') {
    kv.push(
      [a('rope.scaling.type'), str('yarn')],
      [a('rope.scaling.factor'), f32(compress.factor)],
      [a('rope.scaling.original_context_length'), u32(compress.originalMaxPositionEmbeddings!)],
      [a('rope.scaling.yarn_beta_fast'), f32(compress.betaFast)],
      [a('rope.scaling.yarn_beta_slow'), f32(compress.betaSlow)],
    )
  }
  else {
    kv.push([a('rope.scaling.type'), str('none')])
  }
  kv.push(
    [a('expert_count'), u32(cfg.nRoutedExperts)],
    [a('expert_used_count'), u32(cfg.numExpertsPerTok)],
    // transformers builds one shared MLP of moe_intermediate_size whatever n_shared_experts says.
    [a('expert_shared_count'), u32(1)],
    [a('expert_feed_forward_length'), u32(cfg.moeIntermediateSize)],
    [a('expert_weights_scale'), f32(cfg.routedScalingFactor)],
    [a('expert_weights_norm'), bool(cfg.normTopkProb)],
    [a('expert_gating_func'), u32(EXPERT_GATING_SQRT_SOFTPLUS)],
    [a('swiglu_clamp_exp'), { type: 'ARRAY', itemType: 'FLOAT32', value: new Array(layers).fill(Math.fround(cfg.swigluLimit)) }],
    [a('swiglu_clamp_shexp'), { type: 'ARRAY', itemType: 'FLOAT32', value: new Array(layers).fill(Math.fround(cfg.swigluLimit)) }],
    [a('hyper_connection.count'), u32(cfg.hcMult)],
    [a('hyper_connection.sinkhorn_iterations'), u32(cfg.hcSinkhornIters)],
    [a('hyper_connection.epsilon'), f32(cfg.hcEps)],
    [a('hash_layer_count'), u32(hashLayers)],
  )
  return kv
}

// Internal name suffix (after `model.layers.N.`) -> GGUF name suffix (after `blk.N.`).
const LAYER_NAMES: ReadonlyArray<[string, string]> = [
  ['self_attn.sinks', 'attn_sinks.weight'],
  ['self_attn.q_a_proj.weight', 'attn_q_a.weight'],
  ['self_attn.q_a_norm.weight', 'attn_q_a_norm.weight'],
  ['self_attn.q_b_proj.weight', 'attn_q_b.weight'],
  ['self_attn.kv_proj.weight', 'attn_kv.weight'],
  ['self_attn.kv_norm.weight', 'attn_kv_a_norm.weight'],
  ['self_attn.o_a_proj.weight', 'attn_output_a.weight'],
  ['self_attn.o_b_proj.weight', 'attn_output_b.weight'],
  ['self_attn.compressor.position_bias', 'attn_compressor_ape.weight'],
  ['self_attn.compressor.kv_proj.weight', 'attn_compressor_kv.weight'],
  ['self_attn.compressor.gate_proj.weight', 'attn_compressor_gate.weight'],
  ['self_attn.compressor.kv_norm.weight', 'attn_compressor_norm.weight'],
  ['self_attn.compressor.indexer.position_bias', 'indexer_compressor_ape.weight'],
  ['self_attn.compressor.indexer.kv_proj.weight', 'indexer_compressor_kv.weight'],
  ['self_attn.compressor.indexer.gate_proj.weight', 'indexer_compressor_gate.weight'],
  ['self_attn.compressor.indexer.kv_norm.weight', 'indexer_compressor_norm.weight'],
  ['self_attn.compressor.indexer.q_b_proj.weight', 'indexer.attn_q_b.weight'],
  ['self_attn.compressor.indexer.scorer.weights_proj.weight', 'indexer.proj.weight'],
  ['mlp.gate.weight', 'ffn_gate_inp.weight'],
  ['mlp.gate.tid2eid', 'ffn_gate_tid2eid.weight'],
  ['mlp.gate.e_score_correction_bias', 'exp_probs_b.bias'],
  ['mlp.experts.down_proj', 'ffn_down_exps.weight'],
  ['mlp.shared_experts.gate_proj.weight', 'ffn_gate_shexp.weight'],
  ['mlp.shared_experts.up_proj.weight', 'ffn_up_shexp.weight'],
  ['mlp.shared_experts.down_proj.weight', 'ffn_down_shexp.weight'],
  ['input_layernorm.weight', 'attn_norm.weight'],
  ['post_attention_layernorm.weight', 'ffn_norm.weight'],
  ['attn_hc.fn', 'hc_attn_fn.weight'],
  ['attn_hc.base', 'hc_attn_base.weight'],
  ['attn_hc.scale', 'hc_attn_scale.weight'],
  ['ffn_hc.fn', 'hc_ffn_fn.weight'],
  ['ffn_hc.base', 'hc_ffn_base.weight'],
  ['ffn_hc.scale', 'hc_ffn_scale.weight'],
]
const GLOBAL_NAMES: ReadonlyArray<[string, string]> = [
  ['model.embed_tokens.weight', 'token_embd.weight'],
  ['model.norm.weight', 'output_norm.weight'],
  ['model.hc_head.hc_fn', 'output_hc_fn.weight'],
  ['model.hc_head.hc_base', 'output_hc_base.weight'],
  ['model.hc_head.hc_scale', 'output_hc_scale.weight'],
  ['lm_head.weight', 'output.weight'],
]
const GATE_UP = 'mlp.experts.gate_up_proj'

/**
 * The GGUF type of a tensor: I32 for tid2eid; F32 for what transformers keeps in float32 (norms,
 * sinks, position biases, hyper-connection tensors, correction biases) and for every 1-D tensor;
 * the requested type for the other (2-D and stacked) weights, as llama.cpp's own converter does.
 */
export function ggufTensorType (internal: string, shape: readonly number[], type: GgufWeightType): GgmlType {
  const dtype = paramDtype(internal)
  if (dtype === 'I64') return 'I32'
  if (dtype === 'F32' || shape.length < 2 || type === 'f32') return 'F32'
  return type === 'f16' ? 'F16' : 'BF16'
}

/**
 * Every GGUF tensor of `cfg`'s checkpoint, globals first, then layer by layer. `shapeOf` gives an
 * internal tensor's numpy shape, or undefined when the checkpoint does not hold it.
 */
export function deepseek4TensorPlan (cfg: DeepseekV4Config, type: GgufWeightType, shapeOf: (internal: string) => number[] | undefined): GgufTensorPlan[] {
  const plan: GgufTensorPlan[] = []
  const add = (name: string, source: string, rows?: [number, number]) => {
    const shape = shapeOf(source)
    if (shape === undefined) throw new GgufExportError(`tensor ${source}: missing from the loaded checkpoint`)
    const written = rows === undefined ? shape : [shape[0], rows[1] - rows[0], ...shape.slice(2)]
    plan.push({ name, source, shape: written, type: ggufTensorType(source, written, type), rows })
  }
  for (const [internal, gguf] of GLOBAL_NAMES) {
    // Tied embeddings: llama.cpp's deepseek4 requires output.weight, so the embedding is written again.
    add(gguf, internal === 'lm_head.weight' && cfg.tieWordEmbeddings ? 'model.embed_tokens.weight' : internal)
  }
  for (let n = 0; n < cfg.numHiddenLayers; n++) {
    const prefix = `model.layers.${n}.`
    for (const [suffix, gguf] of LAYER_NAMES) {
      if (shapeOf(prefix + suffix) !== undefined) add(`blk.${n}.${gguf}`, prefix + suffix)
    }
    // gate_up_proj [E, 2I, H] holds w1 (gate) in rows [0, I) and w3 (up) in rows [I, 2I) of each expert.
    const inter = cfg.moeIntermediateSize
    add(`blk.${n}.ffn_gate_exps.weight`, prefix + GATE_UP, [0, inter])
    add(`blk.${n}.ffn_up_exps.weight`, prefix + GATE_UP, [inter, 2 * inter])
  }
  return plan
}

/** Bytes of one GGUF tensor from the internal tensor: widened, narrowed or cast, rows picked for the split expert stacks. */
export function convertTensor (plan: GgufTensorPlan, t: Tensor): Uint8Array {
  const count = plan.shape.reduce((a, b) => a * b, 1)
  if (plan.type === 'I32') {
    const ids = viewAs(t, 'I64')
    const out = new Int32Array(count)
    for (let i = 0; i < count; i++) {
      const v = ids[i]
      if (v < -(1n << 31n) || v >= 1n << 31n) throw new GgufExportError(`tensor ${plan.source}: value ${v} at ${i} does not fit the I32 llama.cpp reads`)
      out[i] = Number(v)
    }
    return new Uint8Array(out.buffer)
  }
  try {
    return convertFloats(t, plan.type as GgufFloatType, { source: plan.source, rows: plan.rows })
  }
  catch (err) {
    throw err instanceof FloatConversionError ? new GgufExportError(err.message) : err
  }
}

/** GGUF dims of a numpy shape: reversed (ggml lists the fastest-varying dimension first). */
export function ggufDims (shape: readonly number[]): number[] {
  return [...shape].reverse()
}

/** The architecture metadata and every tensor (converted when the writer reaches it) of a loaded checkpoint. */
export function deepseek4Gguf (ckpt: LoadedCheckpoint, opts: { name: string, type: GgufWeightType }): { metadata: Array<[string, GgufValue]>, tensors: GgufTensorSource[], plan: GgufTensorPlan[] } {
  const cfg = ckpt.config
  const metadata = deepseek4Metadata(cfg, opts)
  const plan = deepseek4TensorPlan(cfg, opts.type, (n) => ckpt.weights.has(n) ? ckpt.weights.shape(n) : undefined)
  const used = new Set(plan.map((p) => p.source))
  const unused = ckpt.weights.names().filter((n) => !used.has(n))
  if (unused.length > 0) throw new GgufExportError(`tensor ${unused[0]}: has no GGUF name for llama.cpp's deepseek4${unused.length > 1 ? ` (and ${unused.length - 1} more)` : ''}`)
  const tensors = plan.map((p): GgufTensorSource => ({
    name: p.name,
    type: p.type,
    dims: ggufDims(p.shape),
    data: () => convertTensor(p, ckpt.weights.get(p.source)),
  }))
  return { metadata, tensors, plan }
}
