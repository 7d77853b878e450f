// The front door on the real stack: `pd-bridge prefill-engine` (decoder profile, so the capture is
// the decoder's own cache bit for bit), `share`, `decoder` (256-token blocks) and `front` as child
// processes on loopback, driven by the official openai client. Every answer is compared with the
// same prompt's greedy tokens from a second decoder with its own store ("the decoder alone").
// Fault tests break real parts (a killed engine, a stopped share) or put a fault proxy between the
// front door and the share; every request must still get the native answer and a true verdict, and
// the store must hold nothing half-written.
import { readdirSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import OpenAI from 'openai'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { exportWeights } from '../../src/capture/index.ts'
import type { ChatMessage } from '../../src/model/tokenizer/index.ts'
import { tokenIdsSha256 } from '../../src/wire/manifest.ts'
import { HANG_LIMIT_MS } from '../support/hang-limit.ts'
import {
  BLOCK, chatPrompt, frontConfig, makeArtifacts, startFaultProxy, startFront, startStack, startSubmitProxy, storeFiles, tempDir, textPrompt, waitFor,
  type Artifacts, type FaultProxy, type Proc, type Stack, type SubmitProxy,
} from './stack.ts'

// Each test here is a whole request through five processes (some two or three requests and a
// reference run). A series of ten full runs on 2 cores at nice 15, beside two CI runs, ran 3.5x
// slower than usual and two of these passed the 60 s default mid-request (results/test-runs/):
// a hang is still caught, at the hang limit (suites/support/hang-limit.ts).

type Front = Awaited<ReturnType<typeof startFront>>

const tmp = tempDir('front')
let art: Artifacts
let stack: Stack
let proxy: FaultProxy
let submits: SubmitProxy
const fronts: Record<string, Front> = {}
const MAX = 8

beforeAll(async () => {
  art = await makeArtifacts(tmp.dir)
  const [s] = await Promise.all([
    startStack(tmp.dir, art),
    exportWeights({ model: art.model, profile: 'decoder', out: join(tmp.dir, 'sidecar-512'), blockSize: 512 }),
  ])
  stack = s
  proxy = await startFaultProxy(() => stack.share.url)
  submits = await startSubmitProxy(stack.engine.url)
  const c = (extra: Record<string, Record<string, unknown>> = {}, share?: string): Record<string, unknown> => frontConfig(stack, extra, share)
  const specs: Record<string, Record<string, unknown>> = {
    main: c({ limits: { maxBodyBytes: 300_000 } }),
    faulty: c({}, proxy.url),
    tight: c({ queue: { maxWaiting: 0, whenFull: 'native' } }),
    reject: c({ queue: { maxWaiting: 0, whenFull: 'reject' } }),
    budget: c({ prefill: { memoryBudgetBytes: 760_000 } }),
    mismatch: { ...c(), sidecar: join(tmp.dir, 'sidecar-512') },
    local: (() => { const x = c(); delete (x as { share?: unknown }).share; return { ...x, capture: { dir: stack.captureRoot } } })(),
    // Bridges into the main store but forwards to the reference decoder, which has its own store.
    blind: c({ decoder: { url: stack.reference.url } }),
    // Submits through a proxy that records them and can rewrite them.
    digest: c({ prefill: { url: submits.url } }),
    // The write stage with two builder threads (limits.writerBuilders).
    builders: c({ limits: { writerBuilders: 2 } }),
  }
  const started = await Promise.all(Object.entries(specs).map(async ([name, spec]) => [name, await startFront(tmp.dir, name, spec)] as const))
  for (const [name, f] of started) fronts[name] = f
})

afterAll(async () => {
  await Promise.all(Object.values(fronts).map(async (f) => await f.stop()))
  await proxy?.close()
  await submits?.close()
  await stack?.stop()
  tmp.remove()
})

function client (front: Proc): OpenAI {
  return new OpenAI({ baseURL: `${front.url}/v1`, apiKey: 'unused', maxRetries: 0, timeout: HANG_LIMIT_MS })
}

/** Fields the openai types do not know, sent as they are (vLLM's return_token_ids). */
type Extra = { return_token_ids?: boolean }

const references = new Map<string, Promise<number[]>>()

/** The decoder alone: the reference decoder's greedy ids for the same request. */
function reference (kind: 'chat' | 'completion', prompt: ChatMessage[] | string, maxTokens = MAX): Promise<number[]> {
  const key = JSON.stringify([kind, prompt, maxTokens])
  let ids = references.get(key)
  if (ids === undefined) {
    ids = (async () => {
      const path = kind === 'chat' ? '/v1/chat/completions' : '/v1/completions'
      const body = kind === 'chat' ? { messages: prompt, max_tokens: maxTokens, return_token_ids: true } : { prompt, max_tokens: maxTokens, return_token_ids: true }
      const res = await fetch(`${stack.reference.url}${path}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) })
      const json = await res.json() as { choices: Array<{ token_ids: number[] }> }
      return json.choices[0].token_ids
    })()
    references.set(key, ids)
  }
  return ids
}

interface Answer {
  verdict: string | null
  ids: number[]
  text: string
  cached: number | undefined
  pd: Record<string, any>
  headers: Headers
}

async function chat (front: Proc, messages: ChatMessage[], maxTokens = MAX): Promise<Answer> {
  const { data, response } = await client(front).chat.completions.create({ model: stack.modelName, messages, max_tokens: maxTokens,
    return_token_ids: true } as OpenAI.ChatCompletionCreateParamsNonStreaming & Extra).withResponse()
  const d = data as unknown as { choices: Array<{ token_ids: number[], message: { content: string } }>, usage: OpenAI.CompletionUsage, pd_bridge: Record<string, any> }
  return { verdict: response.headers.get('x-pd-bridge'), ids: d.choices[0].token_ids, text: d.choices[0].message.content, cached: d.usage.prompt_tokens_details?.cached_tokens, pd: d.pd_bridge, headers: response.headers }
}

interface StreamAnswer extends Answer {
  chunks: Array<Record<string, any>>
}

async function chatStream (front: Proc, messages: ChatMessage[], includeUsage: boolean, maxTokens = MAX): Promise<StreamAnswer> {
  const { data: stream, response } = await client(front).chat.completions.create({
    model: stack.modelName, messages, max_tokens: maxTokens, stream: true, return_token_ids: true, ...(includeUsage ? { stream_options: { include_usage: true } } : {}),
  } as OpenAI.ChatCompletionCreateParamsStreaming & Extra).withResponse()
  const chunks: Array<Record<string, any>> = []
  for await (const chunk of stream) chunks.push(chunk as unknown as Record<string, any>)
  const finish = chunks.find((c) => c.choices?.[0]?.finish_reason != null)
  const last = chunks[chunks.length - 1]
  return {
    verdict: response.headers.get('x-pd-bridge'),
    ids: finish?.choices[0].token_ids,
    text: chunks.map((c) => c.choices?.[0]?.delta?.content ?? '').join(''),
    cached: last.usage?.prompt_tokens_details?.cached_tokens,
    pd: last.pd_bridge,
    headers: response.headers,
    chunks,
  }
}

function textOf (ids: number[]): string {
  return art.tokenizer.decode(ids, { skipSpecialTokens: true })
}

async function health (front: Proc): Promise<Record<string, any>> {
  return await (await fetch(`${front.url}/health`)).json() as Record<string, any>
}

function captureDirs (): string[] {
  return readdirSync(stack.captureRoot).filter((n) => !n.startsWith('.'))
}

/** The bridged part of a T-token prompt: every full block but the one holding the last token. */
function bridgeable (t: number): number {
  return Math.floor((t - 1) / BLOCK) * BLOCK
}

/** A complete bridge: verdict, cached tokens, blocks, every stage timed, bytes counted. */
function expectComplete (a: Answer, promptTokens: number): void {
  const b = bridgeable(promptTokens)
  expect(a.verdict).toBe('complete')
  expect(a.pd.verdict).toBe('complete')
  expect(a.pd.route).toBe('bridge')
  expect(a.pd.prompt_tokens).toBe(promptTokens)
  expect(a.pd.bridged_tokens).toBe(b)
  expect(a.pd.cached_tokens).toBe(b)
  expect(a.cached).toBe(b)
  expect(a.pd.blocks).toEqual({ bridged: b / BLOCK, written: b / BLOCK, reused: 0 })
  expect(a.pd.capture).toMatchObject({ state: 'done', token_count: b, sealed_length: b })
  for (const stage of ['queue', 'submit', 'capture', 'engine_prefill', 'transfer', 'assembly', 'block_write', 'rescan', 'bridge_total', 'decoder_total']) {
    expect(a.pd.timings_ms[stage], stage).toBeGreaterThanOrEqual(0)
  }
  expect(a.pd.bytes.capture).toBeGreaterThan(0)
  expect(a.pd.bytes.fetched).toBe(a.pd.bytes.capture)
  expect(a.pd.bytes.blocks).toBeGreaterThan(0)
}

/** Nothing half-written: no temporary or stray file in the store, every block readable, spools empty. */
async function expectStoreClean (): Promise<void> {
  expect(storeFiles(stack.cacheDir).other).toEqual([])
  const rescan = await (await fetch(`${stack.decoder.url}/v1/cache/rescan`, { method: 'POST' })).json() as { report: Record<string, any> }
  expect(rescan.report).toMatchObject({ unreadable: 0, tempKept: 0, refused: {} })
  for (const f of Object.values(fronts)) {
    // /health names no absolute path: it counts what the spool holds instead.
    const capture = (await health(f)).links.capture as { spool_dir: string | null, spool_entries: number | null }
    if (capture.spool_dir !== null) expect(capture.spool_entries, `spool of ${f.url}`).toBe(0)
  }
}

describe('a cold long prompt is bridged', () => {
  it('chat, whole: complete, cached_tokens = the bridged blocks, the same greedy tokens as the decoder alone', async () => {
    const p = chatPrompt(art.tokenizer, 101, 700)
    expect(p.ids.length).toBeLessThan(768)
    const before = captureDirs().length
    const a = await chat(fronts.main, p.messages)
    expectComplete(a, p.ids.length)
    expect(a.ids).toEqual(await reference('chat', p.messages))
    expect(a.text).toBe(textOf(a.ids))
    // The capture the engine made (the full blocks only) was deleted once its blocks were verified
    // (capture.retain none, the default; suites/front/retention.test.ts covers the others).
    expect(a.pd.capture.retention).toBe('deleted')
    expect(captureDirs().length).toBe(before)
    // The decoder's own log agrees: it restored 512 tokens and prefilled only the tail.
    const line = (await waitFor(async () => readFileSync(join(stack.dir, 'decoder.log'), 'utf8').split('\n').filter((l) => l.includes('"event":"generation"')).map((l) => JSON.parse(l)).find((l) => l.prompt_tokens === p.ids.length && l.cached_tokens === 512), 5000, 'the generation log line'))
    // No full block past 512 fits in the prompt, so the decoder wrote none: the two it used were the bridge's.
    expect(line).toMatchObject({ cached_tokens: 512, stored_blocks: 0 })
    await expectStoreClean()
  })

  it('chat, streamed with include_usage: header decided before the first token, pd_bridge on the usage chunk', async () => {
    const p = chatPrompt(art.tokenizer, 102, 700)
    const a = await chatStream(fronts.main, p.messages, true)
    expectComplete(a, p.ids.length)
    expect(a.headers.get('x-cached-tokens')).toBe(String(bridgeable(p.ids.length)))
    const want = await reference('chat', p.messages)
    expect(a.ids).toEqual(want)
    expect(a.text).toBe(textOf(want))
    const last = a.chunks[a.chunks.length - 1]
    expect(last.choices).toEqual([])
    expect(last.usage.prompt_tokens).toBe(p.ids.length)
    expect(a.pd.timings_ms.decoder_ttft).toBeGreaterThan(0)
    expect(a.pd.timings_ms.decoder_ttft).toBeLessThanOrEqual(a.pd.timings_ms.decoder_total)
    expect(a.chunks.slice(0, -1).every((c) => c.usage === null && c.pd_bridge === undefined)).toBe(true)
  })

  it('chat, streamed without include_usage: no usage anywhere, pd_bridge on the finish chunk', async () => {
    const p = chatPrompt(art.tokenizer, 103, 700)
    const a = await chatStream(fronts.main, p.messages, false)
    expect(a.verdict).toBe('complete')
    const last = a.chunks[a.chunks.length - 1]
    expect(last.choices[0].finish_reason).not.toBeNull()
    expect(last.pd_bridge.verdict).toBe('complete')
    expect(last.pd_bridge.cached_tokens).toBe(bridgeable(p.ids.length))
    expect(a.chunks.every((c) => !('usage' in c))).toBe(true)
    expect(a.ids).toEqual(await reference('chat', p.messages))
  })

  it('completions, whole and streamed: complete, same greedy tokens', async () => {
    const p = textPrompt(art.tokenizer, 104, 700)
    const { data, response } = await client(fronts.main).completions.create({ model: stack.modelName, prompt: p.text, max_tokens: MAX,
      return_token_ids: true } as OpenAI.CompletionCreateParamsNonStreaming & Extra).withResponse()
    const d = data as unknown as { choices: Array<{ token_ids: number[], text: string }>, usage: OpenAI.CompletionUsage, pd_bridge: Record<string, any> }
    expectComplete({ verdict: response.headers.get('x-pd-bridge'), ids: d.choices[0].token_ids, text: d.choices[0].text, cached: d.usage.prompt_tokens_details?.cached_tokens, pd: d.pd_bridge, headers: response.headers }, p.ids.length)
    expect(d.choices[0].token_ids).toEqual(await reference('completion', p.text))

    const q = textPrompt(art.tokenizer, 105, 700)
    const { data: stream, response: r2 } = await client(fronts.main).completions.create({ model: stack.modelName, prompt: q.text, max_tokens: MAX, stream: true, stream_options: { include_usage: true } }).withResponse()
    const chunks: Array<Record<string, any>> = []
    for await (const c of stream) chunks.push(c as unknown as Record<string, any>)
    expect(r2.headers.get('x-pd-bridge')).toBe('complete')
    const want = await reference('completion', q.text)
    expect(chunks.map((c) => c.choices[0]?.text ?? '').join('')).toBe(textOf(want))
    expect(chunks[chunks.length - 1].pd_bridge).toMatchObject({ verdict: 'complete', bridged_tokens: bridgeable(q.ids.length), cached_tokens: bridgeable(q.ids.length) })
  })
})

describe('a chat with tools is bridged as the decoder renders it', () => {
  it('tools, a tool call, its result and reasoning in history (OpenAI shapes): the same prompt ids as the decoder alone, complete', async () => {
    const p = chatPrompt(art.tokenizer, 197, 700)
    const call = { id: 'c1', type: 'function', function: { name: 'lookup', arguments: '{"q": "marigold", "n": 2.0}' } }
    const messages = [
      ...p.messages,
      { role: 'assistant', content: '', reasoning_content: 'I should look it up.', tool_calls: [call] },
      { role: 'tool', tool_call_id: 'c1', content: [{ type: 'text', text: 'found 2' }] },
      { role: 'developer', content: 'Answer briefly.' },
      { role: 'user', content: 'And so?' },
    ]
    const body = { model: stack.modelName, messages, tools: [{ type: 'function', function: { name: 'lookup', parameters: { type: 'object', properties: { q: { type: 'string' } } } } }], max_tokens: MAX, return_token_ids: true }
    const viaFront = await client(fronts.main).chat.completions.create(body as unknown as OpenAI.ChatCompletionCreateParamsNonStreaming).withResponse()
    const alone = await (await fetch(`${stack.reference.url}/v1/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) })).json() as { prompt_token_ids: number[], choices: Array<{ token_ids: number[] }> }
    const front = viaFront.data as unknown as { prompt_token_ids: number[], choices: Array<{ token_ids: number[] }>, usage: OpenAI.CompletionUsage, pd_bridge: Record<string, any> }
    expect(front.prompt_token_ids).toEqual(alone.prompt_token_ids)
    expect(front.pd_bridge.prompt_tokens).toBe(alone.prompt_token_ids.length)
    expect(viaFront.response.headers.get('x-pd-bridge')).toBe('complete')
    expect(front.usage.prompt_tokens_details?.cached_tokens).toBe(bridgeable(alone.prompt_token_ids.length))
    expect(front.choices[0].token_ids).toEqual(alone.choices[0].token_ids)
  })
})

