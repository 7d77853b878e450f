// One request on the engine: prefix-cache lookup, prefill of what the cache does not hold (blocks
// stored as they fill), then decoding (the sampler picks each token: greedy, or seeded sampling)
// with stop strings and end-of-sentence, yielding to the
// event loop between steps so other routes and stream writes stay responsive and a cancelled
// request stops at the next step. Requests run side by side: their prefill chunks and batched
// decode steps take turns on the engine through the DecodeBatcher (batcher.ts).
import { setImmediate as nextTurn } from 'node:timers/promises'
import type { DecoderPrefixCache, PrefillProgress } from '../../decode/prefix-cache/index.ts'
import type { ModelCache } from '../../model/engine/index.ts'
import { BatcherCancelled, type DecodeBatcher } from './batcher.ts'
import { IncrementalDetokenizer } from './detokenizer.ts'
import type { DecoderModel } from './model.ts'
import { SequenceSampler, type SamplingOptions, type TokenPick } from './sampling/index.ts'
import { StopMatcher } from './stop-matcher.ts'

/** The part of DecoderPrefixCache that generation uses. */
export type PrefixCacheLike = Pick<DecoderPrefixCache, 'lookup' | 'prefillAndStore'>

/** What generation runs against. */
export interface GenerationContext {
  model: DecoderModel
  /** Absent: every prompt is prefilled from an empty cache and nothing is stored. */
  prefixCache?: PrefixCacheLike
  /** The engine's scheduler, shared by every request: prefill chunks and batched decode steps. */
  batcher: DecodeBatcher
  /**
   * Most tokens per prefill chunk (also cut at block boundaries with a prefix cache): the longest
   * the other requests' decoding waits for this one's prefill. Default PREFILL_CHUNK.
   */
  prefillChunk?: number
}

/** Default prefill chunk: 256 tokens, the slice the decoder used before it batched. */
export const PREFILL_CHUNK = 256

/** One checked request. */
export interface GenerationJob {
  tokens: number[]
  /** Most tokens to generate (>= 1). */
  maxTokens: number
  stop: readonly string[]
  /** Keep going past the end-of-sentence token. */
  ignoreEos: boolean
  /** How each token is picked (GREEDY: the largest logit). */
  sampling: SamplingOptions
  /** The seed the sampler uses: the request's, or one the server drew (reported back). */
  seed: number
  /** Which of the request's n choices this is (0-based): choice i samples with seed + i. */
  choice: number
}

/** One generated token's log-probabilities (raw distribution), when the request asked. */
export type TokenLogprobs = NonNullable<TokenPick['logprobs']>

/** Called as generation goes; awaited, so a slow stream slows decoding instead of buffering. */
export interface GenerationHooks {
  /** After the lookup, before the prefill: headers can carry cachedTokens. */
  onStart?: (info: { promptTokens: number, cachedTokens: number }) => void | Promise<void>
  /**
   * Final text, in order; the pieces concatenate to the outcome's text. With logprobs asked,
   * `logprobs` holds the entries of the tokens generated since the last call (they concatenate to
   * the outcome's), and a call may carry entries and no text.
   */
  onText?: (text: string, logprobs?: TokenLogprobs[]) => void | Promise<void>
  /**
   * Between prefill chunks (a block, or the no-cache slice), not after the last: the tokens done so
   * far. A long prefill sends nothing else, and an idle stream is cut by its client (Node's fetch
   * ends a body after 300 s of silence).
   */
  onPrefill?: (info: { doneTokens: number, promptTokens: number }) => void | Promise<void>
}

/** Why generation ended. */
export type FinishReason = 'stop' | 'length' | 'cancelled'

