// The DeepSeek-V4 engine: load a checkpoint under a numerics profile, prefill (one shot or in
// chunks, continuing from the cache), decode token by token, greedy generation, and caches built
// from attention inputs alone.
import { PdBridgeError } from '../../errors.ts'
import { loadCheckpoint, type LoadedCheckpoint } from '../checkpoint/index.ts'
import type { DeepseekV4Config } from '../config.ts'
import { getProfile, type NumericsProfile } from '../profiles/index.ts'
import { prepareWeights, type PreparedWeights } from '../weights/index.ts'
import { ModelCache } from './cache.ts'
import { DeepseekV4Model, type AttnInputHook } from './deepseek-v4.ts'

export { ModelCache, LayerCache, CompressorState, type DumpTensor } from './cache.ts'
export type { AttnInputHook } from './deepseek-v4.ts'

/** Which logits a prefill returns: the last position's, every position's, the last n, or none. */
export type LogitsRequest = 'last' | 'all' | 'none' | { tail: number }

/** Options of a prefill. */
export interface PrefillOptions {
  /** Called per layer with exactly the rows its attention block receives (per internal chunk). */
  attnInputHook?: AttnInputHook
  /** Default 'last'. */
  logits?: LogitsRequest
  /** Longest run of tokens in one internal forward (memory bound); results do not depend on it. Default 512. */
  maxChunk?: number
}

/** What a prefill returns. */
export interface PrefillResult {
  /** [rows, vocab] float32 */
  logits: Float32Array
  rows: number
  vocab: number
  /** Absolute position of the first logits row. */
  firstPosition: number
}

function resolveProfile (profile: string | NumericsProfile): NumericsProfile {
  return typeof profile === 'string' ? getProfile(profile) : profile
}

function argmax (v: Float32Array, off: number, n: number): number {
  let best = 0
  for (let i = 1; i < n; i++) if (v[off + i] > v[off + best]) best = i
  return best
}

/** A loaded DeepSeek-V4 model under one numerics profile. */
export class DeepseekV4Engine {
  private constructor (private readonly model: DeepseekV4Model) {}

  /**
   * Load a checkpoint directory under a numerics profile: a name ('f32', 'hf-bf16', 'decoder',
   * 'prefill', each optionally '+refquant'; see docs/profiles.md) or a NumericsProfile.
   */
  static async load (dir: string, profile: string | NumericsProfile = 'f32'): Promise<DeepseekV4Engine> {
    const p = resolveProfile(profile)
    return DeepseekV4Engine.fromCheckpoint(await loadCheckpoint(dir), p)
  }

  /** Build from an already loaded checkpoint (its weights prepared under the profile unless given). */
  static fromCheckpoint (ckpt: LoadedCheckpoint, profile: string | NumericsProfile = 'f32', weights?: PreparedWeights): DeepseekV4Engine {
    const p = resolveProfile(profile)
    const cfg = ckpt.config
    const w = weights ?? prepareWeights(ckpt.weights, cfg, p)
    if (w.profile.name !== p.name) throw new PdBridgeError(`engine: the weights were prepared for profile ${w.profile.name}, not ${p.name}`)
    return new DeepseekV4Engine(new DeepseekV4Model(cfg, w, p))
  }

  /** The model config. */
  get config (): DeepseekV4Config {
    return this.model.cfg
  }

  /** The numerics profile. */
  get profile (): NumericsProfile {
    return this.model.profile
  }

  /** An empty cache for this model. */
  newCache (): ModelCache {
    return this.model.makeCache()
  }

  /**
   * Run `tokens` at positions cache.tokenCount.. and append them to the cache. Several calls on
   * one cache are a chunked prefill; any chunking gives the same bits as one call.
   */
  prefill (tokens: ArrayLike<number>, cache: ModelCache, opts: PrefillOptions = {}): PrefillResult {
    const cfg = this.model.cfg
    this.check(tokens, cache)
    const n = tokens.length
    const start = cache.tokenCount
    const want = opts.logits ?? 'last'
    let first: number
    if (want === 'all') first = 0
    else if (want === 'last') first = n - 1
    else if (want === 'none') first = n
    else {
      const tail = want?.tail
      if (!Number.isSafeInteger(tail) || tail < 0) throw new PdBridgeError(`prefill: logits.tail must be a non-negative integer, got ${String(tail)}`)
      first = Math.max(0, n - tail)
    }
    const maxChunk = opts.maxChunk ?? 512
    if (!Number.isSafeInteger(maxChunk) || maxChunk < 1) throw new PdBridgeError(`prefill: maxChunk must be a positive integer, got ${String(maxChunk)}`)
    const vocab = cfg.vocabSize
    const logits = new Float32Array((n - first) * vocab)
    for (let c0 = 0; c0 < n; c0 += maxChunk) {
      const c1 = Math.min(n, c0 + maxChunk)
      const rows: number[] = []
      for (let r = Math.max(c0, first); r < c1; r++) rows.push(r - c0)
      const out = this.model.forward(Array.prototype.slice.call(tokens, c0, c1), cache, rows, opts.attnInputHook)
      if (rows.length > 0) logits.set(out, (c0 + rows[0] - first) * vocab)
    }
    return { logits, rows: n - first, vocab, firstPosition: start + first }
  }

