// Sampling for the embedded decoder: checked options, the PRNG, one sequence's sampler.
export { GREEDY, MAX_CHOICES, MAX_COMPLETION_LOGPROBS, MAX_TOP_LOGPROBS, choiceSeed, hasPenalties, isRandom, type SamplingOptions } from './options.ts'
export { Xoshiro128StarStar } from './prng.ts'
export { SequenceSampler, argmaxLogit, keptCandidates, logSumExp, rawLogprobs, type TokenLogprob, type TokenPick } from './sampler.ts'