/** How a request went. */
export interface GenerationOutcome {
  promptTokens: number
  /** Exactly what the lookup restored. */
  cachedTokens: number
  /** Blocks this request's prefill wrote, and boundaries whose block was already stored. */
  storedBlocks: number
  reusedBlocks: number
  /** Boundaries whose block could not be written (the store is full, read-only...); the answer is unaffected. */
  failedBlocks: number
  /** Every generated id (an end-of-sentence token and tokens cut by a stop string included). */
  completionIds: number[]
  /**
   * With logprobs asked: one entry per generated id, except an end-of-sentence token that ended
   * the answer (it has no text); undefined otherwise.
   */
  logprobs: TokenLogprobs[] | undefined
  text: string
  finishReason: FinishReason
  prefillMs: number
  decodeMs: number
}

export { argmaxLogit } from './sampling/index.ts'

/** The end-of-sentence ids of a config (eos_token_id may be one id, a list, or null). */
export function eosIds (eos: number | number[] | null): ReadonlySet<number> {
  return new Set(eos === null ? [] : Array.isArray(eos) ? eos : [eos])
}

function lastRow (logits: Float32Array, vocab: number): Float32Array {
  return logits.subarray(logits.length - vocab)
}

async function prefillWithoutCache (ctx: GenerationContext, tokens: number[], signal: AbortSignal,
  progress?: PrefillProgress): Promise<{ cache: ModelCache, logits: Float32Array }> {
  const { engine } = ctx.model
  const slice = ctx.prefillChunk ?? PREFILL_CHUNK
  const cache = engine.newCache()
  let logits: Float32Array = new Float32Array(0)
  for (let at = 0; at < tokens.length; at += slice) {
    const end = Math.min(tokens.length, at + slice)
    // Chunked prefill gives the same bits as one call (docs/engine.md), so slicing costs nothing.
    logits = (await ctx.batcher.exclusive(() => engine.prefill(tokens.slice(at, end), cache, { logits: end === tokens.length ? 'last' : 'none' }), signal)).logits
    if (end < tokens.length) await progress?.(end, tokens.length)
  }
  return { cache, logits }
}

/** Appends text (and log-probabilities) to the outcome and passes them to the hooks. */
export type Emit = (text: string, logprobs?: TokenLogprobs[]) => Promise<void>

/** A request's outcome before any work (cancelled until it finishes), and `emit`. */
export function startOutcome (job: GenerationJob, hooks: GenerationHooks): { outcome: GenerationOutcome, emit: Emit } {
  const outcome: GenerationOutcome = {
    promptTokens: job.tokens.length, cachedTokens: 0, storedBlocks: 0, reusedBlocks: 0, failedBlocks: 0, completionIds: [], logprobs: job.sampling.logprobs ? [] : undefined,
    text: '', finishReason: 'cancelled', prefillMs: 0, decodeMs: 0,
  }
  const emit: Emit = async (text, logprobs) => {
    const entries = logprobs ?? []
    if (text === '' && entries.length === 0) return
    outcome.text += text
    outcome.logprobs?.push(...entries)
    await (entries.length === 0 ? hooks.onText?.(text) : hooks.onText?.(text, entries))
  }
  return { outcome, emit }
}

