// Forwarding a completion request to the decoder and its answer back to the client, with the
// verdict: the X-PD-Bridge header and a `pd_bridge` field in the JSON body (whole answers) or on
// the last chunk before [DONE] (streams). A bridged request's verdict is confirmed from what the
// decoder reports as cached tokens; a stream's header is decided from the decoder's X-Cached-Tokens
// header, and a decoder that sends none has its stream held until its usage chunk arrives, so the
// header is never a guess.
import { once } from 'node:events'
import type { ServerResponse } from 'node:http'
import { request } from 'undici'
import type { FrontConfig } from '../config/index.ts'
import { PD_ERR } from '../errors.ts'
import { passHeaders } from '../http/hop-by-hop.ts'
import { describeFailure, freshConnection, joinUrl, linkFailure } from './http.ts'
import { SSE_DONE, SseParser, sseComment, sseData, type SseEvent } from './sse.ts'
import { confirmBridge, refused, restoredVerdict, VERDICT_HEADER, verdictHeader, verdictText, type BridgedPlan, type Verdict } from './verdict.ts'

/** What the client learns in `pd_bridge` (snake_case, like the rest of the OpenAI body). */
export interface PdBridgeInfo {
  verdict: string
  route: 'bridge' | 'native'
  prompt_tokens: number | null
  /** Tokens of the prompt the decoder's store held before (full usable blocks). */
  stored_tokens_before: number | null
  /** Tokens in bridged blocks (B); 0 when nothing was bridged. Past resumed_from for a warm-extended bridge. */
  bridged_tokens: number
  /** A warm-extended bridge: the stored boundary P the prefill engine continued from. */
  resumed_from?: number
  /** Why a bridge over stored blocks ran from token 0 instead of continuing from them. */
  warm_extend_declined?: string
  /** What the decoder reported (usage.prompt_tokens_details.cached_tokens or X-Cached-Tokens). */
  cached_tokens: number | null
  blocks: { bridged: number, written: number, reused: number } | null
  /** A prompt sharing full blocks with a bridge in flight waited for it (then continued from its blocks). */
  shared_prefix?: { blocks: number, waited_ms: number }
  /** When the bridge ran (epoch ms, the queue excluded): bridges that overlapped show it here. */
  window_ms?: { start: number, end: number }
  /** Blocks written while the engine ran (capture.streamBlocks): how many were put before the capture was sealed. */
  stream?: { blocks_before_seal: number }
  /** `retention`: what became of the capture on the prefill side (capture.retain). `tokens_sha256`: the digest of the captured token ids the manifest carried and the block writer checked. */
  capture: { request_id: string, state: string, token_count: number, sealed_length: number, tokens_sha256?: string, retention?: string } | null
  rescan: { ok: boolean, error?: string } | null
  timings_ms: Record<string, number>
  bytes: Record<string, number>
}

/** One forward. */
export interface ForwardPlan {
  /** `/v1/chat/completions` or `/v1/completions`. */
  path: string
  body: Record<string, unknown>
  stream: boolean
  /** stream_options.include_usage as the client asked it. */
  includeUsage: boolean
  /** A bridged request to confirm, or the declined verdict that stands. */
  outcome: { bridged: BridgedPlan } | { verdict: Verdict }
  info: PdBridgeInfo
}

/** What the forward ended with, for the log. */
export interface ForwardResult {
  status: number
  verdict: Verdict
  cachedTokens: number | undefined
}

// The decoder's answer is read and sent again as plain JSON with pd_bridge added: its length, encoding
// and type are the new body's, set when it is sent.
const RESENT_DROPS = ['content-length', 'content-encoding', 'content-type']

function header (headers: Record<string, string | string[] | undefined>, name: string): string | undefined {
  const v = headers[name]
  return Array.isArray(v) ? v[0] : v
}

function cachedFromHeader (headers: Record<string, string | string[] | undefined>): number | undefined {
  const v = header(headers, 'x-cached-tokens')
  return v !== undefined && /^\d+$/.test(v) ? Number(v) : undefined
}

