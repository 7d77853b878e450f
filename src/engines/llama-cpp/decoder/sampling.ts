// How the llama.cpp decoder picks tokens. Greedy without penalties is the argmax of llama.cpp's
// raw logits taken here (as before sampling existed), with raw log-probabilities when asked.
// Anything else is llama.cpp's own sampler chain (node-llama-cpp's generateNext options): its
// penalties, top_k, top_p, min_p, temperature and seeded draw, in its order. node-llama-cpp makes
// a new sampler for each evaluate call, so each step's draw gets its own 32-bit seed: the next
// output of xoshiro128** seeded with the request's seed (+ the choice index).
import { badRequest } from '../../decoder/api-error.ts'
import type { GenerationRequest } from '../../decoder/request.ts'
import { SequenceSampler, Xoshiro128StarStar, choiceSeed, hasPenalties, isRandom, type SamplingOptions, type TokenPick } from '../../decoder/sampling/index.ts'
import type { LlamaCppSampleOptions } from '../runner.ts'

/** Whether llama.cpp's sampler chain picks (otherwise the argmax of its raw logits, here). */
export function usesLlamaCppSampler (o: SamplingOptions): boolean {
  return isRandom(o) || hasPenalties(o)
}

/**
 * The llama.cpp decoder's own refusals, on top of the common request checks: node-llama-cpp hands
 * out the logits its sampler chain left (filtered, penalised, divided by the temperature), never
 * the model's raw row next to a sampled token, so log-probabilities exist only for greedy picks.
 */
export function checkLlamaCppRequest (r: GenerationRequest): void {
  if (r.sampling.logprobs && usesLlamaCppSampler(r.sampling)) {
    throw badRequest("'logprobs' is supported by the llama.cpp decoder only for greedy decoding (temperature 0, no penalties): node-llama-cpp does not return the model's raw distribution next to a token its sampler chain picked",
      'logprobs', 'unsupported_value')
  }
}

/** One sequence's picks on llama.cpp: which sampler, its per-step seeds and the tokens its penalties count. */
export class LlamaCppSequenceSampler {
  private readonly seeds: Xoshiro128StarStar
  private readonly chosen: number[] = []
  private readonly greedy: SequenceSampler | undefined

  constructor (private readonly options: SamplingOptions, seed: number, choice: number) {
    this.seeds = new Xoshiro128StarStar(choiceSeed(seed, choice))
    this.greedy = usesLlamaCppSampler(options) ? undefined : new SequenceSampler(options, seed, choice)
  }

  /** The options for llama.cpp's pick after the next evaluation; undefined: pick here from raw logits. */
  next (): LlamaCppSampleOptions | undefined {
    if (this.greedy !== undefined) return undefined
    const o = this.options
    return {
      temperature: o.temperature, topK: o.topK, topP: o.topP, minP: o.minP,
      presencePenalty: o.presencePenalty, frequencyPenalty: o.frequencyPenalty,
      punishTokens: this.chosen, seed: this.seeds.nextUint32(),
    }
  }

  /** The pick of one step: llama.cpp's token when it sampled, else the argmax of `logits` here. */
  pick (step: { logits: Float32Array, token?: number }): TokenPick {
    const pick = step.token !== undefined ? { token: step.token } : (this.greedy as SequenceSampler).pick(step.logits)
    this.chosen.push(pick.token)
    return pick
  }
}