describe('the capture request carries the token digest', () => {
  it('the front door\'s submit sends tokens_sha256 of the ids it asks for; the engine accepts it, the manifest and the writer agree', async () => {
    const p = chatPrompt(art.tokenizer, 131, 700)
    const before = submits.submits.length
    const a = await chat(fronts.digest, p.messages)
    expectComplete(a, p.ids.length)
    const sent = submits.submits.slice(before)
    expect(sent).toHaveLength(1)
    const tokens = sent[0].body.tokens as number[]
    expect(tokens).toEqual(p.ids.slice(0, bridgeable(p.ids.length)))
    expect(sent[0].body.tokens_sha256).toBe(tokenIdsSha256(tokens))
    expect(sent[0].status).toBe(202)
    expect(a.pd.capture.tokens_sha256).toBe(tokenIdsSha256(tokens))
    expect(a.ids).toEqual(await reference('chat', p.messages))
  })

  it('a digest of other ids on the way is refused with 400 before any capture starts: declined, native answer', async () => {
    const p = chatPrompt(art.tokenizer, 132, 700)
    const other = tokenIdsSha256([1, 2, 3])
    submits.rewrite = (b) => ({ ...b, tokens_sha256: other })
    let a: Answer
    try {
      a = await chat(fronts.digest, p.messages)
    } finally {
      submits.rewrite = (b) => b
    }
    const sent = submits.submits[submits.submits.length - 1]
    const b = bridgeable(p.ids.length)
    expect(sent.body.tokens).toEqual(p.ids.slice(0, b))
    expect(sent.status).toBe(400)
    const why = `declined: prefill engine refused the request (400): tokens_sha256 is ${other}, but the ${b} token ids this engine would prefill (from tokens) hash to ${tokenIdsSha256(p.ids.slice(0, b))}`
    expect(a.pd.verdict).toBe(why)
    expect(a.verdict).toBe(why)
    expect(a.pd).toMatchObject({ route: 'native', bridged_tokens: 0, blocks: null, capture: null })
    expect(a.cached).toBe(0)
    expect(captureDirs()).not.toContain(sent.body.request_id)
    expect(a.ids).toEqual(await reference('chat', p.messages))
  })
})

