// One decoder layer: attention site (hyper-connection pre, input_layernorm, attention, write-back),
// then the FFN site (pre, post_attention_layernorm, MoE, write-back), on the hc_mult residual streams.
import { PdBridgeError } from '../../errors.ts'
import type { ActivationRounding } from './activation.ts'
import type { Attention, AttentionSegment } from './attention.ts'
import type { LayerCache } from './cache.ts'
import { hcPost, hcPre, type HcParams, type HcShape } from './hyper-connections.ts'
import type { Moe } from './moe.ts'
import { weightedRmsNorm } from './norms.ts'
import { scratch } from './scratch.ts'

/** Sees each layer's attention input: exactly the rows [count, hidden] the attention block receives. */
export type AttnInputHook = (layer: number, startPos: number, rows: Float32Array, count: number) => void

/** One layer's weights around its attention and MoE. */
export interface DecoderLayerWeights {
  attnHc: HcParams
  inputNorm: Float32Array
  ffnHc: HcParams
  postNorm: Float32Array
}

/** A decoder layer: its hyper-connection sites and norms, its Attention and its Moe. */
export class DecoderLayer {
  constructor (readonly index: number, readonly weights: DecoderLayerWeights, readonly attention: Attention, readonly moe: Moe,
    private readonly hcShape: HcShape, private readonly act: ActivationRounding) {}

  /** The streams h [n, hc, hidden] of tokens at positions start.. after this layer, updating its cache. */
  forward (h: Float32Array, n: number, tokens: ArrayLike<number>, start: number, cache: LayerCache, hook?: AttnInputHook): Float32Array {
    return this.forwardSegments(h, tokens, [{ n, start, cache }], hook)
  }

  /**
   * The same for several sequences' rows at once (segment i: n_i rows of `tokens` and h, in order,
   * at positions start_i.. of its own cache). Everything but attention is row by row, and attention
   * keeps each segment to its own cache, so each segment's rows equal forward() of it alone.
   * A hook (capture) runs on a single segment only. The new streams go into `out` when given (not h).
   */
  forwardSegments (h: Float32Array, tokens: ArrayLike<number>, segments: readonly AttentionSegment[], hook?: AttnInputHook,
    out?: Float32Array): Float32Array {
    const { weights: w, hcShape, act } = this
    const hidden = hcShape.hidden
    const eps = hcShape.rmsEps
    const n = tokens.length
    // Attention site.
    const a = hcPre(h, n, w.attnHc, hcShape, act)
    const x = weightedRmsNorm(a.collapsed, n, hidden, w.inputNorm, eps, act)
    if (hook !== undefined) {
      if (segments.length !== 1) throw new PdBridgeError(`decoder layer ${this.index}: an attention-input hook takes one sequence at a time, not ${segments.length}`)
      hook(this.index, segments[0].start, x, n)
    }
    const attn = this.attention.forwardSegments(x, segments)
    // The streams between the two sites live only inside this call: a scratch slot, not n * hc * hidden fresh floats.
    h = hcPost(h, n, a, attn, hcShape, act, scratch('layer-mid-streams', h.length))
    // FFN site.
    const f = hcPre(h, n, w.ffnHc, hcShape, act)
    const y = weightedRmsNorm(f.collapsed, n, hidden, w.postNorm, eps, act)
    const moe = this.moe.forward(y, n, tokens)
    return hcPost(h, n, f, moe, hcShape, act, out)
  }
}
