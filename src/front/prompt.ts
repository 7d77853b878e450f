// What the front door reads of a completion request: only what routing needs (model, stream, the
// prompt). Wrong types there are a 400 naming the field; everything else is the decoder's to judge,
// so a real decoder's options (sampling, tools) pass through untouched. A prompt the front cannot
// tokenize exactly as the decoder would (an unknown role, an image part) is not refused: it goes
// to the decoder natively, which knows its own rules.
import type { ChatMessage, Tokenizer } from '../model/tokenizer/index.ts'
import { chatRenderOptions, type ChatRenderOptions } from '../model/tokenizer/index.ts'
import { invalidRequest } from './api-error.ts'

/** Which endpoint a request came to. */
export type Endpoint = 'chat' | 'completion'

/** The prompt, as far as the front door can read it. */
export type PromptSource =
  | { kind: 'chat', messages: ChatMessage[], chat?: ChatRenderOptions }
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

const ROLES: Record<string, ChatMessage['role'] | undefined> = {
  system: 'system',
  developer: 'system',
  user: 'user',
  assistant: 'assistant',
}

function readMessages (v: unknown): PromptSource {
  if (v === undefined || v === null) throw invalidRequest("'messages' is required: a non-empty array of messages", 'messages')
  if (!Array.isArray(v)) throw invalidRequest(`'messages' must be an array, got ${typeName(v)}`, 'messages')
  if (v.length === 0) throw invalidRequest("'messages' must not be empty", 'messages')
  const out: ChatMessage[] = []
  let opaque: string | undefined
  v.forEach((m, i) => {
    const at = `messages[${i}]`
    if (!isObject(m)) throw invalidRequest(`'${at}' must be an object, got ${typeName(m)}`, at)
    if (typeof m.role !== 'string') throw invalidRequest(`'${at}.role' must be a string, got ${typeName(m.role)}`, `${at}.role`)
    const role = ROLES[m.role]
    if (role === undefined) opaque ??= `'${at}.role' is '${m.role}', which the chat template has no place for`
    const content = m.content
    let text: string | undefined
    if (typeof content === 'string') text = content
    else if (Array.isArray(content)) {
      const parts: string[] = []
      content.forEach((p, j) => {
        if (isObject(p) && p.type === 'text' && typeof p.text === 'string') parts.push(p.text)
        else opaque ??= `'${at}.content[${j}]' is not a text part`
      })
      text = parts.join('\n')
    } else if (content === null || content === undefined) opaque ??= `'${at}.content' is ${content === null ? 'null' : 'missing'}`
    else throw invalidRequest(`'${at}.content' must be a string or an array of content parts, got ${typeName(content)}`, `${at}.content`)
    if (role !== undefined && text !== undefined) out.push({ role, content: text })
  })
  return opaque !== undefined ? { kind: 'opaque', why: opaque } : { kind: 'chat', messages: out, chat: {} }
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

// The render options (chat_template_kwargs) go with the messages: the decoder renders with them too.
function withChatOptions (prompt: PromptSource, body: Record<string, unknown>): PromptSource {
  if (prompt.kind !== 'chat') return prompt
  const chat = chatRenderOptions(body)
  if (typeof chat === 'string') throw invalidRequest(chat, 'chat_template_kwargs')
  return { ...prompt, chat }
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
    prompt: endpoint === 'chat' ? withChatOptions(readMessages(body.messages), body) : readPrompt(body.prompt),
  }
}

/**
 * The prompt's token ids as the decoder computes them: chat through the chat template with the
 * generation prompt (bos first), text encoded with bos (add_special_tokens), ids as given. Null for
 * an opaque prompt or ids outside the vocabulary (the decoder refuses those itself).
 */
export function promptTokenIds (prompt: PromptSource, tokenizer: Tokenizer, vocabSize: number): number[] | null {
  if (prompt.kind === 'chat') return tokenizer.encodeChat(prompt.messages, prompt.chat)
  if (prompt.kind === 'text') return tokenizer.encode(prompt.text, { addSpecialTokens: true })
  if (prompt.kind === 'tokens') return prompt.tokens.every((t) => t < vocabSize) ? prompt.tokens : null
  return null
}