/** Run one request to its end (or to cancellation through `signal`). */
export async function generate (ctx: GenerationContext, job: GenerationJob, hooks: GenerationHooks, signal: AbortSignal): Promise<GenerationOutcome> {
  const { engine, tokenizer, config } = ctx.model
  const { outcome, emit } = startOutcome(job, hooks)
  if (signal.aborted) return outcome

  const t0 = performance.now()
  const hit = ctx.prefixCache === undefined ? null : await ctx.prefixCache.lookup(job.tokens)
  outcome.cachedTokens = hit?.cachedTokens ?? 0
  await hooks.onStart?.({ promptTokens: job.tokens.length, cachedTokens: outcome.cachedTokens })
  if (signal.aborted) return outcome

  const onPrefill = hooks.onPrefill
  const progress = onPrefill === undefined ? undefined : async (doneTokens: number, promptTokens: number): Promise<void> => { await onPrefill({ doneTokens, promptTokens }) }
  let cache: ModelCache
  let logits: Float32Array
  try {
    if (ctx.prefixCache !== undefined) {
      const schedule = { chunkTokens: ctx.prefillChunk ?? PREFILL_CHUNK, runChunk: <T>(work: () => T) => ctx.batcher.exclusive(work, signal) }
      const filled = await ctx.prefixCache.prefillAndStore(engine, job.tokens, hit?.cache ?? undefined, progress, schedule)
      cache = filled.cache
      logits = lastRow(filled.logits, config.vocabSize)
      outcome.storedBlocks = filled.storedBlocks.filter((b) => b.written).length
      outcome.failedBlocks = filled.storedBlocks.filter((b) => b.failed !== undefined).length
      outcome.reusedBlocks = filled.storedBlocks.length - outcome.storedBlocks - outcome.failedBlocks
    } else {
      const filled = await prefillWithoutCache(ctx, job.tokens, signal, progress)
      cache = filled.cache
      logits = lastRow(filled.logits, config.vocabSize)
    }
  } catch (e) {
    // The client went away between two prefill chunks: the blocks stored so far stay stored.
    if (e instanceof BatcherCancelled) return outcome
    throw e
  }
  const t1 = performance.now()
  outcome.prefillMs = t1 - t0

  const sampler = new SequenceSampler(job.sampling, job.seed, job.choice)
  const seat = ctx.batcher.join(cache)
  try {
    await decodeTokens({ tokenizer, config }, job, logits, (next) => seat.step(next), (row) => {
      const t = performance.now()
      const pick = sampler.pick(row)
      ctx.batcher.notePick(performance.now() - t)
      return pick
    }, emit, outcome, signal)
  } finally {
    seat.leave()
  }
  outcome.decodeMs = performance.now() - t1
  return outcome
}

/**
 * Decoding from the prompt's last step, shared by every engine behind the server: `choose` picks
 * each token from a step's output (our sampler on a logits row, or llama.cpp's pick), then
 * end-of-sentence, stop strings, the completion budget, an event-loop turn and a cancellation check
 * between steps. `step(id)` feeds one token and returns the next step's output. Fills `outcome`'s
 * completion ids and finish reason; text and log-probabilities go out through `emit`.
 */
export async function decodeTokens<S> (model: Pick<DecoderModel, 'tokenizer' | 'config'>, job: GenerationJob, first: S, step: (id: number) => S | Promise<S>,
  choose: (out: S) => TokenPick, emit: Emit, outcome: GenerationOutcome, signal: AbortSignal): Promise<void> {
  let out = first
  const eos = eosIds(model.config.eosTokenId)
  const text = new IncrementalDetokenizer(model.tokenizer)
  const stops = new StopMatcher(job.stop)
  // Entries of tokens whose text is still held back: they go out with the text that follows.
  const pending: TokenLogprobs[] = []
  const take = (): TokenLogprobs[] => pending.splice(0)
  let finish: FinishReason | undefined
  for (let i = 0; finish === undefined; i++) {
    if (signal.aborted) break
    const pick = choose(out)
    const next = pick.token
    outcome.completionIds.push(next)
    if (eos.has(next) && !job.ignoreEos) {
      finish = 'stop'
      break
    }
    if (pick.logprobs !== undefined) pending.push(pick.logprobs)
    const found = stops.push(text.push(next))
    await emit(found.text, found.text === '' ? undefined : take())
    if (found.stopped) finish = 'stop'
    else if (i + 1 >= job.maxTokens) finish = 'length'
    else {
      await nextTurn()
      if (signal.aborted) break
      out = await step(next)
    }
  }
  if (finish !== undefined) {
    // The last piece may end in a partial character, and held-back text may hide a stop string.
    const last = stops.push(text.finish())
    await emit(last.text)
    if (last.stopped) finish = 'stop'
    else await emit(stops.flush())
    await emit('', take())
    outcome.finishReason = finish
  }
}
