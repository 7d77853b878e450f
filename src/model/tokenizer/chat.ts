// The chat template shipped in tokenizer_config.json, and the same rendering in TypeScript.
import { ASSISTANT_TOKEN, BOS_TOKEN, EOS_TOKEN, USER_TOKEN } from './specials.ts'

/** One chat message. */
export interface ChatMessage {
  role: 'system' | 'user' | 'assistant'
  content: string
}

/**
 * DeepSeek-style Jinja template: bos, then system text as is, `<｜User｜>` + user text,
 * `<｜Assistant｜>` + assistant text + eos, and a trailing `<｜Assistant｜>` when a generation
 * prompt is asked for. Other roles are dropped.
 */
export const CHAT_TEMPLATE =
  "{{ bos_token }}{% for message in messages %}" +
  "{% if message['role'] == 'system' %}{{ message['content'] }}" +
  `{% elif message['role'] == 'user' %}{{ '${USER_TOKEN}' + message['content'] }}` +
  `{% elif message['role'] == 'assistant' %}{{ '${ASSISTANT_TOKEN}' + message['content'] + eos_token }}` +
  '{% endif %}{% endfor %}' +
  `{% if add_generation_prompt %}{{ '${ASSISTANT_TOKEN}' }}{% endif %}`

/** Render messages exactly as CHAT_TEMPLATE does (the text to encode without adding specials). */
export function renderChat (messages: readonly ChatMessage[], addGenerationPrompt = false): string {
  let out = BOS_TOKEN
  for (const m of messages) {
    if (m.role === 'system') out += m.content
    else if (m.role === 'user') out += USER_TOKEN + m.content
    else if (m.role === 'assistant') out += ASSISTANT_TOKEN + m.content + EOS_TOKEN
  }
  if (addGenerationPrompt) out += ASSISTANT_TOKEN
  return out
}
