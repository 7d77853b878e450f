// What a request asks of the sampler, checked. Ranges are OpenAI's documented ones where OpenAI
// has the field, vLLM's where only vLLM has it (top_k, min_p). Absent temperature means 0, greedy:
// OpenAI's default is 1, but every answer this decoder gave before sampling existed was greedy,
// and fixtures and the bridge's "same tokens as native" check rely on it.

/** The most choices one request may ask for (`n`). */
export const MAX_CHOICES = 8
/** The most alternatives per position: chat `top_logprobs` (OpenAI: 20). */
export const MAX_TOP_LOGPROBS = 20
/** The most alternatives per position: completions `logprobs` (OpenAI: 5). */
export const MAX_COMPLETION_LOGPROBS = 5

/** A checked sampling request. Defaults are the values that change nothing. */
export interface SamplingOptions {
  /** 0: greedy (the largest logit, the lowest id on ties). */
  temperature: number
  /** 1: no nucleus cut. */
  topP: number
  /** 0: no cut (-1 is read as 0, as vLLM does). */
  topK: number
  /** 0: no cut. */
  minP: number
  presencePenalty: number
  frequencyPenalty: number
  /** The request's seed; undefined: the server draws one and reports it. */
  seed: number | undefined
  /** Return the chosen token's log-probability. */
  logprobs: boolean
  /** How many alternatives per position (0..MAX_TOP_LOGPROBS); only with logprobs. */
  topLogprobs: number
  /** Independent choices (1..MAX_CHOICES). */
  n: number
}

export const GREEDY: SamplingOptions = {
  temperature: 0, topP: 1, topK: 0, minP: 0, presencePenalty: 0, frequencyPenalty: 0, seed: undefined, logprobs: false, topLogprobs: 0, n: 1,
}

/** Whether the pick depends on the PRNG (temperature above 0); greedy needs no seed. */
export function isRandom (o: Pick<SamplingOptions, 'temperature'>): boolean {
  return o.temperature > 0
}

/** Whether any penalty changes the logits. */
export function hasPenalties (o: Pick<SamplingOptions, 'presencePenalty' | 'frequencyPenalty'>): boolean {
  return o.presencePenalty !== 0 || o.frequencyPenalty !== 0
}

/**
 * The seed of choice `index`: the request's seed plus the index (taken mod 2^64 by the PRNG's
 * seeding), so choice 0 of `n: 3` is the answer of `n: 1` with the same seed.
 */
export function choiceSeed (seed: number, index: number): bigint {
  return BigInt(seed) + BigInt(index)
}
