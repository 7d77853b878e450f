// Reading a server-sent event stream as it arrives: bytes in, whole events out. Only `data:`
// fields matter for OpenAI streams; several data lines of one event are joined with a newline.

/** Splits an SSE byte stream into the data of each event. */
export class SseParser {
  private readonly decoder = new TextDecoder()
  private buffer = ''

  /** Feed bytes; returns the data of every event completed by them. */
  push (bytes: Uint8Array): string[] {
    this.buffer += this.decoder.decode(bytes, { stream: true })
    return this.drain()
  }

  /** The end of the stream: an event without its closing blank line still counts. */
  end (): string[] {
    this.buffer += this.decoder.decode()
    const out = this.drain()
    if (this.buffer.trim() !== '') {
      const last = dataOf(this.buffer)
      if (last !== null) out.push(last)
    }
    this.buffer = ''
    return out
  }

  private drain (): string[] {
    const out: string[] = []
    for (;;) {
      const m = /\r?\n\r?\n/.exec(this.buffer)
      if (m === null) return out
      const raw = this.buffer.slice(0, m.index)
      this.buffer = this.buffer.slice(m.index + m[0].length)
      const data = dataOf(raw)
      if (data !== null) out.push(data)
    }
  }
}

/** The data of one raw event, or null when it has no data field (a comment, a keep-alive). */
function dataOf (raw: string): string | null {
  const lines = raw.split(/\r?\n/).filter((l) => l.startsWith('data:'))
  if (lines.length === 0) return null
  return lines.map((l) => l.slice(l.startsWith('data: ') ? 6 : 5)).join('\n')
}

/** One event's bytes for a JSON payload. */
export function sseData (payload: unknown): string {
  return `data: ${JSON.stringify(payload)}\n\n`
}

/** The stream's terminator. */
export const SSE_DONE = 'data: [DONE]\n\n'
