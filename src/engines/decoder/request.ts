// Reading an OpenAI /v1/chat/completions or /v1/completions body into one checked generation
// request. Every refusal is a 400 naming the field; what the embedded decoder cannot honour
// (logit_bias, best_of, forced tool choice, structured output) is refused, never ignored.
import { readChatRequest, type ChatRenderOptions, type ChatTurn } from '../../model/tokenizer/index.ts'
import { badRequest } from './api-error.ts'
import { GREEDY, MAX_CHOICES, MAX_COMPLETION_LOGPROBS, MAX_TOP_LOGPROBS, type SamplingOptions } from './sampling/index.ts'

/** What to generate from: chat messages (rendered with the chat template), text, or token ids. */
export type PromptInput =
  | { kind: 'chat', messages: ChatTurn[], chat?: ChatRenderOptions }
  | { kind: 'text', text: string }
  | { kind: 'tokens', tokens: number[] }

/** A checked generation request, the same for both endpoints. */
export interface GenerationRequest {
  endpoint: 'chat' | 'completion'
  /** The model asked for; undefined means the served one. */
  model: string | undefined
  prompt: PromptInput
  /** Completion tokens asked for (max_completion_tokens, else max_tokens); undefined: the server default. */
  maxTokens: number | undefined
  /** Which field gave maxTokens, for messages. */
  maxTokensParam: 'max_tokens' | 'max_completion_tokens'
  /** Stop strings (at most 4, none empty). */
  stop: string[]
  stream: boolean
  /** stream_options.include_usage: the last chunk carries usage. */
  includeUsage: boolean
  /** vLLM's ignore_eos: keep generating past the end-of-sentence token. */
  ignoreEos: boolean
  /** vLLM's return_token_ids: the response carries prompt_token_ids and each choice's token_ids. */
  returnTokenIds: boolean
  /** temperature, top_p, top_k, min_p, penalties, seed, logprobs, n: checked, with their defaults. */
  sampling: SamplingOptions
}

/** OpenAI's limit on stop strings. */
export const MAX_STOP_SEQUENCES = 4

type Body = Record<string, unknown>

function typeName (v: unknown): string {
  if (v === null) return 'null'
  if (Array.isArray(v)) return 'an array'
  return typeof v === 'object' ? 'an object' : `a ${typeof v}`
}

function isObject (v: unknown): v is Body {
  return typeof v === 'object' && v !== null && !Array.isArray(v)
}

function optional<T> (body: Body, key: string, read: (v: unknown, key: string) => T): T | undefined {
  const v = body[key]
  return v === undefined || v === null ? undefined : read(v, key)
}

function readString (v: unknown, key: string): string {
  if (typeof v !== 'string') throw badRequest(`'${key}' must be a string, got ${typeName(v)}`, key)
  return v
}

function readBoolean (v: unknown, key: string): boolean {
  if (typeof v !== 'boolean') throw badRequest(`'${key}' must be a boolean, got ${typeName(v)}`, key)
  return v
}

function readNumber (v: unknown, key: string): number {
  if (typeof v !== 'number' || !Number.isFinite(v)) throw badRequest(`'${key}' must be a number, got ${typeName(v)}`, key)
  return v
}

function readInteger (v: unknown, key: string): number {
  if (typeof v !== 'number' || !Number.isSafeInteger(v)) throw badRequest(`'${key}' must be an integer, got ${typeof v === 'number' ? String(v) : typeName(v)}`, key)
  return v
}

function readPositiveInteger (v: unknown, key: string): number {
  const n = readInteger(v, key)
  if (n < 1) throw badRequest(`'${key}' must be at least 1, got ${n}`, key)
  return n
}

function readStop (v: unknown, key: string): string[] {
  const list = typeof v === 'string' ? [v] : v
  if (!Array.isArray(list)) throw badRequest(`'${key}' must be a string or an array of strings, got ${typeName(v)}`, key)
  if (list.length > MAX_STOP_SEQUENCES) throw badRequest(`'${key}' has ${list.length} sequences; at most ${MAX_STOP_SEQUENCES} are allowed`, key)
  return list.map((s, i) => {
    if (typeof s !== 'string') throw badRequest(`'${key}[${i}]' must be a string, got ${typeName(s)}`, key)
    if (s === '') throw badRequest(`'${key}[${i}]' is empty; stop sequences must have at least one character`, key)
    return s
  })
}

