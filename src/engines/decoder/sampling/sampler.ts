// One sequence's sampler, a pure function of (logits, options, what this sequence drew and chose
// before): penalties, then temperature, top_k, top_p, min_p (the order of Hugging Face
// transformers' logits warpers), then one draw from xoshiro128**. Arithmetic is f64 in a fixed
// order (candidates sorted by logit, the lowest id first on ties: order.ts), so the same inputs give the same
// token on any machine. Log-probabilities are of the model's raw distribution: log-softmax of the
// logits before penalties and temperature (vLLM's default, `raw_logprobs`).
import { choiceSeed, hasPenalties, isRandom, type SamplingOptions } from './options.ts'
import { idsByF32Descending, idsByValueDescending } from './order.ts'
import { Xoshiro128StarStar } from './prng.ts'

/** A token and its log-probability under the raw distribution. */
export interface TokenLogprob {
  token: number
  logprob: number
}

/** What one step chose. */
export interface TokenPick {
  token: number
  /** With options.logprobs: the chosen token's entry, and the `topLogprobs` most likely tokens. */
  logprobs?: { chosen: TokenLogprob, top: TokenLogprob[] }
}

/** The largest logit, the lowest id on ties: the engine's greedy pick. */
export function argmaxLogit (logits: ArrayLike<number>): number {
  let best = 0
  for (let i = 1; i < logits.length; i++) if (logits[i] > logits[best]) best = i
  return best
}

/** The `k` largest entries (ties: lowest id) of `values`, in that order, in O(V·k). */
function topIds (values: ArrayLike<number>, k: number): number[] {
  const out: number[] = []
  for (let i = 0; i < values.length; i++) {
    if (out.length === k && !(values[i] > values[out[k - 1]])) continue
    // After every entry at least as large: an earlier (lower) id stays first on ties.
    let at = out.length
    while (at > 0 && values[i] > values[out[at - 1]]) at--
    out.splice(at, 0, i)
    if (out.length > k) out.pop()
  }
  return out
}

/** log Σ exp(x_i), max-shifted, summed in index order. */
export function logSumExp (logits: ArrayLike<number>): number {
  let max = -Infinity
  for (let i = 0; i < logits.length; i++) if (logits[i] > max) max = logits[i]
  let sum = 0
  for (let i = 0; i < logits.length; i++) sum += Math.exp(logits[i] - max)
  return max + Math.log(sum)
}

/** The raw log-probabilities of `token` and of the `top` most likely tokens. */
export function rawLogprobs (logits: ArrayLike<number>, token: number, top: number): { chosen: TokenLogprob, top: TokenLogprob[] } {
  const lse = logSumExp(logits)
  return {
    chosen: { token, logprob: logits[token] - lse },
    top: top === 0 ? [] : topIds(logits, top).map((t) => ({ token: t, logprob: logits[t] - lse })),
  }
}

/**
 * The candidates left after top_k, top_p and min_p on `scaled` (penalised logits / temperature),
 * with their unnormalised weights exp(scaled - max), in sorted order. `sameOrder`, when given, is a
 * float32 row whose order (idsByF32Descending) is scaled's: the sort then reads half the key.
 */
export function keptCandidates (scaled: Float64Array, o: Pick<SamplingOptions, 'topK' | 'topP' | 'minP'>, sameOrder?: Float32Array): { ids: number[], weights: number[] } {
  const vocab = scaled.length
  if (sameOrder !== undefined && sameOrder.length !== vocab) throw new Error(`keptCandidates: sameOrder has ${sameOrder.length} values for ${vocab}`)
  const order: ArrayLike<number> = o.topK > 0 && o.topK < vocab
    ? topIds(scaled, o.topK)
    : sameOrder !== undefined ? idsByF32Descending(sameOrder) : idsByValueDescending(scaled)
  const max = scaled[order[0]]
  // Typed and in place: at a vocabulary of 129K, arrays of boxed numbers cost more than the sort.
  const weights = new Float64Array(order.length)
  for (let i = 0; i < order.length; i++) weights[i] = Math.exp(scaled[order[i]] - max)
  let kept = order.length
  if (o.topP < 1) {
    let total = 0
    for (let i = 0; i < kept; i++) total += weights[i]
    // The smallest prefix whose probability reaches top_p: keep a token while what came before is short of it.
    let cum = 0
    let keep = 0
    while (keep < kept && cum < o.topP * total) cum += weights[keep++]
    kept = Math.max(1, keep)
  }
  if (o.minP > 0) {
    // weights[0] is exp(0) = 1, the most likely token: keep tokens at least min_p as likely as it.
    let keep = 0
    while (keep < kept && !(weights[keep] < o.minP)) keep++
    if (keep > 0 && keep < kept) kept = keep
  }
  const ids: number[] = new Array<number>(kept)
  for (let i = 0; i < kept; i++) ids[i] = order[i]
  return { ids, weights: Array.from(weights.subarray(0, kept)) }
}

/**
 * Whether the logits / temperature (no penalties) have the order of the float32 logits themselves:
 * dividing by a positive constant keeps every order, and distinct float32 values stay distinct
 * doubles (their gap is at least 2^-24 of their size, the division's rounding 2^-53), unless the
 * quotient overflows, which a temperature this far from 0 rules out (suites/decoder-server/sampling-order.test.ts).
 */
function logitOrderHolds (o: Pick<SamplingOptions, 'temperature' | 'presencePenalty' | 'frequencyPenalty'>): boolean {
  return !hasPenalties(o) && Number.isFinite(F32_MAX / o.temperature)
}

const F32_MAX = 3.4028234663852886e38

/** One sequence's sampling state: its PRNG and how often it chose each token (for the penalties). */
export class SequenceSampler {
  private readonly rng: Xoshiro128StarStar | undefined
  private readonly counts = new Map<number, number>()

  /** `seed` is the request's (drawn by the server when the client sent none); `choice` the index among n. */
  constructor (private readonly options: SamplingOptions, seed: number, choice = 0) {
    this.rng = isRandom(options) ? new Xoshiro128StarStar(choiceSeed(seed, choice)) : undefined
  }

  /** Choose the next token from `logits` (one row, the vocabulary) and count it for the penalties. */
  pick (logits: Float32Array): TokenPick {
    const o = this.options
    const token = this.choose(logits)
    this.counts.set(token, (this.counts.get(token) ?? 0) + 1)
    return o.logprobs ? { token, logprobs: rawLogprobs(logits, token, o.topLogprobs) } : { token }
  }

  private choose (logits: Float32Array): number {
    const o = this.options
    // Greedy without penalties is today's pick on the raw row, bit for bit.
    if (this.rng === undefined && !hasPenalties(o)) return argmaxLogit(logits)
    const penalised = this.penalise(logits)
    if (this.rng === undefined) return argmaxLogit(penalised)
    for (let i = 0; i < penalised.length; i++) penalised[i] /= o.temperature
    const { ids, weights } = keptCandidates(penalised, o, logitOrderHolds(o) ? logits : undefined)
    let total = 0
    for (const w of weights) total += w
    const target = this.rng.nextDouble() * total
    let cum = 0
    for (let i = 0; i < ids.length; i++) {
      cum += weights[i]
      if (cum > target) return ids[i]
    }
    return ids[ids.length - 1]
  }

  /** OpenAI's penalties: logit - count * frequency_penalty - (count > 0) * presence_penalty, over this sequence's own tokens. */
  private penalise (logits: Float32Array): Float64Array {
    const out = Float64Array.from(logits)
    const o = this.options
    for (const [token, count] of this.counts) out[token] -= count * o.frequencyPenalty + o.presencePenalty
    return out
  }
}
