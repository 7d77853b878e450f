// The demo's two legs: the same chat request through the front door (bridged) and straight to a
// decoder with an empty block store (native). Whole responses, greedy, a fixed answer length.
import { request } from 'undici'
import { apiKeyFromEnv, authHeaders } from '../../http/api-key.ts'
import type { ChatMessage } from '../../model/tokenizer/index.ts'
import { StackError } from '../errors.ts'

/** One leg's outcome. */
/** The parts of a chat completion a leg reads; every field is checked before it is used. */
interface ChatCompletionJson {
  error?: { message?: unknown }
  choices?: Array<{ message?: { content?: unknown }, token_ids?: unknown, finish_reason?: unknown }>
  usage?: { prompt_tokens?: unknown, completion_tokens?: unknown, prompt_tokens_details?: { cached_tokens?: number } }
  pd_bridge?: Record<string, unknown> | null
}

export interface LegResult {
  /** Wall time of the request, ms. */
  ms: number
  /** The answer text. */
  text: string
  /** Generated token ids when the server returned them (return_token_ids). */
  tokenIds: number[] | undefined
  finishReason: string
  promptTokens: number
  completionTokens: number
  cachedTokens: number
  /** The X-PD-Bridge header (front door only). */
  verdict: string | undefined
  /** The front door's pd_bridge field (verdict, stage timings, bytes), as sent. */
  bridge: Record<string, unknown> | undefined
}

/** The request body both legs send: greedy, `maxTokens` at most, token ids returned. */
export function chatBody (model: string, messages: ChatMessage[], maxTokens: number): Record<string, unknown> {
  return { model, messages, max_tokens: maxTokens, temperature: 0, return_token_ids: true }
}

/** POST a chat completion to `baseUrl` and read what the demo compares. */
export async function runLeg (name: string, baseUrl: string, body: Record<string, unknown>, timeoutMs: number): Promise<LegResult> {
  const started = performance.now()
  let res
  try {
    res = await request(`${baseUrl}/v1/chat/completions`, {
      method: 'POST',
      // PD_API_KEY (when set) is what the front door and the decoder require.
      headers: { 'content-type': 'application/json', ...authHeaders(apiKeyFromEnv()) },
      body: JSON.stringify(body),
      headersTimeout: timeoutMs,
      bodyTimeout: timeoutMs,
    })
  }
  catch (err) {
    throw new StackError(`${name} leg: ${baseUrl} did not answer: ${(err as Error).message}`)
  }
  const text = await res.body.text()
  const ms = performance.now() - started
  let json: ChatCompletionJson | undefined
  try {
    json = JSON.parse(text)
  }
  catch {
    throw new StackError(`${name} leg: ${baseUrl} answered HTTP ${res.statusCode} with a body that is not JSON: ${text.slice(0, 200)}`)
  }
  if (res.statusCode !== 200) {
    throw new StackError(`${name} leg: ${baseUrl} answered HTTP ${res.statusCode}: ${String(json?.error?.message ?? text.slice(0, 200))}`)
  }
  const choice = json?.choices?.[0]
  const usage = json?.usage
  if (typeof choice?.message?.content !== 'string' || typeof usage?.prompt_tokens !== 'number') {
    throw new StackError(`${name} leg: ${baseUrl} answered without choices[0].message.content or usage: ${text.slice(0, 200)}`)
  }
  const verdictHeader = res.headers['x-pd-bridge']
  return {
    ms,
    text: choice.message.content,
    tokenIds: Array.isArray(choice.token_ids) ? choice.token_ids : undefined,
    finishReason: String(choice.finish_reason),
    promptTokens: usage.prompt_tokens,
    completionTokens: usage.completion_tokens as number,
    cachedTokens: usage.prompt_tokens_details?.cached_tokens ?? 0,
    verdict: Array.isArray(verdictHeader) ? verdictHeader[0] : verdictHeader,
    bridge: typeof json?.pd_bridge === 'object' && json.pd_bridge !== null ? json.pd_bridge : undefined,
  }
}

/** Whether two legs gave the same answer: the same text, finish reason and length, and the same ids when both have them. */
export function sameAnswer (a: LegResult, b: LegResult): boolean {
  if (a.text !== b.text || a.finishReason !== b.finishReason || a.completionTokens !== b.completionTokens) return false
  if (a.tokenIds !== undefined && b.tokenIds !== undefined) {
    return a.tokenIds.length === b.tokenIds.length && a.tokenIds.every((id, i) => id === b.tokenIds?.[i])
  }
  return true
}
