// Server-sent events as OpenAI clients read them: `data: <json>\n\n` per chunk, `data: [DONE]\n\n`
// at the end, errors as `data: {"error": {...}}\n\n`. Writes wait for 'drain' (or for the
// connection to close), so a slow reader slows the producer instead of filling memory.
import type { ServerResponse } from 'node:http'
import { SSE_DONE, sseComment, sseEvent } from '../../http/sse-events.ts'
import type { ApiError } from './api-error.ts'

export { SSE_DONE, sseComment, sseEvent }

/** Writes an SSE response on a raw ServerResponse (after fastify's reply.hijack()). */
export class SseWriter {
  constructor (private readonly res: ServerResponse) {}

  /** Whether the connection is gone or the stream ended: nothing more can be written. */
  get closed (): boolean {
    return this.res.destroyed || this.res.writableEnded
  }

  /** Send the status line and headers now, so the client sees the stream open at once. */
  open (headers: Record<string, string>): void {
    this.res.writeHead(200, {
      'content-type': 'text/event-stream; charset=utf-8',
      'cache-control': 'no-cache',
      connection: 'keep-alive',
      'x-accel-buffering': 'no',
      ...headers,
    })
    this.res.flushHeaders()
  }

  /** Send one chunk; resolves once the socket accepts more (or is gone). */
  async send (payload: unknown): Promise<void> {
    await this.write(sseEvent(payload))
  }

  /**
   * Send an SSE comment (`: text`): clients skip it, but it is bytes on an otherwise silent stream,
   * so a long prefill is not taken for a dead connection. One line; a newline would end it early.
   */
  async comment (text: string): Promise<void> {
    await this.write(sseComment(text))
  }

  /** Send an error chunk and end the stream. */
  async fail (err: ApiError): Promise<void> {
    await this.write(sseEvent(err.toBody()))
    this.end()
  }

  /** Send [DONE] and end the stream. */
  async done (): Promise<void> {
    await this.write(SSE_DONE)
    this.end()
  }

  /** End without a terminator (used when the client is gone). */
  end (): void {
    if (!this.res.writableEnded) this.res.end()
  }

  private async write (text: string): Promise<void> {
    if (this.closed) return
    if (this.res.write(text)) return
    await new Promise<void>((resolve) => {
      const settle = (): void => {
        this.res.off('drain', settle)
        this.res.off('close', settle)
        resolve()
      }
      this.res.on('drain', settle)
      this.res.on('close', settle)
    })
  }
}