  /** One token at position cache.tokenCount (a prefill of one token); returns its logits [vocab]. */
  decode (token: number, cache: ModelCache): Float32Array {
    return this.prefill([token], cache, { logits: 'last' }).logits
  }

  /**
   * One decode step of several sequences in one pass over the weights: tokens[i] at position
   * caches[i].tokenCount, appended to caches[i]. Returns the logits [B, vocab], row i sequence i's,
   * bit-identical to decode(tokens[i], caches[i]) alone whatever else is in the batch. The caches
   * must be distinct.
   */
  decodeBatch (tokens: readonly number[], caches: readonly ModelCache[]): Float32Array {
    if (tokens.length !== caches.length) throw new PdBridgeError(`decodeBatch: ${tokens.length} tokens for ${caches.length} caches`)
    if (tokens.length === 0) throw new PdBridgeError('decodeBatch: the batch is empty')
    if (new Set(caches).size !== caches.length) throw new PdBridgeError('decodeBatch: a cache appears twice in the batch; each sequence needs its own')
    tokens.forEach((t, i) => this.check([t], caches[i]))
    return this.model.forwardSequences(tokens.map((t, i) => ({ tokens: [t], cache: caches[i] })), tokens.map((_, i) => i))
  }

  /**
   * Greedy generation: prefill `prompt` (onto `cache`, or a fresh one), then take the argmax
   * (lowest id on ties) k times, feeding each pick back. The cache ends holding prompt + k tokens.
   */
  greedy (prompt: ArrayLike<number>, k: number, cache: ModelCache = this.newCache()): number[] {
    if (!Number.isSafeInteger(k) || k < 0) throw new PdBridgeError(`greedy: k must be a non-negative integer, got ${String(k)}`)
    const vocab = this.model.cfg.vocabSize
    let logits = this.prefill(prompt, cache).logits
    const out: number[] = []
    for (let i = 0; i < k; i++) {
      const next = argmax(logits, 0, vocab)
      out.push(next)
      logits = this.decode(next, cache)
    }
    return out
  }

  /**
   * Append `count` tokens to the cache from each layer's attention inputs alone (inputFor(layer):
   * Float32Array [count, hidden], what attnInputHook reports), at positions cache.tokenCount..:
   * the pooling port. Bit-identical to the cache a prefill of those tokens leaves.
   */
  appendFromAttentionInputs (cache: ModelCache, count: number, inputFor: (layer: number) => Float32Array): void {
    const cfg = this.model.cfg
    this.checkCache(cache)
    if (!Number.isSafeInteger(count) || count < 1) throw new PdBridgeError(`appendFromAttentionInputs: count must be a positive integer, got ${String(count)}`)
    this.checkLength(cache, count)
    const inputs = cfg.layerTypes.map((_, layer) => {
      const x = inputFor(layer)
      if (!(x instanceof Float32Array) || x.length !== count * cfg.hiddenSize) {
        throw new PdBridgeError(`appendFromAttentionInputs: layer ${layer}: expected a Float32Array of ${count} x ${cfg.hiddenSize} = ${count * cfg.hiddenSize} values, found ${x instanceof Float32Array ? x.length : typeof x}`)
      }
      return x
    })
    this.model.appendFromAttentionInputs(cache, count, (layer) => inputs[layer])
  }

  /**
   * Fill the derived overlap carries of a cache restored from blocks that hold only the raw previous
   * window (oMLX's `prev_win_kv/gate`), so its arrays read the same as a native cache's. Pooling
   * derives them itself when needed; this is for comparing and dumping. Returns the cache.
   */
  completeCarries (cache: ModelCache): ModelCache {
    this.checkCache(cache)
    this.model.completeCarries(cache)
    return cache
  }

  private checkCache (cache: ModelCache): void {
    const cfg = this.model.cfg
    if (!(cache instanceof ModelCache) || cache.layers.length !== cfg.numHiddenLayers) {
      throw new PdBridgeError(`the cache was not made by this engine's newCache() (expected ${cfg.numHiddenLayers} layers)`)
    }
  }

  private checkLength (cache: ModelCache, count: number): void {
    const cfg = this.model.cfg
    const total = cache.tokenCount + count
    if (total > cfg.maxPositionEmbeddings) {
      throw new PdBridgeError(`${cache.tokenCount} cached + ${count} new tokens = ${total} positions, more than max_position_embeddings (${cfg.maxPositionEmbeddings})`)
    }
  }

  private check (tokens: ArrayLike<number>, cache: ModelCache): void {
    const cfg = this.model.cfg
    this.checkCache(cache)
    if (tokens === null || typeof tokens !== 'object' || typeof tokens.length !== 'number') {
      throw new PdBridgeError('prefill: tokens must be an array of token ids')
    }
    if (tokens.length === 0) throw new PdBridgeError('prefill: the prompt is empty (at least one token is needed)')
    for (let i = 0; i < tokens.length; i++) {
      const t = tokens[i]
      if (!Number.isInteger(t) || t < 0 || t >= cfg.vocabSize) {
        throw new PdBridgeError(`prefill: token ${i} is ${String(t)}, not a token id in [0, ${cfg.vocabSize}) (vocab_size)`)
      }
    }
    this.checkLength(cache, tokens.length)
  }
}
