// POST /v1/prefill bodies: checked field by field (types, unknown fields, exactly one prompt form),
// then turned into token ids: `tokens` as given, `prompt` through the tokenizer with bos, `messages`
// through the checkpoint's chat template with the generation prompt, as a serving engine would.
import { isValidRequestId, REQUEST_ID_PATTERN, tokenIdsSha256 } from '../../wire/manifest.ts'
import { chatRenderOptions, type ChatMessage, type Tokenizer } from '../../model/tokenizer/index.ts'
import { badRequest } from './api-error.ts'

/** What the engine knows when it checks a request. */
export interface RequestLimits {
  /** Token ids must lie in [0, vocabSize). */
  vocabSize: number
  /** The engine's --max-tokens. */
  maxTokens: number
  /** The model's max_position_embeddings: a prefill from 0 cannot be longer. */
  maxPositionEmbeddings: number
  /** Absent when the checkpoint has no tokenizer.json: then only `tokens` is accepted. */
  tokenizer?: Tokenizer
}

/** Which prompt form the client used. */
export type PromptSource = 'tokens' | 'prompt' | 'messages'

/** A checked prefill request, ready to queue. */
export interface PrefillRequest {
  /** The client's request id, when it gave one. */
  requestId?: string
  source: PromptSource
  /** The token ids to prefill from position 0. */
  tokens: Int32Array
  /** `tokenIdsSha256(tokens)`: what the capture manifest records (checked against the client's `tokens_sha256` when sent). */
  tokensSha256: string
  memoryBudgetBytes?: number
  /**
   * Continue from a carry sent before (PUT /v1/carry/{id}): the decoder's cache at a block boundary
   * P; the engine then prefills only tokens [P, T) (docs/warm-extend.md).
   */
  resume?: { carryId: string }
  /** Publish block segments while the prefill runs (docs/prefill-engine.md, `stream_blocks`). */
  streamBlocks?: boolean
}

const FIELDS = ['request_id', 'tokens', 'prompt', 'messages', 'memory_budget_bytes', 'tokens_sha256', 'resume', 'stream_blocks'] as const
const PROMPT_FIELDS: readonly PromptSource[] = ['tokens', 'prompt', 'messages']
const ROLES: ReadonlyArray<ChatMessage['role']> = ['system', 'user', 'assistant']

function isObject (v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v)
}

function describe (v: unknown): string {
  if (v === null) return 'null'
  if (Array.isArray(v)) return 'an array'
  if (typeof v === 'string') return `the string ${JSON.stringify(v.length > 40 ? v.slice(0, 40) + '...' : v)}`
  if (typeof v === 'object') return 'an object'
  return `${typeof v} ${String(v)}`
}

function checkMessages (value: unknown): ChatMessage[] {
  if (!Array.isArray(value)) throw badRequest(`messages must be an array of { role, content }, got ${describe(value)}`, 'messages')
  if (value.length === 0) throw badRequest('messages is empty; at least one message is needed', 'messages')
  return value.map((m, i) => {
    const param = `messages[${i}]`
    if (!isObject(m)) throw badRequest(`${param} must be an object { role, content }, got ${describe(m)}`, param)
    for (const key of Object.keys(m)) {
      if (key !== 'role' && key !== 'content') throw badRequest(`${param} has an unknown field ${JSON.stringify(key)}; a message has only role and content`, `${param}.${key}`)
    }
    if (!ROLES.includes(m.role as ChatMessage['role'])) {
      throw badRequest(`${param}.role must be one of ${ROLES.join(', ')}, got ${describe(m.role)}`, `${param}.role`)
    }
    if (typeof m.content !== 'string') throw badRequest(`${param}.content must be a string, got ${describe(m.content)}`, `${param}.content`)
    return { role: m.role as ChatMessage['role'], content: m.content }
  })
}

// The model's window is named first: it is the limit no setting can raise.
function checkLength (count: number, what: string, param: string, limits: RequestLimits): void {
  if (count > limits.maxPositionEmbeddings) {
    throw badRequest(`${what} is ${count} tokens, more than the model's max_position_embeddings (${limits.maxPositionEmbeddings})`, param)
  }
  if (count > limits.maxTokens) {
    throw badRequest(`${what} is ${count} tokens, more than this engine's --max-tokens (${limits.maxTokens})`, param)
  }
}

function checkTokenIds (value: unknown, limits: RequestLimits): Int32Array {
  if (!Array.isArray(value)) throw badRequest(`tokens must be an array of token ids, got ${describe(value)}`, 'tokens')
  if (value.length === 0) throw badRequest('tokens is empty; at least one token is needed', 'tokens')
  // Length first: a huge array is refused without walking it.
  checkLength(value.length, 'the prompt', 'tokens', limits)
  const ids = new Int32Array(value.length)
  for (let i = 0; i < value.length; i++) {
    const t: unknown = value[i]
    if (typeof t !== 'number' || !Number.isInteger(t) || t < 0 || t >= limits.vocabSize) {
      throw badRequest(`tokens[${i}] is ${describe(t)}, not a token id in [0, ${limits.vocabSize}) (vocab_size)`, `tokens[${i}]`)
    }
    ids[i] = t
  }
  return ids
}