describe('prompts that are not bridged go straight to the decoder', () => {
  it('a short prompt: declined: short prompt, nothing sent to the prefill engine', async () => {
    const messages: ChatMessage[] = [{ role: 'user', content: 'A short question about the sea.' }]
    const before = captureDirs().length
    const a = await chat(fronts.main, messages)
    const t = a.pd.prompt_tokens as number
    expect(t).toBeLessThan(512)
    expect(a.verdict).toBe(`declined: short prompt (${t} tokens < PD_MIN_TOKENS 512)`)
    expect(a.pd).toMatchObject({ route: 'native', bridged_tokens: 0, cached_tokens: 0, blocks: null, stored_tokens_before: null })
    expect(a.ids).toEqual(await reference('chat', messages))
    expect(captureDirs().length).toBe(before)
  })

  it('a warm repeat is served from the decoder\'s cache without bridging', async () => {
    const p = chatPrompt(art.tokenizer, 101, 700)
    const before = captureDirs().length
    const a = await chat(fronts.main, p.messages)
    const t = p.ids.length
    expect(a.verdict).toBe(`declined: warm prompt (512 of ${t} tokens stored; ${t - 512} not stored < PD_MIN_TAIL 256)`)
    expect(a.cached).toBe(512)
    expect(a.pd).toMatchObject({ route: 'native', stored_tokens_before: 512, bridged_tokens: 0, cached_tokens: 512 })
    expect(a.ids).toEqual(await reference('chat', p.messages))
    expect(captureDirs().length).toBe(before)
  })

  it('a bridge the decoder did not use is declined, never complete (a decoder on another store)', async () => {
    const p = chatPrompt(art.tokenizer, 106, 700)
    const a = await chat(fronts.blind, p.messages)
    expect(a.verdict).toBe(`declined: the decoder reported cached_tokens 0, fewer than the ${bridgeable(p.ids.length)} bridged tokens: it prefilled them itself`)
    // The bridge itself ran: the blocks are in the main store.
    expect(a.pd).toMatchObject({ route: 'bridge', bridged_tokens: bridgeable(p.ids.length), cached_tokens: 0 })
    expect(a.ids).toEqual(await reference('chat', p.messages))
  })
})

