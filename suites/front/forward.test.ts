// Forwarding and confirming, against scripted decoders in process: the verdict header of a stream
// is never a guess (a decoder without X-Cached-Tokens has its stream held until the usage chunk),
// a bridge the decoder did not report is declined, errors and broken streams still carry the
// verdict, and the client's own stream options are restored.
import { once } from 'node:events'
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'
import { afterEach, describe, expect, it } from 'vitest'
import { parseFrontConfig } from '../../src/config/index.ts'
import { forwardGeneration, SseParser, type ForwardPlan, type PdBridgeInfo } from '../../src/front/index.ts'

const servers: Server[] = []
afterEach(async () => {
  for (const s of servers.splice(0)) {
    s.closeAllConnections()
    s.close()
  }
})

async function listen (handler: (req: IncomingMessage, res: ServerResponse) => void): Promise<string> {
  const s = createServer(handler)
  servers.push(s)
  s.listen(0, '127.0.0.1')
  await once(s, 'listening')
  return `http://127.0.0.1:${(s.address() as AddressInfo).port}`
}

/** A scripted decoder: records the body it got, answers with `answer`. */
async function decoder (answer: (res: ServerResponse, body: any) => void | Promise<void>): Promise<{ url: string, bodies: any[] }> {
  const bodies: any[] = []
  const url = await listen((req, res) => {
    let text = ''
    req.on('data', (c: Buffer) => { text += c.toString() })
    req.on('end', () => {
      const body = JSON.parse(text)
      bodies.push(body)
      void answer(res, body)
    })
  })
  return { url, bodies }
}

function info (): PdBridgeInfo {
  return { verdict: '', route: 'bridge', prompt_tokens: 720, stored_tokens_before: 0, bridged_tokens: 512, cached_tokens: null, blocks: null, capture: null, rescan: null, timings_ms: {}, bytes: {} }
}

const bridged = { bridged: { state: 'done' as const, bridgedTokens: 512, promptTokens: 720 } }

/** Run forwardGeneration behind a local front and fetch through it. */
async function through (decoderUrl: string, plan: Omit<ForwardPlan, 'info' | 'path'>): Promise<{ status: number, verdict: string | null, text: string, plan: ForwardPlan }> {
  const config = parseFrontConfig({ decoder: { url: decoderUrl }, deadlines: { decoderIdleMs: 2000 } }).config
  const full: ForwardPlan = { ...plan, path: '/v1/chat/completions', info: info() }
  const front = await listen((_req, res) => { void forwardGeneration(config, full, res, new AbortController().signal) })
  const r = await fetch(`${front}/v1/chat/completions`, { method: 'POST' })
  return { status: r.status, verdict: r.headers.get('x-pd-bridge'), text: await r.text(), plan: full }
}

function events (text: string): string[] {
  const p = new SseParser()
  return [...p.push(new TextEncoder().encode(text)), ...p.end()]
}

const chunk = (extra: object): string => `data: ${JSON.stringify({ id: 'c', object: 'chat.completion.chunk', ...extra })}\n\n`
const usage = (cached: number): object => ({ prompt_tokens: 720, completion_tokens: 2, total_tokens: 722, prompt_tokens_details: { cached_tokens: cached } })

/** A stream the way our decoder writes it with include_usage. */
function sse (res: ServerResponse, cached: number, headers: Record<string, string> = {}): void {
  res.writeHead(200, { 'content-type': 'text/event-stream', ...headers })
  res.write(chunk({ choices: [{ index: 0, delta: { role: 'assistant', content: '' }, finish_reason: null }], usage: null }))
  res.write(chunk({ choices: [{ index: 0, delta: { content: 'hi' }, finish_reason: null }], usage: null }))
  res.write(chunk({ choices: [{ index: 0, delta: {}, finish_reason: 'stop' }], usage: null }))
  res.write(chunk({ choices: [], usage: usage(cached) }))
  res.end('data: [DONE]\n\n')
}

