// The events of an OpenAI-style server-sent stream (`data: {...}` lines, `data: [DONE]` at the
// end), parsed one by one as they arrive: what every protocol leg that streams reads.

/** Call `onEvent` with each JSON event of the stream `body` (an async iterable of bytes), in order. */
export async function forEachEvent (body, onEvent) {
  const decoder = new TextDecoder()
  let buffer = ''
  for await (const chunk of body) {
    buffer += decoder.decode(chunk, { stream: true })
    let nl
    while ((nl = buffer.indexOf('\n')) >= 0) {
      const line = buffer.slice(0, nl).trim()
      buffer = buffer.slice(nl + 1)
      if (!line.startsWith('data:')) continue
      const data = line.slice(5).trim()
      if (data !== '[DONE]') onEvent(JSON.parse(data))
    }
  }
}
