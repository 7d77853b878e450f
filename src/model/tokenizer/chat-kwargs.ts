// vLLM's `chat_template_kwargs` request field: extra variables for the chat template (DeepSeek's
// `thinking`, for one). Every end that renders a chat reads it here, so all render alike.
import type { ChatRenderOptions } from './chat-format.ts'

/** The render options a chat request body asks for, or a message saying why the field is wrong. */
export function chatRenderOptions (body: Record<string, unknown>): ChatRenderOptions | string {
  const kwargs = body.chat_template_kwargs
  if (kwargs === undefined || kwargs === null) return {}
  if (typeof kwargs !== 'object' || Array.isArray(kwargs)) return "'chat_template_kwargs' must be an object of template variables"
  return { kwargs: kwargs as Record<string, unknown> }
}
