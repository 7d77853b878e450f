// DeepSeek-V4's encoding as a chat format, with its options read from the request the way vLLM's
// deepseek_v4 tokenizer reads them: chat_template_kwargs `thinking` (or `enable_thinking`) picks
// thinking mode, `drop_thinking` (default true) drops earlier reasoning, `reasoning_effort` "max" or
// "high" (anything else: none); request tools become a leading system turn.
import type { ChatRenderer, ChatRenderOptions, ChatTurn, ReplyParts, SettledReply } from './chat-format.ts'
import { DSML, encodeDeepseekV4, parseDsmlReply, settledDeepseekV4Reply, THINK_END, type DsmlCallBlock } from './deepseek-v4-encoding.ts'
import { digestOf } from './digest.ts'
import { EOS_TOKEN } from './specials.ts'

/** The architecture whose checkpoints render with this encoding when they ship no template (as vLLM). */
export const DEEPSEEK_V4_ARCHITECTURE = 'DeepseekV4ForCausalLM'

// Python truthiness of a JSON value, as `kwargs.get("thinking", False) or ...` judges it.
export function truthy (v: unknown): boolean {
  if (v === undefined || v === null || v === false || v === 0 || v === '') return false
  if (Array.isArray(v)) return v.length > 0
  if (typeof v === 'object') return Object.keys(v).length > 0
  return true
}

/** Read thinking mode from a request's options. */
export function thinkingOf (options: ChatRenderOptions): boolean {
  const k = options.kwargs ?? {}
  return truthy(k.thinking) || truthy(k.enable_thinking)
}

/** DeepSeek-V4's encoding, selected for a V4 checkpoint whose tokenizer_config.json has no chat_template. */
export class DeepseekV4Format implements ChatRenderer {
  readonly kind = 'deepseek-v4'
  readonly digest = digestOf(JSON.stringify({ format: 'deepseek-v4-encoding', version: 1 }))

  render (messages: readonly ChatTurn[], options: ChatRenderOptions = {}): string {
    const k = options.kwargs ?? {}
    const effort = k.reasoning_effort === 'max' || k.reasoning_effort === 'high' ? k.reasoning_effort : undefined
    return encodeDeepseekV4(messages, {
      thinking: thinkingOf(options),
      dropThinking: k.drop_thinking === undefined ? true : truthy(k.drop_thinking),
      reasoningEffort: effort,
      tools: options.tools,
    })
  }

  /**
   * A generated reply split into reasoning, content and tool calls. The generation may stop before
   * eos (a length cap, a stop string), so eos is supplied; a reply outside the format (a malformed
   * tool-call block) is all content, with no tool calls, rather than an error: it is what the model said.
   */
  parseReply (text: string, options: ChatRenderOptions = {}): ReplyParts {
    return dsmlReplyParts(text, thinkingOf(options), 'tool_calls')
  }

  /** What a partial reply has settled, for a stream (parseReply's fields start with it, whatever follows). */
  settledReply (text: string, options: ChatRenderOptions = {}): SettledReply {
    return settledDeepseekV4Reply(text, thinkingOf(options))
  }
}

/**
 * A generated reply split by DeepSeek's encodings (V4's, or V3.2's with its call block). The
 * generation may stop before eos (a length cap, a stop string), so eos is supplied; a reply outside
 * the format (a malformed tool-call block) is all content, with no tool calls, rather than an error:
 * it is what the model said.
 */
export function dsmlReplyParts (text: string, thinking: boolean, block: DsmlCallBlock): ReplyParts {
  const body = text.endsWith(EOS_TOKEN) ? text : text + EOS_TOKEN
  try {
    const parsed = parseDsmlReply(body, thinking, block)
    return thinking ? parsed : { content: parsed.content, tool_calls: parsed.tool_calls }
  } catch {
    if (!thinking) return { content: text, tool_calls: [] }
    // Reasoning that never closed is all reasoning; otherwise the rest is content as said.
    const end = text.indexOf(THINK_END)
    const callsAt = text.indexOf(`\n\n<${DSML}${block}`)
    if (end === -1 || (callsAt !== -1 && callsAt < end)) return { content: '', reasoning_content: text, tool_calls: [] }
    return { content: text.slice(end + THINK_END.length), reasoning_content: text.slice(0, end), tool_calls: [] }
  }
}
