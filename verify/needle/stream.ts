// One streamed chat completion against any OpenAI-compatible server: the answer text, the finish
// reason, usage (when the server sends it), and from a pd-bridge front door the `pd_bridge` field
// and the X-PD-Bridge header. Greedy, with the answer budget as max_tokens.
import { Agent, fetch } from 'undici'
import { PdBridgeError } from '../../src/errors.ts'
import type { ChatMessage } from '../../src/model/tokenizer/index.ts'
import { apiKeyFromEnv, authHeaders } from '../../src/http/api-key.ts'

/** What one streamed leg returned. */
export interface StreamedAnswer {
  text: string
  finishReason: string
  /** usage.prompt_tokens / completion_tokens; null when the server sent no usage chunk. */
  promptTokens: number | null
  completionTokens: number | null
  /** The front door's pd_bridge field, as sent (the last one seen). */
  pdBridge: Record<string, unknown> | undefined
  /** The X-PD-Bridge header. */
  header: string | undefined
  totalMs: number
  /** Time to the first answer text; null when none came. */
  ttftMs: number | null
}

/** The request: greedy, streamed with usage, at most `maxTokens` answer tokens. */
export interface StreamRequest {
  baseUrl: string
  model: string
  messages: ChatMessage[]
  maxTokens: number
  timeoutMs: number
  /** Names the leg in errors: "bridged", "native". */
  leg: string
}

function isRecord (v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v)
}

function count (v: unknown): number | null {
  return Number.isSafeInteger(v) && (v as number) >= 0 ? v as number : null
}

/** POST /v1/chat/completions with stream: true and read the whole stream. */
export async function streamChat (r: StreamRequest): Promise<StreamedAnswer> {
  const url = `${r.baseUrl.replace(/\/+$/, '')}/v1/chat/completions`
  const body = { model: r.model, messages: r.messages, max_tokens: r.maxTokens, temperature: 0, stream: true, stream_options: { include_usage: true } }
  const started = performance.now()
  // A bridged front door sends its headers when the bridge is done (X-PD-Bridge carries the verdict):
  // for a long prompt that is past undici's default 300 s, so the leg's own timeout bounds the wait.
  const dispatcher = new Agent({ headersTimeout: r.timeoutMs, bodyTimeout: r.timeoutMs })
  try {
    return await read(r, url, body, started, dispatcher)
  }
  finally {
    await dispatcher.close()
  }
}

async function read (r: StreamRequest, url: string, body: unknown, started: number, dispatcher: Agent): Promise<StreamedAnswer> {
  let res: Awaited<ReturnType<typeof fetch>>
  try {
    res = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json', ...authHeaders(apiKeyFromEnv()) }, body: JSON.stringify(body), signal: AbortSignal.timeout(r.timeoutMs), dispatcher })
  }
  catch (e) {
    const cause = (e as { cause?: { message?: string } }).cause?.message
    throw new PdBridgeError(`${r.leg} leg: ${url} did not answer: ${(e as Error).message}${cause !== undefined ? ` (${cause})` : ''}`)
  }
  if (res.status !== 200 || res.body === null) {
    const text = await res.text().catch(() => '')
    throw new PdBridgeError(`${r.leg} leg: ${url} answered HTTP ${res.status}: ${text.slice(0, 300)}`)
  }
  const out: StreamedAnswer = { text: '', finishReason: '', promptTokens: null, completionTokens: null, pdBridge: undefined, header: res.headers.get('x-pd-bridge') ?? undefined, totalMs: 0, ttftMs: null }
  const decoder = new TextDecoder()
  let buffer = ''
  const onLine = (raw: string): void => {
    const line = raw.trim()
    if (!line.startsWith('data:')) return
    const data = line.slice(5).trim()
    if (data === '[DONE]') return
    let event: unknown
    try {
      event = JSON.parse(data)
    }
    catch {
      throw new PdBridgeError(`${r.leg} leg: ${url} sent a stream event that is not JSON: ${data.slice(0, 200)}`)
    }
    if (!isRecord(event)) return
    if (isRecord(event.error)) throw new PdBridgeError(`${r.leg} leg: ${url} failed mid-stream: ${String(event.error.message ?? JSON.stringify(event.error))}`)
    const choice = Array.isArray(event.choices) && isRecord(event.choices[0]) ? event.choices[0] : undefined
    const delta = isRecord(choice?.delta) ? choice.delta : undefined
    if (typeof delta?.content === 'string' && delta.content !== '') {
      out.ttftMs ??= performance.now() - started
      out.text += delta.content
    }
    if (typeof choice?.finish_reason === 'string') out.finishReason = choice.finish_reason
    if (isRecord(event.usage)) {
      out.promptTokens = count(event.usage.prompt_tokens)
      out.completionTokens = count(event.usage.completion_tokens)
    }
    if (isRecord(event.pd_bridge)) out.pdBridge = event.pd_bridge
  }
  try {
    for await (const chunk of res.body) {
      buffer += decoder.decode(chunk as Uint8Array, { stream: true })
      let nl
      while ((nl = buffer.indexOf('\n')) >= 0) {
        onLine(buffer.slice(0, nl))
        buffer = buffer.slice(nl + 1)
      }
    }
  }
  catch (e) {
    if (e instanceof PdBridgeError) throw e
    throw new PdBridgeError(`${r.leg} leg: ${url} broke off the stream: ${(e as Error).message}`)
  }
  onLine(buffer)
  out.totalMs = performance.now() - started
  return out
}