describe('streams', () => {
  it('forces include_usage upstream, restores the client\'s view, and puts pd_bridge on the finish chunk', async () => {
    const d = await decoder((res) => sse(res, 512, { 'x-cached-tokens': '512' }))
    const r = await through(d.url, { body: { messages: [], stream: true }, stream: true, includeUsage: false, outcome: bridged })
    expect(d.bodies[0].stream_options).toEqual({ include_usage: true })
    expect(r.verdict).toBe('complete')
    const ev = events(r.text)
    expect(ev[ev.length - 1]).toBe('[DONE]')
    const chunks = ev.slice(0, -1).map((e) => JSON.parse(e))
    expect(chunks).toHaveLength(3)
    expect(chunks.every((c) => !('usage' in c))).toBe(true)
    expect(chunks[2].choices[0].finish_reason).toBe('stop')
    expect(chunks[2].pd_bridge).toMatchObject({ verdict: 'complete', cached_tokens: 512 })
    expect(r.plan.info.timings_ms.decoder_ttft).toBeGreaterThanOrEqual(0)
  })

  it('without X-Cached-Tokens the stream is held until the usage chunk decides the header', async () => {
    const good = await decoder((res) => sse(res, 512))
    const a = await through(good.url, { body: { messages: [], stream: true, stream_options: { include_usage: true } }, stream: true, includeUsage: true, outcome: bridged })
    expect(a.verdict).toBe('complete')
    const last = JSON.parse(events(a.text).slice(-2)[0])
    expect(last).toMatchObject({ choices: [], usage: usage(512), pd_bridge: { verdict: 'complete' } })
    const cold = await decoder((res) => sse(res, 0))
    const b = await through(cold.url, { body: { messages: [], stream: true }, stream: true, includeUsage: false, outcome: bridged })
    expect(b.verdict).toBe('declined: the decoder reported cached_tokens 0, fewer than the 512 bridged tokens: it prefilled them itself')
  })

  it('an error event or a broken stream ends with an error event that carries pd_bridge', async () => {
    const failing = await decoder((res) => {
      res.writeHead(200, { 'content-type': 'text/event-stream', 'x-cached-tokens': '512' })
      res.write(chunk({ choices: [{ index: 0, delta: { content: 'hi' }, finish_reason: null }], usage: null }))
      res.end(`data: ${JSON.stringify({ error: { message: 'shutting down', type: 'service_unavailable_error' } })}\n\n`)
    })
    const a = await through(failing.url, { body: { stream: true }, stream: true, includeUsage: false, outcome: bridged })
    expect(a.verdict).toBe('complete')
    const last = JSON.parse(events(a.text).slice(-1)[0])
    expect(last.error.message).toBe('shutting down')
    expect(last.pd_bridge.verdict).toBe('declined: the decoder answered 502: an error event in its stream; the bridged blocks stay in the store')
    const broken = await decoder((res) => {
      res.writeHead(200, { 'content-type': 'text/event-stream', 'x-cached-tokens': '512' })
      res.write(chunk({ choices: [{ index: 0, delta: { content: 'hi' }, finish_reason: null }], usage: null }))
      setTimeout(() => res.destroy(), 50)
    })
    const b = await through(broken.url, { body: { stream: true }, stream: true, includeUsage: false, outcome: { verdict: { kind: 'declined', reason: 'short prompt' } } })
    expect(b.verdict).toBe('declined: short prompt')
    const end = JSON.parse(events(b.text).slice(-1)[0])
    expect(end.error).toMatchObject({ type: 'bad_gateway_error', code: 'decoder_stream_broken' })
    expect(end.pd_bridge.verdict).toBe('declined: short prompt')
  })

  it('passes the decoder\'s prefill comments on in a live stream, in order, and drops them from a held one', async () => {
    const withComments = (headers: Record<string, string>) => async (res: ServerResponse): Promise<void> => {
      res.writeHead(200, { 'content-type': 'text/event-stream', ...headers })
      res.write(chunk({ choices: [{ index: 0, delta: { role: 'assistant', content: '' }, finish_reason: null }], usage: null }))
      res.write(': prefill 256/720\n\n')
      res.write(': prefill 512/720\n\n')
      res.write(chunk({ choices: [{ index: 0, delta: { content: 'hi' }, finish_reason: null }], usage: null }))
      res.write(chunk({ choices: [{ index: 0, delta: {}, finish_reason: 'stop' }], usage: null }))
      res.write(chunk({ choices: [], usage: usage(512) }))
      res.end('data: [DONE]\n\n')
    }
    const live = await decoder(withComments({ 'x-cached-tokens': '512' }))
    const a = await through(live.url, { body: { messages: [], stream: true }, stream: true, includeUsage: false, outcome: bridged })
    expect(a.verdict).toBe('complete')
    const p = new SseParser()
    const ev = [...p.pushEvents(new TextEncoder().encode(a.text)), ...p.endEvents()]
    expect(ev.filter((e) => e.kind === 'comment')).toEqual([{ kind: 'comment', text: 'prefill 256/720' }, { kind: 'comment', text: 'prefill 512/720' }])
    // In stream order: after the role chunk, before the first text.
    const kinds = ev.map((e) => e.kind === 'comment' ? 'comment' : (e.data === '[DONE]' ? 'done' : (JSON.parse(e.data).choices[0]?.delta?.content ?? 'finish')))
    expect(kinds.slice(0, 4)).toEqual(['', 'comment', 'comment', 'hi'])
    // push() and end() still give the data alone.
    expect(events(a.text).filter((d) => d.startsWith(':'))).toEqual([])
    const held = await decoder(withComments({}))
    const b = await through(held.url, { body: { messages: [], stream: true }, stream: true, includeUsage: false, outcome: bridged })
    expect(b.verdict).toBe('complete')
    expect(b.text).not.toContain(': prefill')
  })
})

