// DeepSeek-V3.2's encoding as a chat format, its options read from the request as for V4
// (deepseek-v4-format.ts): chat_template_kwargs `thinking` (or `enable_thinking`) picks thinking mode,
// `drop_thinking` (default true) drops earlier turns' reasoning and developer turns, request tools
// become a leading system turn (and, as vLLM's V3.2 tokenizer does, keep everything). V3.2 knows no
// reasoning_effort: it is read and changes nothing.
import type { ChatRenderer, ChatRenderOptions, ChatTurn, ReplyParts, SettledReply } from './chat-format.ts'
import { encodeDeepseekV32, settledDeepseekV32Reply } from './deepseek-v32-encoding.ts'
import { dsmlReplyParts, thinkingOf, truthy } from './deepseek-v4-format.ts'
import { digestOf } from './digest.ts'

/** The architecture whose checkpoints render with this encoding when they ship no template (DeepSeek-V3.2 and V3.2-Exp). */
export const DEEPSEEK_V32_ARCHITECTURE = 'DeepseekV32ForCausalLM'

/** DeepSeek-V3.2's encoding, selected for a V3.2 checkpoint whose tokenizer_config.json has no chat_template. */
export class DeepseekV32Format implements ChatRenderer {
  readonly kind = 'deepseek-v3.2'
  readonly digest = digestOf(JSON.stringify({ format: 'deepseek-v3.2-encoding', version: 1 }))

  render (messages: readonly ChatTurn[], options: ChatRenderOptions = {}): string {
    const k = options.kwargs ?? {}
    return encodeDeepseekV32(messages, {
      thinking: thinkingOf(options),
      dropThinking: k.drop_thinking === undefined ? true : truthy(k.drop_thinking),
      tools: options.tools,
    })
  }

  /** A generated reply split as V4's is (dsmlReplyParts), with V3.2's call block. */
  parseReply (text: string, options: ChatRenderOptions = {}): ReplyParts {
    return dsmlReplyParts(text, thinkingOf(options), 'function_calls')
  }

  /** What a partial reply has settled, for a stream. */
  settledReply (text: string, options: ChatRenderOptions = {}): SettledReply {
    return settledDeepseekV32Reply(text, thinkingOf(options))
  }
}
