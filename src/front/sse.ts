// Reading a server-sent event stream as it arrives: bytes in, whole events out. Only `data:`
// fields matter for OpenAI streams; several data lines of one event are joined with a newline.
// Comment events (`: text`, the decoder's prefill progress) are kept apart for a relay to pass on.

/** One event of a stream: its data, or a comment (an event of comment lines only). */
export type SseEvent = { kind: 'data', data: string } | { kind: 'comment', text: string }

/** Splits an SSE byte stream into events. */
export class SseParser {
  private readonly decoder = new TextDecoder()
  private buffer = ''

  /** Feed bytes; returns the data of every event completed by them. */
  push (bytes: Uint8Array): string[] {
    return dataOnly(this.pushEvents(bytes))
  }

  /** The end of the stream: an event without its closing blank line still counts. */
  end (): string[] {
    return dataOnly(this.endEvents())
  }

  /** Feed bytes; every event completed by them, comments included, in stream order. */
  pushEvents (bytes: Uint8Array): SseEvent[] {
    this.buffer += this.decoder.decode(bytes, { stream: true })
    return this.drain()
  }

  /** `end()` with comments. */
  endEvents (): SseEvent[] {
    this.buffer += this.decoder.decode()
    const out = this.drain()
    if (this.buffer.trim() !== '') {
      const last = eventOf(this.buffer)
      if (last !== null) out.push(last)
    }
    this.buffer = ''
    return out
  }

  private drain (): SseEvent[] {
    const out: SseEvent[] = []
    for (;;) {
      const m = /\r?\n\r?\n/.exec(this.buffer)
      if (m === null) return out
      const raw = this.buffer.slice(0, m.index)
      this.buffer = this.buffer.slice(m.index + m[0].length)
      const event = eventOf(raw)
      if (event !== null) out.push(event)
    }
  }
}

function dataOnly (events: SseEvent[]): string[] {
  return events.flatMap((e) => e.kind === 'data' ? [e.data] : [])
}

/** One raw event: its data; a comment when it has only comment lines; null otherwise (e.g. an `id:` line alone). */
function eventOf (raw: string): SseEvent | null {
  const lines = raw.split(/\r?\n/)
  const data = lines.filter((l) => l.startsWith('data:'))
  if (data.length > 0) return { kind: 'data', data: data.map((l) => l.slice(l.startsWith('data: ') ? 6 : 5)).join('\n') }
  if (lines.length > 0 && lines.every((l) => l.startsWith(':'))) return { kind: 'comment', text: lines.map((l) => l.slice(l.startsWith(': ') ? 2 : 1)).join(' ') }
  return null
}

// Writing events: the same writers as the decoder's (a comment event's text never holds a line break
// here: eventOf joins a comment's lines with spaces).
export { sseComment, sseEvent as sseData, SSE_DONE } from '../http/sse-events.ts'