function encodeText (text: string | ((t: Tokenizer) => string), source: 'prompt' | 'messages', limits: RequestLimits): Int32Array {
  if (limits.tokenizer === undefined) {
    throw badRequest(`this model has no tokenizer.json, so ${source} cannot be tokenized; send token ids in tokens`, source)
  }
  const t = limits.tokenizer
  const ids = typeof text === 'string' ? t.encode(text, { addSpecialTokens: true }) : t.encode(text(t))
  checkLength(ids.length, `the ${source === 'prompt' ? 'prompt' : 'chat-templated messages'}`, source, limits)
  return Int32Array.from(ids)
}

/**
 * Check a parsed JSON body and resolve its tokens. Every refusal is a 400 ApiError whose message
 * names the field and the problem and whose `param` is the field's path.
 */
export function parsePrefillRequest (body: unknown, limits: RequestLimits): PrefillRequest {
  if (!isObject(body)) throw badRequest(`the request body must be a JSON object, got ${describe(body)}`)
  for (const key of Object.keys(body)) {
    if (!(FIELDS as readonly string[]).includes(key)) {
      throw badRequest(`unknown field ${JSON.stringify(key)}; the fields are ${FIELDS.join(', ')}`, key)
    }
  }
  let requestId: string | undefined
  if (body.request_id !== undefined) {
    const id = body.request_id
    if (typeof id !== 'string' || !isValidRequestId(id)) {
      throw badRequest(`request_id ${describe(id)} must be a string matching ${String(REQUEST_ID_PATTERN)} without '..'`, 'request_id')
    }
    requestId = id
  }
  let memoryBudgetBytes: number | undefined
  if (body.memory_budget_bytes !== undefined) {
    const b = body.memory_budget_bytes
    if (typeof b !== 'number' || !Number.isSafeInteger(b) || b < 1) {
      throw badRequest(`memory_budget_bytes must be a positive integer, got ${describe(b)}`, 'memory_budget_bytes')
    }
    memoryBudgetBytes = b
  }
  const streamBlocks = body.stream_blocks
  if (streamBlocks !== undefined && typeof streamBlocks !== 'boolean') throw badRequest(`stream_blocks must be true or false, got ${describe(streamBlocks)}`, 'stream_blocks')
  const given = PROMPT_FIELDS.filter((f) => body[f] !== undefined)
  if (given.length === 0) throw badRequest('the prompt is missing: give exactly one of tokens, prompt or messages')
  if (given.length > 1) throw badRequest(`give exactly one of tokens, prompt or messages, not ${given.join(' and ')}`, given[1])
  const source = given[0]
  let tokens: Int32Array
  if (source === 'tokens') tokens = checkTokenIds(body.tokens, limits)
  else if (source === 'prompt') {
    if (typeof body.prompt !== 'string') throw badRequest(`prompt must be a string, got ${describe(body.prompt)}`, 'prompt')
    if (body.prompt === '') throw badRequest('prompt is empty; at least one character is needed', 'prompt')
    tokens = encodeText(body.prompt, 'prompt', limits)
  }
  else {
    const messages = checkMessages(body.messages)
    const chat = chatRenderOptions(body)
    if (typeof chat === 'string') throw badRequest(chat, 'chat_template_kwargs')
    // The checkpoint's chat format, as the decoder renders the same messages.
    tokens = encodeText((t) => t.chatFormat.render(messages, chat), 'messages', limits)
  }
  const tokensSha256 = tokenIdsSha256(tokens)
  if (body.tokens_sha256 !== undefined) {
    // The client's digest of the ids it means: a prompt that arrived (or tokenized) otherwise is refused, not captured.
    const claimed = body.tokens_sha256
    if (typeof claimed !== 'string' || !/^[0-9a-f]{64}$/.test(claimed)) {
      throw badRequest(`tokens_sha256 must be 64 lowercase hex digits (SHA-256 of the token ids as little-endian uint32), got ${describe(claimed)}`, 'tokens_sha256')
    }
    if (claimed !== tokensSha256) {
      throw badRequest(`tokens_sha256 is ${claimed}, but the ${tokens.length} token ids this engine would prefill (from ${source}) hash to ${tokensSha256}`, 'tokens_sha256')
    }
  }
  let resume: PrefillRequest['resume']
  if (body.resume !== undefined) {
    const r = body.resume
    if (!isObject(r)) throw badRequest(`resume must be an object { carry_id }, got ${describe(r)}`, 'resume')
    for (const key of Object.keys(r)) if (key !== 'carry_id') throw badRequest(`resume has an unknown field ${JSON.stringify(key)}; it has only carry_id`, `resume.${key}`)
    if (typeof r.carry_id !== 'string' || !isValidRequestId(r.carry_id)) {
      throw badRequest(`resume.carry_id ${describe(r.carry_id)} must be a string matching ${String(REQUEST_ID_PATTERN)} without '..'`, 'resume.carry_id')
    }
    resume = { carryId: r.carry_id }
  }
  return { requestId, source, tokens, tokensSha256, memoryBudgetBytes, ...(resume === undefined ? {} : { resume }), ...(streamBlocks === true ? { streamBlocks } : {}) }
}
