// The OpenAI response bodies: chat.completion, chat.completion.chunk and text_completion (whole and
// streamed), with usage.prompt_tokens_details.cached_tokens as oMLX and OpenAI report cache hits.
import { randomUUID } from 'node:crypto'
import type { ReplyParts } from '../../model/tokenizer/index.ts'
import type { GenerationOutcome } from './generate.ts'
import type { ReplyDelta } from './reply-stream.ts'

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

/** Usage of a finished generation (or of every choice of one request): every generated token counts, an end-of-sentence token included. */
export function usageOf (o: Pick<GenerationOutcome, 'promptTokens' | 'cachedTokens' | 'completionIds'> | ReadonlyArray<Pick<GenerationOutcome, 'promptTokens' | 'cachedTokens' | 'completionIds'>>): Usage {
  const all = Array.isArray(o) ? o : [o as Pick<GenerationOutcome, 'promptTokens' | 'cachedTokens' | 'completionIds'>]
  let completion = 0
  for (const c of all) completion += c.completionIds.length
  return {
    prompt_tokens: all[0].promptTokens,
    completion_tokens: completion,
    total_tokens: all[0].promptTokens + completion,
    prompt_tokens_details: { cached_tokens: all[0].cachedTokens },
  }
}

/**
 * What the decoder adds beside OpenAI's fields, as `pd_decoder`: the seed a sampled answer used
 * (the request's, or the one the server drew; choice i used seed + i), absent when greedy.
 */
export interface DecoderExtra {
  seed?: number
}

function extraField (extra: DecoderExtra | undefined): Record<string, DecoderExtra> {
  return extra === undefined || Object.keys(extra).length === 0 ? {} : { pd_decoder: extra }
}

/** The leading fields in OpenAI's order: id, object, created, model, system_fingerprint. */
function opening (head: ResponseHead, object: string): object {
  return { id: head.id, object, created: head.created, model: head.model, system_fingerprint: head.system_fingerprint }
}

/** vLLM's return_token_ids fields, when asked for. */
function tokenIdFields (ids: readonly number[] | undefined, key: 'token_ids' | 'prompt_token_ids'): Record<string, number[]> {
  return ids === undefined ? {} : { [key]: [...ids] }
}

/** One finished choice of a whole response: its outcome, reason and formatted log-probabilities (null when not asked). */
export interface FinishedChoice {
  outcome: GenerationOutcome
  finish: FinishedReason
  logprobs: object | null
  /** The reply split by the chat format (reasoning, tool calls), where the format defines a split. */
  parts?: ReplyParts
}

/** A tool call's id, in OpenAI's spelling. */
export function toolCallId (): string {
  return `call_${randomUUID().replaceAll('-', '').slice(0, 24)}`
}

/** A reply that ended by calling tools finishes with tool_calls, as OpenAI's does; one cut by a cap stays length. */
export function chatFinishReason (finish: FinishedReason, parts: ReplyParts | undefined): FinishedReason | 'tool_calls' {
  return finish === 'stop' && (parts?.tool_calls.length ?? 0) > 0 ? 'tool_calls' : finish
}

// OpenAI's assistant message: content null when the reply is only tool calls; reasoning beside it as vLLM puts it.
function assistantMessage (c: FinishedChoice): object {
  if (c.parts === undefined) return { role: 'assistant', content: c.outcome.text, refusal: null }
  const calls = c.parts.tool_calls.map((call) => ({ id: toolCallId(), ...call }))
  return {
    role: 'assistant',
    content: calls.length > 0 && c.parts.content === '' ? null : c.parts.content,
    refusal: null,
    ...(c.parts.reasoning_content === undefined ? {} : { reasoning_content: c.parts.reasoning_content }),
    ...(calls.length > 0 ? { tool_calls: calls } : {}),
  }
}

/** A whole chat.completion. */
export function chatCompletion (head: ResponseHead, choices: readonly FinishedChoice[], promptIds?: readonly number[], extra?: DecoderExtra): object {
  return {
    ...opening(head, 'chat.completion'),
    choices: choices.map((c, index) => ({
      index,
      message: assistantMessage(c),
      logprobs: c.logprobs,
      finish_reason: chatFinishReason(c.finish, c.parts),
      ...tokenIdFields(promptIds === undefined ? undefined : c.outcome.completionIds, 'token_ids'),
    })),
    usage: usageOf(choices.map((c) => c.outcome)),
    ...tokenIdFields(promptIds, 'prompt_token_ids'),
    ...extraField(extra),
  }
}