function cachedFromUsage (usage: unknown): number | undefined {
  const details = (usage as { prompt_tokens_details?: { cached_tokens?: unknown } } | null | undefined)?.prompt_tokens_details
  return typeof details?.cached_tokens === 'number' ? details.cached_tokens : undefined
}

function isRecord (v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v)
}

function decide (plan: ForwardPlan, status: number, cached: number | undefined, problem?: string): Verdict {
  // A refusal is the verdict whatever routing decided: the decoder computed nothing for it.
  if (status >= 400 && status < 500) return refused(status, 'bridged' in plan.outcome ? 'the decoder refused it after the bridge; the bridged blocks stay in the store' : undefined)
  if ('verdict' in plan.outcome) return restoredVerdict(plan.outcome.verdict, status === 200 ? cached : undefined)
  if (status !== 200) return { kind: 'declined', reason: `the decoder answered ${status}${problem !== undefined ? `: ${problem}` : ''}; the bridged blocks stay in the store` }
  return confirmBridge(plan.outcome.bridged, cached)
}

function finishInfo (plan: ForwardPlan, verdict: Verdict, cached: number | undefined): PdBridgeInfo {
  plan.info.verdict = verdictText(verdict)
  plan.info.cached_tokens = cached ?? null
  return plan.info
}

/** The error a client gets when the decoder cannot be reached or answer in time. */
function gatewayError (problem: string, timeout: boolean): { status: number, body: object } {
  return {
    status: timeout ? 504 : 502,
    body: { error: { message: `the decoder ${problem}`, type: timeout ? 'gateway_timeout_error' : 'bad_gateway_error', param: null, code: timeout ? 'decoder_timeout' : 'decoder_unreachable' } },
  }
}

function sendJson (res: ServerResponse, status: number, body: unknown, headers: Record<string, string>): void {
  const text = JSON.stringify(body)
  res.writeHead(status, { 'content-type': 'application/json; charset=utf-8', 'content-length': String(Buffer.byteLength(text)), ...headers })
  res.end(text)
}

async function write (res: ServerResponse, text: string): Promise<void> {
  if (res.destroyed || res.writableEnded) return
  if (!res.write(text)) await Promise.race([once(res, 'drain'), once(res, 'close')])
}

/** The body the decoder gets: the client's, with `stream_options.include_usage` forced on a stream (the usage chunk confirms a bridge). */
export function upstreamBody (body: unknown, stream: boolean): unknown {
  if (!stream || !isRecord(body)) return body
  return { ...body, stream_options: { ...(isRecord(body.stream_options) ? body.stream_options : {}), include_usage: true } }
}

/**
 * Forward `plan` to the decoder and answer the client on `res` (raw, hijacked). `signal` aborts
 * the upstream request (the client went away). Never throws for upstream trouble: the client gets
 * a 502/504 in OpenAI's error shape with the verdict.
 */
export async function forwardGeneration (config: FrontConfig, plan: ForwardPlan, res: ServerResponse, signal: AbortSignal, auth: Record<string, string> = {}): Promise<ForwardResult> {
  const d = config.deadlines
  const body = upstreamBody(plan.body, plan.stream)
  const t0 = performance.now()
  let upstream
  try {
    upstream = await request(joinUrl(config.decoder.url, plan.path), {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: plan.stream ? 'text/event-stream' : 'application/json', ...auth },
      body: JSON.stringify(body),
      headersTimeout: d.decoderHeadersMs,
      bodyTimeout: d.decoderIdleMs,
      signal,
      // A generation is not sent twice, so never on a kept-alive socket the decoder may be closing.
      dispatcher: freshConnection,
    })
  } catch (e) {
    const { problem, code } = linkFailure(e, d.decoderHeadersMs)
    const verdict = decide(plan, 502, undefined, problem)
    const gw = gatewayError(`could not be reached or did not answer: ${problem}`, code === PD_ERR.LINK_NO_ANSWER)
    if (!res.destroyed) sendJson(res, gw.status, { ...gw.body, pd_bridge: finishInfo(plan, verdict, undefined) }, { [VERDICT_HEADER]: verdictHeader(verdict) })
    return { status: gw.status, verdict, cachedTokens: undefined }
  }
  const status = upstream.statusCode
  const type = header(upstream.headers, 'content-type') ?? ''
  if (plan.stream && status === 200 && type.startsWith('text/event-stream')) return await relayStream(plan, upstream, res, t0)
  return await relayWhole(plan, upstream, res, t0, d.decoderIdleMs)
}

