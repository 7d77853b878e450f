// What a numerics profile is: plain data naming every format, rounding point and order an engine
// uses, so two engines can be compared (and fingerprinted) by their profiles alone.

/** How a weight group is stored after load, i.e. which values its products see. */
export type WeightFormat = 'f32' | 'bf16' | 'mxfp8' | 'mxfp4' | 'fp8-block128'

/** Every weight format, in documentation order. */
export const WEIGHT_FORMATS: readonly WeightFormat[] = ['f32', 'bf16', 'mxfp8', 'mxfp4', 'fp8-block128']

/**
 * The groups of linear weights a profile gives formats to:
 * - embedding: `model.embed_tokens.weight` (the row lookup);
 * - lmHead: `lm_head.weight` (or the tied embedding used as the head);
 * - attention: `self_attn.{q_a_proj, q_b_proj, kv_proj, o_a_proj, o_b_proj}`;
 * - compressor: `kv_proj` / `gate_proj` of `self_attn.compressor` and `self_attn.compressor.indexer`;
 * - indexerQ: `self_attn.compressor.indexer.q_b_proj` and `.scorer.weights_proj`;
 * - router: `mlp.gate.weight`;
 * - experts: the routed `mlp.experts.gate_up_proj` / `down_proj` (3-D, one matrix per expert);
 * - sharedExperts: `mlp.shared_experts.{gate_proj, up_proj, down_proj}`.
 */
export type WeightGroup = 'embedding' | 'lmHead' | 'attention' | 'compressor' | 'indexerQ' | 'router' | 'experts' | 'sharedExperts'

/** Every weight group, in documentation order. */
export const WEIGHT_GROUPS: readonly WeightGroup[] = [
  'embedding', 'lmHead', 'attention', 'compressor', 'indexerQ', 'router', 'experts', 'sharedExperts',
]

/** Activation storage: 'bf16' rounds wherever the engine holds a bf16 tensor. */
export type ActivationFormat = 'f32' | 'bf16'

/** How vector() hands out norm weights, sinks, position biases, hc params and correction biases. */
export type VectorFormat = 'f32' | 'bf16'

/**
 * The accumulation order of every matmul dot product (docs/kernels.md): 'lanes8' is the 8-lane
 * order; 'blocks128' reduces each 128-long block in that order and adds the block sums in order;
 * 'lanes8-fma' is the 8-lane order with fused multiply-adds; 'sequential-fma' is one fused
 * multiply-add chain over k in order.
 */
export type MatmulOrder = 'lanes8' | 'blocks128' | 'lanes8-fma' | 'sequential-fma'

/** The DeepSeek reference's quantisation round trips on cached activations, each a switch. */
export interface ReferenceQuant {
  /** fp8 (e4m3, ue8m0 scale per 64) round trip of the nope dims of every window row. */
  readonly windowFp8: boolean
  /** The same round trip on the nope dims of every main compressed-pool entry. */
  readonly mainPoolFp8: boolean
  /** Hadamard, bf16, then fp4 (e2m1, ue8m0 scale per 32) on indexer queries and indexer-pool entries. */
  readonly indexerFp4: boolean
}

/** A named, versioned numerics profile. Plain data: compare and fingerprint it as JSON. */
export interface NumericsProfile {
  /** Profile name, e.g. 'decoder' or 'decoder+refquant'. */
  readonly name: string
  /** Bumped whenever any field of a named profile changes meaning. */
  readonly version: number
  readonly activations: ActivationFormat
  readonly vectors: VectorFormat
  /** Storage format of each weight group after load. */
  readonly weights: Readonly<Record<WeightGroup, WeightFormat>>
  readonly matmulOrder: MatmulOrder
  readonly referenceQuant: ReferenceQuant
}