describe('health and passthrough answer at once', () => {
  it('/health reports every link, the store, the sidecar and the queue', async () => {
    const res = await fetch(`${fronts.main.url}/health`)
    expect(res.status).toBe(200)
    const h = await res.json() as Record<string, any>
    expect(h).toMatchObject({ ok: true, front: 'pd', status: 'ok', bridge: { ready: true, problems: [] } })
    expect(h.links.decoder).toMatchObject({ ok: true, url: stack.decoder.url, model: stack.modelName, blockSize: BLOCK, profile: 'decoder' })
    expect(h.links.prefill).toMatchObject({ ok: true, url: stack.engine.url })
    expect(h.links.share).toMatchObject({ ok: true, url: stack.share.url })
    expect(h.links.store).toMatchObject({ ok: true, dir: '<decoder.cacheDir>', block_size: BLOCK, geometry_fingerprint: h.links.decoder.geometryFingerprint })
    expect(h.links.store.blocks).toBeGreaterThan(0)
    expect(h.links.sidecar).toMatchObject({ ok: true, block_size: BLOCK, profile: 'decoder' })
    expect(h.queue).toMatchObject({ running: false, waiting: 0, maxWaiting: 4, when_full: 'native' })
    expect(res.headers.get('x-pd-bridge')).toBe('declined: passthrough (not a completion request)')
  })

  it('/v1/models passes through to the decoder; its rescan and unknown routes are refused by the front door', async () => {
    const models = await client(fronts.main).models.list()
    expect(models.data.map((m) => m.id)).toEqual([stack.modelName])
    const rescan = await fetch(`${fronts.main.url}/v1/cache/rescan`, { method: 'POST' })
    expect(rescan.status).toBe(404)
    expect(await rescan.json()).toMatchObject({ error: { type: 'not_found_error', code: 'unknown_route' } })
    const unknown = await fetch(`${fronts.main.url}/v1/nothing?x=1`)
    expect(unknown.status).toBe(404)
    expect(await unknown.json()).toMatchObject({ error: { code: 'unknown_route', message: 'no route GET /v1/nothing' } })
    expect(unknown.headers.get('x-pd-bridge')).toBe('declined: passthrough (not a completion request)')
  })
})