function readRange (v: unknown, key: string, min: number, max: number): number {
  const n = readNumber(v, key)
  if (n < min || n > max) throw badRequest(`'${key}' must be between ${min} and ${max}, got ${n}`, key)
  return n
}

function readIntegerRange (v: unknown, key: string, min: number, max: number): number {
  const n = readInteger(v, key)
  if (n < min || n > max) throw badRequest(`'${key}' must be an integer between ${min} and ${max}, got ${n}`, key)
  return n
}

/** The completion endpoint's `logprobs` is a count (0..5); chat's a boolean with `top_logprobs` beside it. */
function readLogprobs (body: Body, endpoint: 'chat' | 'completion'): Pick<SamplingOptions, 'logprobs' | 'topLogprobs'> {
  if (endpoint === 'completion') {
    const count = optional(body, 'logprobs', (v, key) => readIntegerRange(v, key, 0, MAX_COMPLETION_LOGPROBS))
    if (body.top_logprobs !== undefined && body.top_logprobs !== null) throw badRequest("'top_logprobs' is a chat completions field; /v1/completions takes the count in 'logprobs'", 'top_logprobs')
    return { logprobs: count !== undefined, topLogprobs: count ?? 0 }
  }
  const on = optional(body, 'logprobs', readBoolean) ?? false
  const top = optional(body, 'top_logprobs', (v, key) => readIntegerRange(v, key, 0, MAX_TOP_LOGPROBS))
  if (top !== undefined && !on) throw badRequest("'top_logprobs' needs 'logprobs' set to true", 'top_logprobs')
  return { logprobs: on, topLogprobs: top ?? 0 }
}

/** The sampler's options (sampling/options.ts says what each default means). */
function readSampling (body: Body, endpoint: 'chat' | 'completion'): SamplingOptions {
  const topK = optional(body, 'top_k', (v, key) => readIntegerRange(v, key, -1, Number.MAX_SAFE_INTEGER))
  const topP = optional(body, 'top_p', readNumber)
  if (topP !== undefined && (topP <= 0 || topP > 1)) throw badRequest(`'top_p' must be in (0, 1], got ${topP}`, 'top_p')
  return {
    temperature: optional(body, 'temperature', (v, key) => readRange(v, key, 0, 2)) ?? GREEDY.temperature,
    topP: topP ?? GREEDY.topP,
    // vLLM's -1 and 0 both mean no cut.
    topK: topK === undefined || topK < 0 ? GREEDY.topK : topK,
    minP: optional(body, 'min_p', (v, key) => readRange(v, key, 0, 1)) ?? GREEDY.minP,
    presencePenalty: optional(body, 'presence_penalty', (v, key) => readRange(v, key, -2, 2)) ?? 0,
    frequencyPenalty: optional(body, 'frequency_penalty', (v, key) => readRange(v, key, -2, 2)) ?? 0,
    seed: optional(body, 'seed', readInteger),
    ...readLogprobs(body, endpoint),
    n: optional(body, 'n', (v, key) => readIntegerRange(v, key, 1, MAX_CHOICES)) ?? 1,
  }
}

/** What the embedded decoder cannot honour is refused, never ignored. */
function refuseUnsupported (body: Body): void {
  const bestOf = optional(body, 'best_of', readInteger)
  if (bestOf !== undefined && bestOf !== 1) throw badRequest(`'best_of' must be 1, got ${bestOf}`, 'best_of', 'unsupported_value')
  const bias = body.logit_bias
  if (bias !== undefined && bias !== null) {
    if (!isObject(bias)) throw badRequest(`'logit_bias' must be an object, got ${typeName(bias)}`, 'logit_bias')
    if (Object.keys(bias).length > 0) throw badRequest("'logit_bias' is not supported by the embedded decoder", 'logit_bias', 'unsupported_value')
  }
  for (const key of ['functions']) {
    const v = body[key]
    if (v !== undefined && v !== null && !(Array.isArray(v) && v.length === 0)) throw badRequest(`'${key}' is not supported by the embedded decoder`, key, 'unsupported_value')
  }
  const format = body.response_format
  if (format !== undefined && format !== null && !(isObject(format) && format.type === 'text')) {
    throw badRequest("'response_format' other than {\"type\": \"text\"} is not supported by the embedded decoder", 'response_format', 'unsupported_value')
  }
  optional(body, 'user', readString)
}

