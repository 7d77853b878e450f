// What the front door reads of a completion request: only what routing needs (model, stream, the
// prompt). Wrong types there are a 400 naming the field; everything else is the decoder's to judge,
// so a real decoder's options (sampling, tools) pass through untouched. A prompt the front cannot
// tokenize exactly as the decoder would (an unknown role, an image part) is not refused: it goes
// to the decoder natively, which knows its own rules.
import type { ChatTurn, Tokenizer } from '../model/tokenizer/index.ts'
import { readChatRequest, type ChatRenderOptions } from '../model/tokenizer/index.ts'
import { PdBridgeError } from '../errors.ts'
import { invalidRequest } from './api-error.ts'

/** Which endpoint a request came to. */
export type Endpoint = 'chat' | 'completion'

/** The prompt, as far as the front door can read it. */
export type PromptSource =
  | { kind: 'chat', messages: ChatTurn[], chat?: ChatRenderOptions }
  | { kind: 'text', text: string }
  | { kind: 'tokens', tokens: number[] }
  | { kind: 'opaque', why: string }

/** What routing needs of one request. */
export interface FrontRequest {
  endpoint: Endpoint
  /** The model asked for (undefined: the served one). */
  model: string | undefined
  stream: boolean
  /** stream_options.include_usage as the client asked it. */
  includeUsage: boolean
  prompt: PromptSource
}

type Body = Record<string, unknown>

function typeName (v: unknown): string {
  if (v === null) return 'null'
  if (Array.isArray(v)) return 'an array'
  return typeof v === 'object' ? 'an object' : `a ${typeof v}`
}

function isObject (v: unknown): v is Body {
  return typeof v === 'object' && v !== null && !Array.isArray(v)
}

// What routing itself needs of the messages is a 400 when wrong; the rest is read as the decoder reads it.
function checkMessageShapes (v: unknown): void {
  if (v === undefined || v === null) throw invalidRequest("'messages' is required: a non-empty array of messages", 'messages')
  if (!Array.isArray(v)) throw invalidRequest(`'messages' must be an array, got ${typeName(v)}`, 'messages')
  if (v.length === 0) throw invalidRequest("'messages' must not be empty", 'messages')
  v.forEach((m, i) => {
    const at = `messages[${i}]`
    if (!isObject(m)) throw invalidRequest(`'${at}' must be an object, got ${typeName(m)}`, at)
    if (typeof m.role !== 'string') throw invalidRequest(`'${at}.role' must be a string, got ${typeName(m.role)}`, `${at}.role`)
    const content = m.content
    if (content !== null && content !== undefined && typeof content !== 'string' && !Array.isArray(content)) {
      throw invalidRequest(`'${at}.content' must be a string or an array of content parts, got ${typeName(content)}`, `${at}.content`)
    }
  })
}

// Messages, tools and render options as the decoder reads them (readChatRequest); what it would
// refuse or cannot render is opaque here: the decoder answers it natively, with its own error.
function readChat (body: Body): PromptSource {
  checkMessageShapes(body.messages)
  const read = readChatRequest(body)
  if (!('error' in read)) return { kind: 'chat', messages: read.messages, chat: read.options }
  if (read.error.param === 'chat_template_kwargs') throw invalidRequest(read.error.message, 'chat_template_kwargs')
  return { kind: 'opaque', why: read.error.message }
}

function isTokenArray (v: unknown[]): v is number[] {
  return v.every((t) => typeof t === 'number' && Number.isSafeInteger(t) && t >= 0)
}

function readPrompt (v: unknown): PromptSource {
  if (v === undefined || v === null) throw invalidRequest("'prompt' is required: a string or an array of token ids", 'prompt')
  if (typeof v === 'string') return { kind: 'text', text: v }
  if (!Array.isArray(v)) throw invalidRequest(`'prompt' must be a string or an array, got ${typeName(v)}`, 'prompt')
  if (v.length === 0) throw invalidRequest("'prompt' must not be empty", 'prompt')
  if (isTokenArray(v)) return { kind: 'tokens', tokens: v }
  // A batch of one is the same prompt; larger batches are the decoder's business.
  if (v.length === 1 && typeof v[0] === 'string') return { kind: 'text', text: v[0] }
  if (v.length === 1 && Array.isArray(v[0]) && v[0].length > 0 && isTokenArray(v[0])) return { kind: 'tokens', tokens: v[0] }
  return { kind: 'opaque', why: `'prompt' is a batch of ${v.length} or holds values that are not token ids` }
}

/** Read a parsed body of `endpoint`; a 400 naming the field when a field routing reads has the wrong type. */
export function readFrontRequest (body: unknown, endpoint: Endpoint): FrontRequest {
  if (!isObject(body)) throw invalidRequest(`the request body must be a JSON object, got ${typeName(body)}`)
  const model = body.model
  if (model !== undefined && model !== null && typeof model !== 'string') throw invalidRequest(`'model' must be a string, got ${typeName(model)}`, 'model')
  const stream = body.stream
  if (stream !== undefined && stream !== null && typeof stream !== 'boolean') throw invalidRequest(`'stream' must be a boolean, got ${typeName(stream)}`, 'stream')
  const options = body.stream_options
  const includeUsage = isObject(options) && options.include_usage === true
  return {
    endpoint,
    model: typeof model === 'string' ? model : undefined,
    stream: stream === true,
    includeUsage,
    prompt: endpoint === 'chat' ? readChat(body) : readPrompt(body.prompt),
  }
}

/**
 * The prompt's token ids as the decoder computes them: chat through the chat template with the
 * generation prompt (bos first), text encoded with bos (add_special_tokens), ids as given. Null for
 * an opaque prompt, messages the chat format refuses, or ids outside the vocabulary (the decoder refuses those itself).
 */
export function promptTokenIds (prompt: PromptSource, tokenizer: Tokenizer, vocabSize: number): number[] | null {
  if (prompt.kind === 'chat') {
    try {
      return tokenizer.encodeChat(prompt.messages, prompt.chat)
    } catch (e) {
      // Messages the chat format refuses: the decoder refuses them itself, with the same reason.
      if (e instanceof PdBridgeError) return null
      throw e
    }
  }
  if (prompt.kind === 'text') return tokenizer.encode(prompt.text, { addSpecialTokens: true })
  if (prompt.kind === 'tokens') return prompt.tokens.every((t) => t < vocabSize) ? prompt.tokens : null
  return null
}