describe('malformed requests get clear 4xx errors', () => {
  async function post (body: string, type = 'application/json', path = '/v1/chat/completions'): Promise<{ status: number, json: any, verdict: string | null }> {
    const res = await fetch(`${fronts.main.url}${path}`, { method: 'POST', headers: { 'content-type': type }, body })
    return { status: res.status, json: await res.json(), verdict: res.headers.get('x-pd-bridge') }
  }

  it('bad JSON, empty body, wrong types, another content type', async () => {
    const bad = await post('{"messages": [')
    expect(bad).toMatchObject({ status: 400, json: { error: { type: 'invalid_request_error', code: 'invalid_json' } }, verdict: 'declined: request refused (400)' })
    expect(bad.json.error.message).toMatch(/^the request body is not valid JSON/)
    expect((await post('')).json.error.message).toBe('the request body is empty; send a JSON object')
    expect((await post('[1]')).json.error.message).toBe('the request body must be a JSON object, got an array')
    expect((await post(JSON.stringify({ messages: 'hi' }))).json.error).toMatchObject({ param: 'messages', message: "'messages' must be an array, got a string" })
    expect((await post(JSON.stringify({ messages: [{ role: 'user', content: 'x' }], stream: 'yes' }))).json.error.param).toBe('stream')
    expect((await post(JSON.stringify({ prompt: 7 }), 'application/json', '/v1/completions')).json.error).toMatchObject({ param: 'prompt' })
    const typed = await post('hello', 'text/plain')
    expect(typed).toMatchObject({ status: 415, json: { error: { type: 'unsupported_media_type_error' } } })
  })

  it('a body over limits.maxBodyBytes is a 413', async () => {
    const huge = JSON.stringify({ messages: [{ role: 'user', content: 'x'.repeat(400_000) }] })
    const r = await post(huge)
    expect(r.status).toBe(413)
    expect(r.json.error).toMatchObject({ type: 'request_too_large_error', code: 'request_too_large' })
    expect(r.json.error.message).toContain('300000')
  })

  it('an unknown model is a 404 the openai client types; what the decoder would refuse is refused by the front door, in its words', async () => {
    await expect(client(fronts.main).chat.completions.create({ model: 'no-such-model', messages: [{ role: 'user', content: 'x' }] })).rejects.toMatchObject({ status: 404, code: 'model_not_found', constructor: OpenAI.NotFoundError })
    const res = await fetch(`${fronts.main.url}/v1/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ messages: [{ role: 'user', content: 'x' }], logit_bias: { 5: 10 } }) })
    expect(res.status).toBe(400)
    const json = await res.json() as Record<string, any>
    expect(json.error).toMatchObject({ param: 'logit_bias', code: 'unsupported_value' })
    expect(res.headers.get('x-pd-bridge')).toBe('declined: request refused (400)')
  })
})

describe('fallback: every failure still gets the native answer and a true verdict', () => {
  it('a corrupted capture file: declined: capture checksum mismatch; no block from it', async () => {
    const p = chatPrompt(art.tokenizer, 111, 700)
    proxy.fault = 'flip-layer-byte'
    let a: Answer
    try {
      a = await chat(fronts.faulty, p.messages)
    } finally {
      proxy.fault = 'pass'
    }
    expect(a.verdict).toMatch(/^declined: capture checksum mismatch: .*layer-001\.safetensors/)
    expect(a.pd).toMatchObject({ route: 'native', bridged_tokens: 0, blocks: null })
    // The decoder prefilled natively: no block came from the bridge, so it restored nothing.
    expect(a.cached).toBe(0)
    expect(a.ids).toEqual(await reference('chat', p.messages))
    await expectStoreClean()
  })

  it('a manifest whose T is not the request\'s: declined: capture manifest mismatch', async () => {
    const p = chatPrompt(art.tokenizer, 112, 700)
    proxy.fault = 'manifest-token-count'
    let a: Answer
    try {
      a = await chat(fronts.faulty, p.messages)
    } finally {
      proxy.fault = 'pass'
    }
    expect(a.verdict).toMatch(/^declined: capture manifest mismatch: http:\/\/127\.0\.0\.1:\d+\/captures\/pd-[0-9a-f-]+\/manifest\.json: manifest tokenCount: T is 513 in the manifest but the request has 512 tokens$/)
    expect(a.cached).toBe(0)
    expect(a.ids).toEqual(await reference('chat', p.messages))
    await expectStoreClean()
  })

  it('a sidecar of another geometry: declined before anything runs, and /health says why', async () => {
    const h = await health(fronts.mismatch)
    expect(h.status).toBe('degraded')
    expect(h.bridge.problems[0]).toBe("geometry mismatch: block writer: the capture's sidecar has block size 512, the decoder's store 256")
    const p = chatPrompt(art.tokenizer, 113, 700)
    const before = captureDirs().length
    const a = await chat(fronts.mismatch, p.messages)
    expect(a.verdict).toBe("declined: geometry mismatch: block writer: the capture's sidecar has block size 512, the decoder's store 256")
    expect(captureDirs().length).toBe(before)
    expect(a.ids).toEqual(await reference('chat', p.messages))
    // A short prompt is still routed as one.
    expect((await chat(fronts.mismatch, [{ role: 'user', content: 'hi' }])).verdict).toMatch(/^declined: short prompt/)
  })

  it('a memory budget seals a prefix: partial B/T, the decoder mounts B and prefills the rest', async () => {
    const p = chatPrompt(art.tokenizer, 114, 700)
    const a = await chat(fronts.budget, p.messages)
    const sealed = a.pd.capture.sealed_length as number
    expect(a.pd.capture.state).toBe('partial')
    expect(sealed).toBeGreaterThanOrEqual(256)
    expect(sealed).toBeLessThan(512)
    const b = Math.floor(sealed / BLOCK) * BLOCK
    expect(a.verdict).toBe(`partial ${b}/${p.ids.length}`)
    expect(a.pd).toMatchObject({ verdict: `partial ${b}/${p.ids.length}`, bridged_tokens: b, cached_tokens: b, blocks: { bridged: b / BLOCK } })
    expect(a.cached).toBe(b)
    expect(a.ids).toEqual(await reference('chat', p.messages))
    await expectStoreClean()
  })

  it('with builder threads in the write stage: complete, the same greedy tokens, nothing half-written', async () => {
    const p = chatPrompt(art.tokenizer, 141, 1100)
    const a = await chat(fronts.builders, p.messages)
    expectComplete(a, p.ids.length)
    expect(a.pd.blocks.bridged).toBeGreaterThanOrEqual(3)
    expect(a.ids).toEqual(await reference('chat', p.messages))
    await expectStoreClean()
  })

  it('without a share, the capture is read from the engine\'s capture root: complete', async () => {
    const p = chatPrompt(art.tokenizer, 115, 700)
    const a = await chat(fronts.local, p.messages)
    expect(a.verdict).toBe('complete')
    expect(a.pd).toMatchObject({ bridged_tokens: 512, cached_tokens: 512 })
    expect(a.pd.bytes.fetched).toBeUndefined()
    expect(a.ids).toEqual(await reference('chat', p.messages))
  })

  it('the share stopped: declined: share unreachable; with it back, bridging resumes', async () => {
    await stack.share.stop()
    try {
      const p = chatPrompt(art.tokenizer, 116, 700)
      const before = captureDirs().length
      const a = await chat(fronts.main, p.messages)
      expect(a.verdict).toBe(`declined: share unreachable: share (${stack.share.url}/health): connection refused (is it running?)`)
      expect(captureDirs().length).toBe(before)
      expect(a.ids).toEqual(await reference('chat', p.messages))
      expect((await health(fronts.main)).links.share).toMatchObject({ ok: false })
    } finally {
      await stack.restartShare()
    }
    expect((await health(fronts.main)).bridge.ready).toBe(true)
  })

  it('the share killed while the engine prefills: declined after the share client gives up', async () => {
    const p = chatPrompt(art.tokenizer, 117, 700)
    const pending = chat(fronts.main, p.messages)
    await waitFor(async () => (await (await fetch(`${stack.engine.url}/health`)).json() as { running: string | null }).running ?? undefined, HANG_LIMIT_MS, 'the engine running the capture')
    // SIGKILL: a graceful stop would finish serving the open connection, and the capture with it.
    await stack.share.stop('SIGKILL')
    let a: Answer
    try {
      a = await pending
    } finally {
      await stack.restartShare()
    }
    expect(a.verdict).toMatch(/^declined: share unreachable or refusing: /)
    expect(a.ids).toEqual(await reference('chat', p.messages))
    await expectStoreClean()
  })
})

describe('concurrency: one bridge at a time, a bounded queue, short requests not blocked', () => {
  it('queue full (native): the next cold prompt is served natively; a short prompt answers while the long bridge runs', async () => {
    const long = chatPrompt(art.tokenizer, 118, 2300)
    let longDone = false
    const pending = chat(fronts.tight, long.messages).then((a) => { longDone = true; return a })
    await waitFor(async () => (await health(fronts.tight)).queue.running === true ? true : undefined, HANG_LIMIT_MS, 'the long bridge running')
    const short = await chat(fronts.tight, [{ role: 'user', content: 'Quick one.' }])
    expect(short.verdict).toMatch(/^declined: short prompt/)
    // Health and the model list answer while the bridge runs (it is still running below).
    const [h, models] = await Promise.all([health(fronts.tight), client(fronts.tight).models.list()])
    expect(h.queue).toMatchObject({ running: true, waiting: 0 })
    expect(models.data.map((m) => m.id)).toEqual([stack.modelName])
    expect(longDone).toBe(false)
    const p = chatPrompt(art.tokenizer, 119, 700)
    const b = await chat(fronts.tight, p.messages)
    expect(b.verdict).toBe('declined: bridge queue full (0 waiting behind the running bridge)')
    expect(b.cached).toBe(0)
    expect(b.ids).toEqual(await reference('chat', p.messages))
    const a = await pending
    expectComplete(a, long.ids.length)
    expect(a.ids).toEqual(await reference('chat', long.messages))
  })

  it('queue full (reject): a clear 429 with Retry-After and the verdict', async () => {
    // Long, so it is still running while the two refusals below are made (they take milliseconds;
    // a first bridge that ended before them would let the second request through).
    const first = chatPrompt(art.tokenizer, 120, 2300)
    const pending = chat(fronts.reject, first.messages)
    await waitFor(async () => (await health(fronts.reject)).queue.running === true ? true : undefined, HANG_LIMIT_MS, 'the bridge running')
    const p = chatPrompt(art.tokenizer, 121, 700)
    const res = await fetch(`${fronts.reject.url}/v1/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ messages: p.messages, max_tokens: MAX }) })
    expect(res.status).toBe(429)
    expect(Number(res.headers.get('retry-after'))).toBeGreaterThanOrEqual(1)
    expect(res.headers.get('x-pd-bridge')).toBe('declined: bridge queue full (0 waiting), request refused')
    expect(await res.json()).toMatchObject({ error: { type: 'rate_limit_error', code: 'bridge_queue_full' } })
    await expect(client(fronts.reject).chat.completions.create({ model: stack.modelName, messages: p.messages, max_tokens: MAX })).rejects.toBeInstanceOf(OpenAI.RateLimitError)
    expect((await pending).verdict).toBe('complete')
  })
})