function readCommon (body: unknown, endpoint: 'chat' | 'completion'): { body: Body, common: Omit<GenerationRequest, 'prompt'> } {
  if (!isObject(body)) throw badRequest(`the request body must be a JSON object, got ${typeName(body)}`)
  refuseUnsupported(body)
  const sampling = readSampling(body, endpoint)
  const stream = optional(body, 'stream', readBoolean) ?? false
  const options = body.stream_options
  let includeUsage = false
  if (options !== undefined && options !== null) {
    if (!stream) throw badRequest("'stream_options' is only allowed when 'stream' is true", 'stream_options')
    if (!isObject(options)) throw badRequest(`'stream_options' must be an object, got ${typeName(options)}`, 'stream_options')
    includeUsage = optional(options, 'include_usage', (v) => readBoolean(v, 'stream_options.include_usage')) ?? false
  }
  const completionCap = endpoint === 'chat' ? optional(body, 'max_completion_tokens', readPositiveInteger) : undefined
  const legacyCap = optional(body, 'max_tokens', readPositiveInteger)
  return {
    body,
    common: {
      endpoint,
      model: optional(body, 'model', readString),
      maxTokens: completionCap ?? legacyCap,
      maxTokensParam: completionCap !== undefined ? 'max_completion_tokens' : 'max_tokens',
      stop: optional(body, 'stop', readStop) ?? [],
      stream,
      includeUsage,
      ignoreEos: optional(body, 'ignore_eos', readBoolean) ?? false,
      returnTokenIds: optional(body, 'return_token_ids', readBoolean) ?? false,
      sampling,
    },
  }
}

/** Check a /v1/chat/completions body: messages, tools and render options as the front door reads them. */
export function parseChatRequest (raw: unknown): GenerationRequest {
  const { body, common } = readCommon(raw, 'chat')
  const read = readChatRequest(body)
  if ('error' in read) throw badRequest(read.error.message, read.error.param, read.error.unsupported ? 'unsupported_value' : undefined)
  return { ...common, prompt: { kind: 'chat', messages: read.messages, chat: read.options } }
}

function readTokenIds (v: unknown[], at: string): number[] {
  if (v.length === 0) throw badRequest(`'${at}' is empty; at least one token is needed`, 'prompt')
  return v.map((t, i) => {
    if (typeof t !== 'number' || !Number.isSafeInteger(t) || t < 0) throw badRequest(`'${at}[${i}]' must be a token id (a non-negative integer), got ${typeof t === 'number' ? String(t) : typeName(t)}`, 'prompt')
    return t
  })
}

/** Check a /v1/completions body: prompt is a string, token ids, or a batch of exactly one of those. */
export function parseCompletionRequest (raw: unknown): GenerationRequest {
  const { body, common } = readCommon(raw, 'completion')
  let p = body.prompt
  if (p === undefined || p === null) throw badRequest("'prompt' is required", 'prompt')
  const batched = Array.isArray(p) && p.length > 0 && (typeof p[0] === 'string' || Array.isArray(p[0]))
  if (batched) {
    const batch = p as unknown[]
    if (batch.length !== 1) throw badRequest(`'prompt' holds ${batch.length} prompts; the embedded decoder takes one prompt per request`, 'prompt', 'unsupported_value')
    p = batch[0]
  }
  const at = batched ? 'prompt[0]' : 'prompt'
  for (const key of ['echo']) {
    const v = optional(body, key, readBoolean)
    if (v === true) throw badRequest(`'${key}' is not supported by the embedded decoder`, key, 'unsupported_value')
  }
  const suffix = optional(body, 'suffix', readString)
  if (suffix !== undefined && suffix !== '') throw badRequest("'suffix' is not supported by the embedded decoder", 'suffix', 'unsupported_value')
  // An empty string is a valid prompt: it encodes to the bos token alone.
  if (typeof p === 'string') return { ...common, prompt: { kind: 'text', text: p } }
  if (Array.isArray(p)) return { ...common, prompt: { kind: 'tokens', tokens: readTokenIds(p, at) } }
  throw badRequest(`'${at}' must be a string or an array of token ids, got ${typeName(p)}`, 'prompt')
}
