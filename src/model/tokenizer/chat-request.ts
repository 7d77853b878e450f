// A chat request's messages and rendering options in OpenAI's shapes, read the same way by the front
// door and the decoder so both render the same prompt: roles system, developer, user, assistant and
// tool; text content (a string or text parts); an assistant's tool_calls and reasoning
// (`reasoning_content`, or vLLM's `reasoning`); a tool message's tool_call_id; the request's `tools`,
// `tool_choice`, `reasoning_effort` and `chat_template_kwargs` (vLLM's fields).
import type { ChatRenderOptions, ChatTurn } from './chat-format.ts'
import { chatRenderOptions } from './chat-kwargs.ts'

/** Why a request cannot be rendered: `unsupported` for a valid shape this system does not render (an image part). */
export interface ChatReadError { message: string, param: string, unsupported: boolean }

/** The turns and options to render, or why not. */
export type ChatRead = { messages: ChatTurn[], options: ChatRenderOptions } | { error: ChatReadError }

type Json = Record<string, unknown>
const isObject = (v: unknown): v is Json => typeof v === 'object' && v !== null && !Array.isArray(v)

function typeName (v: unknown): string {
  if (v === null) return 'null'
  if (Array.isArray(v)) return 'an array'
  return typeof v === 'object' ? 'an object' : `a ${typeof v}`
}

class ReadFailure extends Error {
  constructor (readonly failure: ChatReadError) { super(failure.message) }
}
const invalid = (message: string, param: string): never => { throw new ReadFailure({ message, param, unsupported: false }) }
const unsupported = (message: string, param: string): never => { throw new ReadFailure({ message, param, unsupported: true }) }

const ROLES = new Set(['system', 'developer', 'user', 'assistant', 'tool'])

// Text parts are joined by a newline, as the front door and decoder always have.
function readContent (v: unknown, at: string, required: boolean): string | undefined {
  if (v === undefined || v === null) return required ? invalid(`'${at}' is required`, at) : undefined
  if (typeof v === 'string') return v
  if (!Array.isArray(v)) return invalid(`'${at}' must be a string or an array of text parts, got ${typeName(v)}`, at)
  return v.map((part, j) => {
    if (!isObject(part)) return invalid(`'${at}[${j}]' must be a content part object, got ${typeName(part)}`, `${at}[${j}]`)
    if (part.type !== 'text') return unsupported(`'${at}[${j}]' is ${typeof part.type === 'string' ? `a '${part.type}' part` : 'a part without a type'}; only text parts are rendered`, at)
    if (typeof part.text !== 'string') return invalid(`'${at}[${j}].text' must be a string, got ${typeName(part.text)}`, `${at}[${j}].text`)
    return part.text
  }).join('\n')
}

function readString (v: unknown, at: string): string {
  if (v === undefined) return invalid(`'${at}' is required: a string`, at)
  return typeof v === 'string' ? v : invalid(`'${at}' must be a string, got ${typeName(v)}`, at)
}

function readToolCalls (v: unknown, at: string): unknown[] {
  if (!Array.isArray(v)) return invalid(`'${at}' must be an array of tool calls, got ${typeName(v)}`, at)
  return v.map((call, j) => {
    const c = `${at}[${j}]`
    if (!isObject(call)) return invalid(`'${c}' must be an object {id, type: "function", function: {name, arguments}}, got ${typeName(call)}`, c)
    if (call.type !== undefined && call.type !== 'function') return unsupported(`'${c}.type' is ${JSON.stringify(call.type)}; only "function" tool calls are rendered`, `${c}.type`)
    if (call.id !== undefined) readString(call.id, `${c}.id`)
    const fn = call.function
    if (!isObject(fn)) return invalid(`'${c}.function' must be an object {name, arguments}, got ${typeName(fn)}`, `${c}.function`)
    readString(fn.name, `${c}.function.name`)
    readString(fn.arguments, `${c}.function.arguments`)
    return call
  })
}