type Upstream = Awaited<ReturnType<typeof request>>

async function relayWhole (plan: ForwardPlan, upstream: Upstream, res: ServerResponse, t0: number, idleMs: number): Promise<ForwardResult> {
  let text: string
  try {
    text = await upstream.body.text()
  } catch (e) {
    const { problem, code } = linkFailure(e, idleMs)
    const verdict = decide(plan, 502, undefined, problem)
    const gw = gatewayError(`broke off its answer: ${problem}`, code === PD_ERR.LINK_NO_ANSWER)
    if (!res.destroyed) sendJson(res, gw.status, { ...gw.body, pd_bridge: finishInfo(plan, verdict, undefined) }, { [VERDICT_HEADER]: verdictHeader(verdict) })
    return { status: gw.status, verdict, cachedTokens: undefined }
  }
  plan.info.timings_ms.decoder_total = Math.round(performance.now() - t0)
  const status = upstream.statusCode
  let json: unknown
  try {
    json = JSON.parse(text)
  } catch {
    json = undefined
  }
  const cached = status === 200 && isRecord(json) ? cachedFromUsage(json.usage) ?? cachedFromHeader(upstream.headers) : undefined
  const problem = isRecord(json) && isRecord(json.error) && typeof json.error.message === 'string' ? json.error.message : undefined
  const verdict = decide(plan, status, cached, problem)
  const passed = passHeaders(upstream.headers, RESENT_DROPS)
  passed[VERDICT_HEADER] = verdictHeader(verdict)
  if (res.destroyed) return { status, verdict, cachedTokens: cached }
  if (isRecord(json)) sendJson(res, status, { ...json, pd_bridge: finishInfo(plan, verdict, cached) }, passed)
  else {
    finishInfo(plan, verdict, cached)
    res.writeHead(status, { 'content-type': header(upstream.headers, 'content-type') ?? 'text/plain; charset=utf-8', ...passed })
    res.end(text)
  }
  return { status, verdict, cachedTokens: cached }
}

/** True when a chunk carries generated output: text, reasoning or a tool call. */
function hasText (chunk: Record<string, unknown>): boolean {
  const choice = Array.isArray(chunk.choices) ? chunk.choices[0] as Record<string, unknown> | undefined : undefined
  if (choice === undefined) return false
  const delta = choice.delta as { content?: unknown, reasoning_content?: unknown, tool_calls?: unknown } | undefined
  const said = (v: unknown): boolean => typeof v === 'string' && v !== ''
  return said(delta?.content) || said(delta?.reasoning_content) || Array.isArray(delta?.tool_calls) || said(choice.text)
}

function isFinish (chunk: Record<string, unknown>): boolean {
  return Array.isArray(chunk.choices) && chunk.choices.some((c) => isRecord(c) && c.finish_reason !== null && c.finish_reason !== undefined)
}