describe('whole answers', () => {
  it('cached tokens from usage, else the header, else declined as unconfirmed', async () => {
    const answer = (u: object | undefined, headers: Record<string, string> = {}) => (res: ServerResponse): void => {
      res.writeHead(200, { 'content-type': 'application/json', ...headers })
      res.end(JSON.stringify({ id: 'x', object: 'chat.completion', choices: [], ...(u !== undefined ? { usage: u } : {}) }))
    }
    const viaUsage = await through((await decoder(answer(usage(512)))).url, { body: {}, stream: false, includeUsage: false, outcome: bridged })
    expect(viaUsage.verdict).toBe('complete')
    expect(JSON.parse(viaUsage.text).pd_bridge).toMatchObject({ verdict: 'complete', cached_tokens: 512 })
    const viaHeader = await through((await decoder(answer(undefined, { 'x-cached-tokens': '512' }))).url, { body: {}, stream: false, includeUsage: false, outcome: bridged })
    expect(viaHeader.verdict).toBe('complete')
    const silent = await through((await decoder(answer({ prompt_tokens: 720 }))).url, { body: {}, stream: false, includeUsage: false, outcome: bridged })
    expect(silent.verdict).toMatch(/^declined: unconfirmed: the decoder reported no cached_tokens/)
  })

  it('a decoder error passes through with the verdict; an unreachable decoder is a 502', async () => {
    const err = await decoder((res) => {
      res.writeHead(500, { 'content-type': 'application/json' })
      res.end(JSON.stringify({ error: { message: 'engine crashed', type: 'server_error' } }))
    })
    const a = await through(err.url, { body: {}, stream: false, includeUsage: false, outcome: bridged })
    expect(a.status).toBe(500)
    expect(a.verdict).toBe('declined: the decoder answered 500: engine crashed; the bridged blocks stay in the store')
    expect(JSON.parse(a.text)).toMatchObject({ error: { message: 'engine crashed' }, pd_bridge: { verdict: a.verdict } })
    const gone = await listen(() => {})
    servers.pop()!.close()
    const b = await through(gone, { body: {}, stream: true, includeUsage: false, outcome: { verdict: { kind: 'declined', reason: 'short prompt' } } })
    expect(b.status).toBe(502)
    expect(b.verdict).toBe('declined: short prompt')
    expect(JSON.parse(b.text).error).toMatchObject({ type: 'bad_gateway_error', code: 'decoder_unreachable' })
  })
})
