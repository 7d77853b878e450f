// Server-sent events' bytes as OpenAI clients read them: `data: <json>\n\n` per chunk, `: text\n\n`
// comments, `data: [DONE]\n\n` at the end. One home for every server that streams (the decoder and
// the front door write the same format).

/** One event's bytes: JSON on a single data line (JSON.stringify never emits a raw newline). */
export function sseEvent (payload: unknown): string {
  return `data: ${JSON.stringify(payload)}\n\n`
}

/** A comment line's bytes; a line break in `text` is refused (it would start a field). */
export function sseComment (text: string): string {
  if (/[\r\n]/.test(text)) throw new RangeError(`an SSE comment is one line, got ${JSON.stringify(text)}`)
  return `: ${text}\n\n`
}

/** The stream's terminator. */
export const SSE_DONE = 'data: [DONE]\n\n'
