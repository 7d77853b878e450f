// The OpenAI response bodies: chat.completion, chat.completion.chunk and text_completion (whole and
// streamed), with usage.prompt_tokens_details.cached_tokens as oMLX and OpenAI report cache hits.
import type { GenerationOutcome } from './generate.ts'

/** OpenAI's usage object. */
export interface Usage {
  prompt_tokens: number
  completion_tokens: number
  total_tokens: number
  prompt_tokens_details: { cached_tokens: number }
}

/**
 * The decoder's own clock for one generation, on the streamed usage chunk as `pd_decoder`:
 * prefill_ms from the request's start to the first token's logits (prefix lookup included),
 * decode_ms from there to the last token. A client timing text pieces sees the decode only as
 * well as the pieces arrive (held back at partial characters and possible stop strings).
 */
export interface DecoderTimings {
  prefill_ms: number
  decode_ms: number
}

/** The timings of a finished generation, whole milliseconds. */
export function timingsOf (o: Pick<GenerationOutcome, 'prefillMs' | 'decodeMs'>): DecoderTimings {
  return { prefill_ms: Math.round(o.prefillMs), decode_ms: Math.round(o.decodeMs) }
}

/** Fields every body of one response shares. */
export interface ResponseHead {
  id: string
  created: number
  model: string
  system_fingerprint: string
}

/** A finished choice's reason (a cancelled request gets no body). */
export type FinishedReason = 'stop' | 'length'

/** Usage of a finished generation: every generated token counts, an end-of-sentence token included. */
export function usageOf (o: Pick<GenerationOutcome, 'promptTokens' | 'cachedTokens' | 'completionIds'>): Usage {
  return {
    prompt_tokens: o.promptTokens,
    completion_tokens: o.completionIds.length,
    total_tokens: o.promptTokens + o.completionIds.length,
    prompt_tokens_details: { cached_tokens: o.cachedTokens },
  }
}

/** The leading fields in OpenAI's order: id, object, created, model, system_fingerprint. */
function opening (head: ResponseHead, object: string): object {
  return { id: head.id, object, created: head.created, model: head.model, system_fingerprint: head.system_fingerprint }
}

/** vLLM's return_token_ids fields, when asked for. */
function tokenIdFields (ids: readonly number[] | undefined, key: 'token_ids' | 'prompt_token_ids'): Record<string, number[]> {
  return ids === undefined ? {} : { [key]: [...ids] }
}

/** A whole chat.completion. */
export function chatCompletion (head: ResponseHead, o: GenerationOutcome, finish: FinishedReason, promptIds?: readonly number[]): object {
  return {
    ...opening(head, 'chat.completion'),
    choices: [{
      index: 0,
      message: { role: 'assistant', content: o.text, refusal: null },
      logprobs: null,
      finish_reason: finish,
      ...tokenIdFields(promptIds === undefined ? undefined : o.completionIds, 'token_ids'),
    }],
    usage: usageOf(o),
    ...tokenIdFields(promptIds, 'prompt_token_ids'),
  }
}

/** A whole text_completion. */
export function textCompletion (head: ResponseHead, o: GenerationOutcome, finish: FinishedReason, promptIds?: readonly number[]): object {
  return {
    ...opening(head, 'text_completion'),
    choices: [{
      index: 0,
      text: o.text,
      logprobs: null,
      finish_reason: finish,
      ...tokenIdFields(promptIds === undefined ? undefined : o.completionIds, 'token_ids'),
    }],
    usage: usageOf(o),
    ...tokenIdFields(promptIds, 'prompt_token_ids'),
  }
}

/** Builds the chunks of one streamed response, chat or completion. */
export class ChunkMaker {
  constructor (
    private readonly endpoint: 'chat' | 'completion',
    private readonly head: ResponseHead,
    /** With include_usage every chunk has `usage: null` and a last chunk carries the usage. */
    private readonly includeUsage: boolean,
  ) {}

  private chunk (choice: Record<string, unknown> | null, extra: Record<string, unknown> = {}): object {
    return {
      ...opening(this.head, this.endpoint === 'chat' ? 'chat.completion.chunk' : 'text_completion'),
      choices: choice === null ? [] : [{ index: 0, ...choice }],
      ...(this.includeUsage ? { usage: null } : {}),
      ...extra,
    }
  }

  /** The opening chunk: the assistant role for chat (nothing for completions); prompt ids if asked. */
  first (promptIds?: readonly number[]): object | null {
    if (this.endpoint === 'completion' && promptIds === undefined) return null
    const choice = this.endpoint === 'chat'
      ? { delta: { role: 'assistant', content: '' }, logprobs: null, finish_reason: null }
      : { text: '', logprobs: null, finish_reason: null }
    return this.chunk(choice, tokenIdFields(promptIds, 'prompt_token_ids'))
  }

  /** A piece of text. */
  text (piece: string): object {
    return this.chunk(this.endpoint === 'chat'
      ? { delta: { content: piece }, logprobs: null, finish_reason: null }
      : { text: piece, logprobs: null, finish_reason: null })
  }

  /** The chunk with the finish reason (and every generated id, if asked). */
  finish (reason: FinishedReason, completionIds?: readonly number[]): object {
    return this.chunk({
      ...(this.endpoint === 'chat' ? { delta: {} } : { text: '' }),
      logprobs: null,
      finish_reason: reason,
      ...tokenIdFields(completionIds, 'token_ids'),
    })
  }

  /** The usage chunk (empty choices), sent last when include_usage is on; with the decoder's own timings when given. */
  usage (usage: Usage, timings?: DecoderTimings): object {
    return { ...this.chunk(null), usage, ...(timings !== undefined ? { pd_decoder: timings } : {}) }
  }
}
