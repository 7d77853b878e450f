// One HTTP look at a link: the JSON it answers, how long it took, and its clock (the Date header).
// Every failure becomes a sentence; nothing here throws. With PD_API_KEY set it is sent, so the
// links answer with their whole /health, not the bare status they give a caller without the key.
import { apiKeyFromEnv, authHeaders } from '../../http/api-key.ts'

/** What a GET returned, or why it did not. */
export type Probe =
  | { ok: true, status: number, body: unknown, ms: number, date: number | undefined, sent: number, received: number }
  | { ok: false, problem: string, ms: number }

/** GET `url` with a deadline; the body is parsed as JSON when it is JSON. */
export async function probe (url: string, timeoutMs: number): Promise<Probe> {
  const started = Date.now()
  const ms = (): number => Date.now() - started
  let res: Response
  try {
    res = await fetch(url, { headers: authHeaders(apiKeyFromEnv()), signal: AbortSignal.timeout(timeoutMs) })
  }
  catch (err) {
    const e = err as Error & { cause?: { code?: string } }
    if (e.name === 'TimeoutError' || e.name === 'AbortError') return { ok: false, problem: `no answer within ${timeoutMs} ms`, ms: ms() }
    const code = e.cause?.code
    if (code === 'ECONNREFUSED') return { ok: false, problem: 'connection refused (nothing listens there)', ms: ms() }
    return { ok: false, problem: `cannot connect: ${code ?? e.message}`, ms: ms() }
  }
  const text = await res.text().catch(() => '')
  let body: unknown = text
  try {
    body = JSON.parse(text)
  }
  catch {
    // Not JSON; the caller says so if it wanted JSON.
  }
  const dateHeader = res.headers.get('date')
  const date = dateHeader === null ? undefined : Date.parse(dateHeader)
  return { ok: true, status: res.status, body, ms: ms(), date: Number.isNaN(date) ? undefined : date, sent: started, received: Date.now() }
}

/** A JSON object field of a probe's body, or undefined. */
export function field (body: unknown, ...path: string[]): unknown {
  let at: unknown = body
  for (const key of path) {
    if (at === null || typeof at !== 'object') return undefined
    at = (at as Record<string, unknown>)[key]
  }
  return at
}

/**
 * How far the clock behind a Date header is from ours: 0 when the header could have been written
 * between sending and receiving (it is truncated to the second, so that window starts one second
 * early), else the distance to that window, negative when the other clock is behind.
 */
export function clockSkew (date: number, sent: number, received: number): number {
  if (date < sent - 1000) return date - (sent - 1000)
  if (date > received) return date - received
  return 0
}