function readTurn (m: unknown, i: number): ChatTurn {
  const at = `messages[${i}]`
  if (!isObject(m)) return invalid(`'${at}' must be an object, got ${typeName(m)}`, at)
  const role = readString(m.role, `${at}.role`)
  if (!ROLES.has(role)) return unsupported(`'${at}.role' is '${role}'; the roles rendered are system, developer, user, assistant and tool`, `${at}.role`)
  const turn: ChatTurn = { role }
  const content = readContent(m.content, `${at}.content`, role !== 'assistant')
  if (content !== undefined) turn.content = content
  if (m.name !== undefined && m.name !== null) turn.name = readString(m.name, `${at}.name`)
  if (m.tool_calls !== undefined && m.tool_calls !== null) {
    if (role !== 'assistant') return invalid(`'${at}.tool_calls' is only for assistant messages`, `${at}.tool_calls`)
    const calls = readToolCalls(m.tool_calls, `${at}.tool_calls`)
    if (calls.length > 0) turn.tool_calls = calls
  }
  for (const key of ['reasoning_content', 'reasoning'] as const) {
    const r = m[key]
    if (r === undefined || r === null) continue
    if (role !== 'assistant') return invalid(`'${at}.${key}' is only for assistant messages`, `${at}.${key}`)
    turn.reasoning_content ??= readString(r, `${at}.${key}`)
  }
  if (role === 'tool') turn.tool_call_id = readString(m.tool_call_id, `${at}.tool_call_id`)
  return turn
}

function readTools (v: unknown): unknown[] | undefined {
  if (v === undefined || v === null) return undefined
  if (!Array.isArray(v)) return invalid(`'tools' must be an array of tool definitions, got ${typeName(v)}`, 'tools')
  v.forEach((t, i) => {
    const at = `tools[${i}]`
    if (!isObject(t)) return invalid(`'${at}' must be an object {type: "function", function: {...}}, got ${typeName(t)}`, at)
    if (t.type !== 'function') return unsupported(`'${at}.type' is ${JSON.stringify(t.type)}; only "function" tools are rendered`, `${at}.type`)
    const fn = t.function
    if (!isObject(fn)) return invalid(`'${at}.function' must be an object {name, description, parameters}, got ${typeName(fn)}`, `${at}.function`)
    readString(fn.name, `${at}.function.name`)
    if (fn.description !== undefined && fn.description !== null) readString(fn.description, `${at}.function.description`)
    if (fn.parameters !== undefined && fn.parameters !== null && !isObject(fn.parameters)) invalid(`'${at}.function.parameters' must be a JSON Schema object, got ${typeName(fn.parameters)}`, `${at}.function.parameters`)
  })
  return v.length > 0 ? v : undefined
}

// The choice a model is free to make is all this system renders; forcing a call needs constrained decoding.
function readToolChoice (v: unknown): void {
  if (v === undefined || v === null || v === 'auto' || v === 'none') return
  if (v === 'required' || isObject(v)) unsupported("'tool_choice' other than \"auto\" or \"none\" needs constrained decoding, which is not supported", 'tool_choice')
  invalid(`'tool_choice' must be "auto", "none", "required" or an object, got ${typeof v === 'string' ? JSON.stringify(v) : typeName(v)}`, 'tool_choice')
}

/** Read a chat completion body's messages and render options (nothing here is rendered yet). */
export function readChatRequest (body: Json): ChatRead {
  try {
    const list = body.messages
    if (list === undefined || list === null) invalid("'messages' is required", 'messages')
    if (!Array.isArray(list)) return invalid(`'messages' must be an array, got ${typeName(list)}`, 'messages')
    if (list.length === 0) invalid("'messages' is empty; at least one message is needed", 'messages')
    const messages = list.map(readTurn)
    const options = chatRenderOptions(body)
    if (typeof options === 'string') return invalid(options, 'chat_template_kwargs')
    const tools = readTools(body.tools)
    readToolChoice(body.tool_choice)
    const effort = body.reasoning_effort
    if (effort !== undefined && effort !== null && typeof effort !== 'string') invalid(`'reasoning_effort' must be a string, got ${typeName(effort)}`, 'reasoning_effort')
    // vLLM hands the request's reasoning_effort to the chat format; chat_template_kwargs may set its own.
    if (typeof effort === 'string' && options.kwargs?.reasoning_effort === undefined) options.kwargs = { ...options.kwargs, reasoning_effort: effort }
    if (tools !== undefined) options.tools = tools
    return { messages, options }
  } catch (e) {
    if (e instanceof ReadFailure) return { error: e.failure }
    throw e
  }
}
