// The weights an engine computes with: a checkpoint's tensors as one numerics profile holds them.
import type { AccumulationOrder } from '../../kernels/index.ts'
import type { NumericsProfile, WeightFormat, WeightGroup } from '../profiles/types.ts'

/** y[m, outFeatures] = x[m, inFeatures] · W^T in the profile's weight format and accumulation order. */
export interface Linear {
  readonly inFeatures: number
  readonly outFeatures: number
  /** x is [m, inFeatures] float32; writes y into `out` (length m * outFeatures) when given, and returns y. */
  apply (x: Float32Array, m: number, out?: Float32Array): Float32Array
  /**
   * Present where apply is exactly matmulBf16 of these codes ([outFeatures, inFeatures]) in this
   * order: a MoE layer whose experts all have it runs them in the native moeExperts (the same bits).
   */
  readonly bf16Matmul?: { readonly codes: Uint16Array, readonly order: AccumulationOrder }
}

/** How prepared weight values are held: bf16 codes (exact for bf16, MX and ue8m0-fp8 values) or float32. */
export type WeightContainer = 'bf16' | 'f32'

/** A Linear that also says what it holds. */
export interface PreparedLinear extends Linear {
  /** The name it was asked for (`...experts.down_proj[3]` for expert 3). */
  readonly name: string
  readonly group: WeightGroup
  readonly format: WeightFormat
  readonly container: WeightContainer
  /** The weight values every product uses, [outFeatures, inFeatures] row-major, in a new float32 array. */
  values (): Float32Array
  /** Rows [first, first + count) as a Linear of their own (no copy): each output is the same dot product, so the same bits. */
  rowBlock (first: number, count: number): Linear
}

/** A checkpoint's weights under one numerics profile. Returned arrays are read-only by convention. */
export interface PreparedWeights {
  readonly profile: NumericsProfile
  /** A projection by parameter name; `name[e]` addresses expert e of a 3-D expert tensor. */
  linear (name: string): PreparedLinear
  /** A non-linear parameter (norm weights, sinks, position biases, hc params, correction bias), flat. */
  vector (name: string): Float32Array
  /** The hash router's token -> expert table of a hash_moe layer, flat [vocab, experts_per_tok]. */
  tid2eid (layer: number): Int32Array
  /** Write the embedding row of `tokenId` into `out` (length hidden) and return it. */
  embedding (tokenId: number, out: Float32Array): Float32Array
}
