// One request on llama.cpp, with the semantics of our decoder's generate (src/engines/decoder/
// generate.ts): the hooks, end-of-sentence, stop strings, the incremental detokenizer (ours:
// prompts and text are our tokenizer's), cancellation per step. Tokens are picked as sampling.ts
// says: greedy here from raw logits, or by llama.cpp's own seeded sampler chain.
import { decodeTokens, startOutcome, type GenerationHooks, type GenerationJob, type GenerationOutcome } from '../../decoder/generate.ts'
import type { ServedModel } from '../../decoder/model.ts'
import type { LlamaCppSession } from '../runner.ts'
import { prefillFrom, restore } from './prefill.ts'
import { LlamaCppSequenceSampler } from './sampling.ts'
import type { ServedStateStore } from './served-store.ts'

/** What llama.cpp generation runs against: one session (one sequence), used by one request at a time. */
export interface LlamaCppGenerationContext {
  model: ServedModel
  session: LlamaCppSession
  /** Absent: every prompt is evaluated whole and nothing is stored. */
  store?: ServedStateStore
  blockSize: number
}

/** Run one request to its end (or to cancellation through `signal`). The sequence is emptied first. */
export async function generateLlamaCpp (ctx: LlamaCppGenerationContext, job: GenerationJob, hooks: GenerationHooks, signal: AbortSignal): Promise<GenerationOutcome> {
  const { tokenizer, config } = ctx.model
  const { outcome, emit } = startOutcome(job, hooks)
  if (signal.aborted) return outcome

  const t0 = performance.now()
  // Restored before onStart, so x-cached-tokens is what llama.cpp really holds, not what a lookup hoped.
  outcome.cachedTokens = await restore(ctx.session, ctx.store, job.tokens)
  await hooks.onStart?.({ promptTokens: job.tokens.length, cachedTokens: outcome.cachedTokens })
  if (signal.aborted) return outcome
  const sampler = new LlamaCppSequenceSampler(job.sampling, job.seed, job.choice)
  const filled = await prefillFrom(ctx.session, ctx.store, job.tokens, outcome.cachedTokens, ctx.blockSize, signal, sampler.next())
  outcome.storedBlocks = filled.storedBlocks
  outcome.reusedBlocks = filled.reusedBlocks
  outcome.failedBlocks = filled.failedBlocks
  if (filled.logits === null) return outcome
  const first: { logits: Float32Array, token?: number } = filled.token === undefined ? { logits: filled.logits } : { logits: filled.logits, token: filled.token }
  const t1 = performance.now()
  outcome.prefillMs = t1 - t0

  await decodeTokens({ tokenizer, config }, job, first, async (next) => await ctx.session.evaluate([next], 1, sampler.next()), (step) => sampler.pick(step), emit, outcome, signal)
  outcome.decodeMs = performance.now() - t1
  return outcome
}