/** A whole text_completion. */
export function textCompletion (head: ResponseHead, choices: readonly FinishedChoice[], promptIds?: readonly number[], extra?: DecoderExtra): object {
  return {
    ...opening(head, 'text_completion'),
    choices: choices.map((c, index) => ({
      index,
      text: c.outcome.text,
      logprobs: c.logprobs,
      finish_reason: c.finish,
      ...tokenIdFields(promptIds === undefined ? undefined : c.outcome.completionIds, 'token_ids'),
    })),
    usage: usageOf(choices.map((c) => c.outcome)),
    ...tokenIdFields(promptIds, 'prompt_token_ids'),
    ...extraField(extra),
  }
}

/** Builds the chunks of one streamed response, chat or completion; each choice's chunks carry its index. */
export class ChunkMaker {
  constructor (
    private readonly endpoint: 'chat' | 'completion',
    private readonly head: ResponseHead,
    /** With include_usage every chunk has `usage: null` and a last chunk carries the usage. */
    private readonly includeUsage: boolean,
  ) {}

  private chunk (choice: Record<string, unknown> | null, extra: Record<string, unknown> = {}, index = 0): object {
    return {
      ...opening(this.head, this.endpoint === 'chat' ? 'chat.completion.chunk' : 'text_completion'),
      choices: choice === null ? [] : [{ index, ...choice }],
      ...(this.includeUsage ? { usage: null } : {}),
      ...extra,
    }
  }

  /** The opening chunk of choice `index`: the assistant role for chat (nothing for completions); prompt ids if asked. */
  first (promptIds?: readonly number[], index = 0): object | null {
    if (this.endpoint === 'completion' && promptIds === undefined) return null
    const choice = this.endpoint === 'chat'
      ? { delta: { role: 'assistant', content: '' }, logprobs: null, finish_reason: null }
      : { text: '', logprobs: null, finish_reason: null }
    return this.chunk(choice, tokenIdFields(promptIds, 'prompt_token_ids'), index)
  }

  /** A piece of text, with the formatted log-probabilities of its tokens when asked. */
  text (piece: string, index = 0, logprobs: object | null = null): object {
    return this.chunk(this.endpoint === 'chat'
      ? { delta: { content: piece }, logprobs, finish_reason: null }
      : { text: piece, logprobs, finish_reason: null }, {}, index)
  }

  /** A piece of a split chat reply (reasoning and/or content), with the log-probabilities of the tokens it came from. */
  split (delta: ReplyDelta, index = 0, logprobs: object | null = null): object {
    return this.chunk({ delta, logprobs, finish_reason: null }, {}, index)
  }

  /**
   * A finished reply's tool calls as OpenAI streams them: per call one chunk opening it (index, id,
   * type, name, empty arguments), then its arguments.
   */
  toolCalls (calls: ReplyParts['tool_calls'], index = 0): object[] {
    return calls.flatMap((call, i) => [
      this.chunk({ delta: { tool_calls: [{ index: i, id: toolCallId(), type: call.type, function: { name: call.function.name, arguments: '' } }] }, logprobs: null, finish_reason: null }, {}, index),
      this.chunk({ delta: { tool_calls: [{ index: i, function: { arguments: call.function.arguments } }] }, logprobs: null, finish_reason: null }, {}, index),
    ])
  }

  /** The chunk with the finish reason (and every generated id, if asked; the seed of a sampled answer). */
  finish (reason: FinishedReason | 'tool_calls', completionIds?: readonly number[], index = 0, extra?: DecoderExtra): object {
    return this.chunk({
      ...(this.endpoint === 'chat' ? { delta: {} } : { text: '' }),
      logprobs: null,
      finish_reason: reason,
      ...tokenIdFields(completionIds, 'token_ids'),
    }, extraField(extra), index)
  }

  /** The usage chunk (empty choices), sent last when include_usage is on; with the decoder's own timings (and seed) when given. */
  usage (usage: Usage, timings?: DecoderTimings, extra?: DecoderExtra): object {
    const decoder = { ...timings, ...extra }
    return { ...this.chunk(null), usage, ...(Object.keys(decoder).length > 0 ? { pd_decoder: decoder } : {}) }
  }
}