async function relayStream (plan: ForwardPlan, upstream: Upstream, res: ServerResponse, t0: number): Promise<ForwardResult> {
  const headerCached = cachedFromHeader(upstream.headers)
  // Without X-Cached-Tokens the verdict is known only at the usage chunk: hold the stream till then.
  const live = headerCached !== undefined || 'verdict' in plan.outcome
  let verdict = decide(plan, 200, headerCached)
  const held: string[] = []
  const out = async (text: string): Promise<void> => {
    if (live) await write(res, text)
    else held.push(text)
  }
  const open = (v: Verdict): void => {
    if (res.headersSent || res.destroyed) return
    res.writeHead(200, {
      'content-type': 'text/event-stream; charset=utf-8',
      'cache-control': 'no-cache',
      connection: 'keep-alive',
      'x-accel-buffering': 'no',
      [VERDICT_HEADER]: verdictHeader(v),
      ...(headerCached !== undefined ? { 'x-cached-tokens': String(headerCached) } : {}),
    })
    res.flushHeaders()
  }
  if (live) open(verdict)
  const parser = new SseParser()
  // The finish chunk and the usage chunk wait for the end, so the pd_bridge field can ride on the last one.
  const tail: Array<Record<string, unknown>> = []
  let usageCached: number | undefined
  let sawDone = false
  let errorEvent: Record<string, unknown> | undefined
  const handle = async (data: string): Promise<void> => {
    if (data === '[DONE]') {
      sawDone = true
      return
    }
    let chunk: unknown
    try {
      chunk = JSON.parse(data)
    } catch {
      await out(`data: ${data}\n\n`)
      return
    }
    if (!isRecord(chunk)) {
      await out(sseData(chunk))
      return
    }
    if (isRecord(chunk.error)) {
      errorEvent = chunk
      return
    }
    const isUsage = Array.isArray(chunk.choices) && chunk.choices.length === 0 && isRecord(chunk.usage)
    if (isUsage) {
      usageCached = cachedFromUsage(chunk.usage)
      if (plan.includeUsage) tail.push(chunk)
      return
    }
    if (!plan.includeUsage && chunk.usage === null) delete chunk.usage
    if (plan.info.timings_ms.decoder_ttft === undefined && hasText(chunk)) plan.info.timings_ms.decoder_ttft = Math.round(performance.now() - t0)
    if (isFinish(chunk)) tail.push(chunk)
    else await out(sseData(chunk))
  }
  // The decoder's comments (its prefill progress) keep the client's stream alive; a held stream
  // (headers not sent yet) has no client connection to keep alive, so they are dropped there.
  const handleEvent = async (event: SseEvent): Promise<void> => {
    if (event.kind === 'data') await handle(event.data)
    else if (live) await write(res, sseComment(event.text))
  }
  let broken: string | undefined
  try {
    for await (const bytes of upstream.body) {
      for (const event of parser.pushEvents(bytes as Uint8Array)) await handleEvent(event)
      if (res.destroyed) {
        upstream.body.destroy()
        break
      }
    }
    for (const event of parser.endEvents()) await handleEvent(event)
  } catch (e) {
    broken = describeFailure(e, 0)
  }
  plan.info.timings_ms.decoder_total = Math.round(performance.now() - t0)
  const cached = usageCached ?? headerCached
  if (!live) {
    verdict = errorEvent !== undefined || broken !== undefined ? decide(plan, 502, undefined, broken ?? 'an error event in its stream') : decide(plan, 200, cached)
    open(verdict)
    for (const text of held) await write(res, text)
  } else if (errorEvent !== undefined || broken !== undefined) {
    // The header went out already; the field says what the end turned out to be.
    verdict = decide(plan, 502, undefined, broken ?? 'an error event in its stream')
  } else if (usageCached !== undefined) verdict = decide(plan, 200, usageCached)
  const info = finishInfo(plan, verdict, cached)
  if (errorEvent !== undefined || broken !== undefined) {
    for (const c of tail) await write(res, sseData(c))
    const error = errorEvent ?? { error: { message: `the decoder broke off the stream: ${broken}`, type: 'bad_gateway_error', param: null, code: 'decoder_stream_broken' } }
    await write(res, sseData({ ...error, pd_bridge: info }))
    res.end()
    return { status: 200, verdict, cachedTokens: cached }
  }
  if (tail.length === 0) tail.push({ object: 'pd_bridge', choices: [] })
  tail[tail.length - 1] = { ...tail[tail.length - 1], pd_bridge: info }
  for (const c of tail) await write(res, sseData(c))
  if (sawDone) await write(res, SSE_DONE)
  res.end()
  return { status: 200, verdict, cachedTokens: cached }
}