describe('the prefill engine killed mid-request', () => {
  it('declined: prefill engine unreachable; native answer; after a restart, bridging resumes', async () => {
    // The kill needs the capture running. An engine fast enough to seal it before these polls look
    // (a loaded machine can starve them) makes an attempt that proves nothing about the kill: its
    // answer is awaited and the next attempt sends a longer prompt, whose capture runs longer.
    for (const [seed, tokens] of [[122, 700], [124, 1400], [126, 2300]] as const) {
      if (await killMidCapture(seed, tokens)) return
    }
    throw new Error('every attempt\'s capture was done before the engine could be killed mid-capture')
  })
})

/** One attempt; false when the capture was sealed before the kill (nothing was tested), true when the whole case ran. */
async function killMidCapture (seed: number, tokens: number): Promise<boolean> {
  const p = chatPrompt(art.tokenizer, seed, tokens)
  const pending = chat(fronts.main, p.messages)
  // An answer before the capture is caught running means this attempt missed it: the polls stop at
  // once (the caller tries a longer prompt) instead of polling an idle engine until the hang limit.
  let answered: { verdict: string | null } | Error | undefined
  pending.then((a) => { answered = a }, (e: unknown) => { answered = e as Error })
  const beforeAnswer = async <T>(check: () => Promise<T | undefined>, what: string): Promise<T> => await waitFor(async () => {
    const v = await check()
    if (v === undefined && answered !== undefined) throw new Error(`the request was answered before ${what}: ${answered instanceof Error ? answered.message : `verdict ${answered.verdict}`}`)
    return v
  }, HANG_LIMIT_MS, what)
  const id = await waitFor(async () => {
    const running = (await (await fetch(`${stack.engine.url}/health`)).json() as { running: string | null }).running ?? undefined
    return running ?? (answered !== undefined ? null : undefined)
  }, HANG_LIMIT_MS, 'the engine running the capture')
  if (id === null) {
    await pending
    return false
  }
  // Kill only once the capture's manifest is on disk saying `running`: the engine reports the job
  // running a moment before it writes the manifest, and a kill in between leaves nothing to recover.
  // The engine is stopped (SIGSTOP) while its manifest is read, so the capture cannot end between
  // two looks (on a loaded machine it did: the manifest went from absent to done unseen).
  const engine = stack.engine.child
  const caught = await beforeAnswer(async () => {
    engine.kill('SIGSTOP')
    let state: string | undefined
    try { state = (JSON.parse(readFileSync(join(stack.captureRoot, id, 'manifest.json'), 'utf8')) as { state: string }).state }
    catch { state = undefined }
    if (state === 'running') return true
    engine.kill('SIGCONT')
    return state === undefined ? undefined : false
  }, 'the capture manifest written')
  if (!caught) {
    await pending
    return false
  }
  stack.engine.child.kill('SIGKILL')
  const a = await pending
  expect(a.verdict).toMatch(/^declined: prefill engine unreachable during the prefill \(6 status polls failed\): connection refused/)
  expect(a.cached).toBe(0)
  expect(a.ids).toEqual(await reference('chat', p.messages))
  await expectStoreClean()
  await stack.restartEngine()
  expect((stack.engine.ready.recovered_failed as string[]).length).toBe(1)
  const q = chatPrompt(art.tokenizer, 123, 700)
  const b = await chat(fronts.main, q.messages)
  expectComplete(b, q.ids.length)
  expect(b.ids).toEqual(await reference('chat', q.messages))
  return true
}
