// The checkpoint's own chat format: tokenizer_config.json's `chat_template`, rendered with a real
// Jinja engine (@huggingface/jinja) in the context transformers' apply_chat_template gives it:
// messages, tools, add_generation_prompt, the special-token strings and any extra template kwargs
// (the engine itself provides raise_exception and strftime_now). Parity with transformers is proven in suites/chat-format.
import { readFile } from 'node:fs/promises'
import { join } from 'node:path'
import { Template } from '@huggingface/jinja'
import { ConfigError, PdBridgeError } from '../../errors.ts'
import { digestOf } from './digest.ts'

/** One chat message as a client sends it; the template reads what it knows of it. */
export interface ChatTurn {
  role: string
  content?: unknown
  tool_calls?: unknown
  tool_call_id?: unknown
  reasoning_content?: unknown
  name?: unknown
}

/** What a chat format makes of a reply it defines a shape for (reasoning, tool calls). */
export interface ReplyParts {
  content: string
  /** The reasoning the reply opened with, when the format has one. */
  reasoning_content?: string
  /** Tool calls in OpenAI's shape (arguments a JSON string); empty when none were made. */
  tool_calls: Array<{ type: 'function', function: { name: string, arguments: string } }>
}

/**
 * What a partial reply already says for certain: reasoning and content that every continuation of
 * the text keeps as the start of parseReply's fields (a stream may send them at once). Tool calls
 * are never settled early: a call block is only known to be one when the reply ends.
 */
export interface SettledReply {
  content: string
  reasoning_content?: string
}

/** A way to turn chat messages into prompt text: a Jinja template, or DeepSeek's own encoding. */
export interface ChatRenderer {
  /** Which family: 'jinja' (tokenizer_config.json's template), 'deepseek-v4' or 'deepseek-v3.2' (DeepSeek's encodings). */
  readonly kind: string
  /** sha256 of what decides the rendering: two ends that render alike show the same digest. */
  readonly digest: string
  /** The Jinja source, for a template format (what export-gguf writes as tokenizer.chat_template). */
  readonly template?: string
  /** The prompt text for these messages (to be encoded without adding special tokens). */
  render: (messages: readonly ChatTurn[], options?: ChatRenderOptions) => string
  /** Split a reply into reasoning, content and tool calls; absent where the format defines no such shape. */
  parseReply?: (text: string, options?: ChatRenderOptions) => ReplyParts
  /** For a stream: what of a partial reply parseReply of any longer reply starts with; present with parseReply. */
  settledReply?: (text: string, options?: ChatRenderOptions) => SettledReply
}

/** How to render: what vLLM's chat request fields map to. */
export interface ChatRenderOptions {
  /** Append the assistant's opening (default true: a prompt for a completion). */
  addGenerationPrompt?: boolean
  /** OpenAI-style tool definitions, passed to the template as `tools`. */
  tools?: readonly unknown[]
  /** Extra template variables (vLLM's chat_template_kwargs, e.g. {"thinking": true}). */
  kwargs?: Record<string, unknown>
}

const SPECIAL_KEYS = ['bos_token', 'eos_token', 'unk_token', 'pad_token'] as const

type Json = Record<string, unknown>
const isObject = (v: unknown): v is Json => typeof v === 'object' && v !== null && !Array.isArray(v)

// tokenizer_config.json writes a special token as a string or as an AddedToken object.
function tokenString (v: unknown): string | undefined {
  if (typeof v === 'string') return v
  if (isObject(v) && typeof v.content === 'string') return v.content
  return undefined
}

/**
 * The variables a template is rendered with, as apply_chat_template gives them: the request's
 * kwargs, then (not overridable) the special-token strings, messages, add_generation_prompt and tools.
 */
export function templateContext (messages: readonly ChatTurn[], options: ChatRenderOptions, specials: Readonly<Record<string, string>>): Record<string, unknown> {
  const context: Record<string, unknown> = {
    ...options.kwargs,
    ...specials,
    // OpenAI's developer role is the template's system role (templates of this family know no other).
    messages: messages.some((m) => m.role === 'developer') ? messages.map((m) => m.role === 'developer' ? { ...m, role: 'system' } : m) : messages,
    add_generation_prompt: options.addGenerationPrompt ?? true,
  }
  if (options.tools !== undefined) context.tools = options.tools
  return context
}

/** A compiled chat template with the special-token strings it is rendered with. */
export class ChatFormat implements ChatRenderer {
  readonly kind = 'jinja'
  /** sha256 of the template and its special tokens: two ends that render alike show the same digest. */
  readonly digest: string
  private readonly compiled: Template

  constructor (readonly template: string, readonly specials: Readonly<Record<string, string>>, file = 'tokenizer_config.json') {
    try {
      this.compiled = new Template(template)
    } catch (e) {
      throw new ConfigError('chat_template', `does not parse as Jinja: ${(e as Error).message}`, file)
    }
    this.digest = digestOf(JSON.stringify({ template, specials }))
  }

  /** Build from a parsed tokenizer_config.json; undefined when it has no chat_template. */
  static fromConfig (config: unknown, file = 'tokenizer_config.json'): ChatFormat | undefined {
    if (!isObject(config)) return undefined
    let template = config.chat_template
    // A list of named templates: transformers takes the one named "default".
    if (Array.isArray(template)) {
      const named = template.find((t) => isObject(t) && t.name === 'default')
      template = isObject(named) ? named.template : undefined
    }
    if (template === undefined || template === null) return undefined
    if (typeof template !== 'string') throw new ConfigError('chat_template', 'must be a string or a list with a "default" entry', file)
    const specials: Record<string, string> = {}
    for (const key of SPECIAL_KEYS) {
      const s = tokenString(config[key])
      if (s !== undefined) specials[key] = s
    }
    return new ChatFormat(template, specials, file)
  }

  /** The prompt text for these messages (to be encoded without adding special tokens). */
  render (messages: readonly ChatTurn[], options: ChatRenderOptions = {}): string {
    const context = templateContext(messages, options, this.specials)
    try {
      return this.compiled.render(context)
    } catch (e) {
      // raise_exception in the template, or a type error in it: the request cannot be rendered.
      throw new PdBridgeError(`chat template: ${(e as Error).message}`)
    }
  }
}

/** Read `<dir>/tokenizer_config.json`'s chat format; undefined when the file or its template is absent. */
export async function loadChatFormat (dir: string): Promise<ChatFormat | undefined> {
  const file = join(dir, 'tokenizer_config.json')
  let text: string
  try {
    text = await readFile(file, 'utf8')
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return undefined
    throw new ConfigError('tokenizer_config.json', `cannot read: ${(e as Error).message}`, file)
  }
  let json: unknown
  try {
    json = JSON.parse(text)
  } catch (e) {
    throw new ConfigError('(root)', `not valid JSON: ${(e as Error).message}`, file)
  }
  return ChatFormat.fromConfig(json, file)
}
