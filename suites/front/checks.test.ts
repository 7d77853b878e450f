// The front door's own checks, in process against a fake decoder: requests the embedded decoder
// would refuse are refused before any bridge work (its own rules, same status and body); large
// bodies are tokenized once, in a worker thread, while /health keeps answering; the decoder's
// internal routes are not reachable; nothing a client sees names an absolute path.
import { once } from 'node:events'
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'
import { join } from 'node:path'
import pino from 'pino'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { frontConfigSchema } from '../../src/config/index.ts'
import { parseChatRequest, parseCompletionRequest } from '../../src/engines/decoder/request.ts'
import { pathRedactor } from '../../src/front/redact.ts'
import { startFrontDoor, type FrontDoor } from '../../src/front/server.ts'
import { BLOCK, makeArtifacts, tempDir, type Artifacts } from './stack.ts'

const MODEL = 'tiny-checks'
let tmp: ReturnType<typeof tempDir>
let art: Artifacts
let fake: { url: string, server: Server, hits: string[], health: Record<string, unknown>, ownedBy: string }
const fronts: FrontDoor[] = []

async function startFake (): Promise<typeof fake> {
  const state = { hits: [] as string[], health: {} as Record<string, unknown>, ownedBy: 'pd-bridge' }
  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
    const chunks: Buffer[] = []
    req.on('data', (c: Buffer) => chunks.push(c))
    req.on('end', () => {
      const path = (req.url ?? '').split('?')[0]
      state.hits.push(`${req.method} ${path}`)
      const json = (status: number, body: unknown): void => { res.writeHead(status, { 'content-type': 'application/json' }); res.end(JSON.stringify(body)) }
      if (path.endsWith('/health')) return json(200, path === '/health' ? state.health : { status: 'ok' })
      if (path === '/v1/models') return json(200, { object: 'list', data: [{ id: MODEL, object: 'model', owned_by: state.ownedBy }] })
      if (path === '/v1/cache/rescan') return json(200, { object: 'cache.rescan', report: {} })
      if (path === '/v1/completions' || path === '/v1/chat/completions') {
        return json(200, { id: 'cmpl-1', object: 'text_completion', model: MODEL, choices: [{ index: 0, text: 'ok', finish_reason: 'stop' }], usage: { prompt_tokens: 1, completion_tokens: 1, total_tokens: 2, prompt_tokens_details: { cached_tokens: 0 } } })
      }
      json(404, { error: { message: `no route ${req.method} ${path}`, type: 'not_found_error', param: null, code: 'unknown_route' } })
    })
  })
  server.listen(0, '127.0.0.1')
  await once(server, 'listening')
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
  return Object.assign(state, { url, server })
}

function embeddedHealth (maxPositions: number): Record<string, unknown> {
  return { status: 'ok', model: MODEL, profile: 'decoder', max_position_embeddings: maxPositions, limits: { max_tokens: 64 }, cache: { block_size: BLOCK } }
}

async function front (extra: { decoder?: Record<string, unknown>, limits?: Record<string, unknown>, sidecar?: string } = {}): Promise<FrontDoor> {
  const config = frontConfigSchema.parse({
    listen: { host: '127.0.0.1', port: 0 },
    decoder: { url: fake.url, model: art.model, modelName: MODEL, cacheDir: join(tmp.dir, 'cache'), blockSize: BLOCK, ...extra.decoder },
    // Paths of their own on the fake, so a bridge that started would show up in its hits.
    prefill: { url: `${fake.url}/prefill` },
    share: { url: `${fake.url}/share` },
    sidecar: extra.sidecar ?? art.sidecar,
    routing: { minTokens: 2 * BLOCK, minTail: BLOCK, maxBridgeTokens: 8192 },
    limits: { ...extra.limits },
    log: { level: 'silent' },
  })
  const f = await startFrontDoor({ config, logger: pino({ level: 'silent' }) })
  fronts.push(f)
  return f
}

async function post (f: FrontDoor, path: string, body: unknown): Promise<{ status: number, body: any, verdict: string | null }> {
  const res = await fetch(`${f.url}${path}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) })
  return { status: res.status, body: await res.json(), verdict: res.headers.get('x-pd-bridge') }
}

function refusal (parse: (b: unknown) => unknown, body: unknown): unknown {
  try {
    parse(body)
  } catch (e) {
    return (e as { toBody: () => unknown }).toBody()
  }
  throw new Error('the decoder accepts this body')
}

const bridgeHits = (): string[] => fake.hits.filter((h) => / \/(prefill|share)\//.test(h) || h.endsWith('/v1/completions') || h.endsWith('/v1/chat/completions'))

beforeAll(async () => {
  tmp = tempDir('front-checks')
  ;[art, fake] = await Promise.all([makeArtifacts(tmp.dir), startFake()])
  fake.health = embeddedHealth(4096)
})

afterAll(async () => {
  for (const f of fronts) await f.close()
  fake?.server.close()
  tmp?.remove()
})

const longText = (words: number): string => Array.from({ length: words }, (_, i) => ['alpha', 'river', 'stone', 'cloud', 'maple'][(i * 7) % 5]).join(' ')

describe('requests the embedded decoder refuses are refused before any work', () => {
  it('max_tokens 0, temperature 2.5, n 9, a logit bias, an unknown role: the decoder\'s own 400, nothing bridged, nothing tokenized', async () => {
    const f = await front()
    fake.hits.length = 0
    const cases: Array<[string, Record<string, unknown>, (b: unknown) => unknown]> = [
      ['/v1/completions', { model: MODEL, prompt: longText(2000), max_tokens: 0 }, parseCompletionRequest],
      ['/v1/chat/completions', { messages: [{ role: 'user', content: longText(2000) }], temperature: 2.5 }, parseChatRequest],
      ['/v1/chat/completions', { messages: [{ role: 'user', content: longText(2000) }], n: 9 }, parseChatRequest],
      ['/v1/chat/completions', { messages: [{ role: 'user', content: longText(2000) }], logit_bias: { 5: 10 } }, parseChatRequest],
      ['/v1/chat/completions', { messages: [{ role: 'tool', content: 'x' }] }, parseChatRequest],
    ]
    for (const [path, body, parse] of cases) {
      const r = await post(f, path, body)
      expect(r.status).toBe(400)
      expect(r.body).toEqual(refusal(parse, body))
      expect(r.verdict).toBe('declined: request refused (400)')
    }
    expect((await post(f, '/v1/chat/completions', { messages: [{ role: 'user', content: 'x' }], logit_bias: { 5: 10 } })).body.error).toMatchObject({ param: 'logit_bias', code: 'unsupported_value', type: 'invalid_request_error' })
    expect(bridgeHits()).toEqual([])
    expect(f.tokenizer.stats.runs).toBe(0)
  })

  it("the decoder's context and max_tokens limits, checked with the front door's own token ids", async () => {
    const f = await front()
    fake.hits.length = 0
    const over = await post(f, '/v1/completions', { prompt: longText(200), max_tokens: 65 })
    expect(over.status).toBe(400)
    expect(over.body.error).toMatchObject({ param: 'max_tokens', message: "'max_tokens' is 65, more than this server allows (--max-tokens 64)" })
    const t = art.tokenizer.encode(longText(200), { addSpecialTokens: true }).length
    fake.health = embeddedHealth(t + 4)
    const f2 = await front()
    const long = await post(f2, '/v1/completions', { prompt: longText(200), max_tokens: 8 })
    fake.health = embeddedHealth(4096)
    expect(long.status).toBe(400)
    expect(long.body.error).toMatchObject({ code: 'context_length_exceeded', param: 'max_tokens' })
    expect(long.body.error.message).toMatch(/^the prompt \(\d+ tokens\) \+ max_tokens \(8\) = \d+ tokens, more than max_position_embeddings \(\d+\)$/)
    expect(long.body.error.message).toBe(`the prompt (${t} tokens) + max_tokens (8) = ${t + 8} tokens, more than max_position_embeddings (${t + 4})`)
    expect(bridgeHits()).toEqual([])
    expect(f.tokenizer.stats.runs + f2.tokenizer.stats.runs).toBe(2)
  })

  it('another decoder (not owned_by pd-bridge) or requestRules off: its options pass through', async () => {
    const off = await front({ decoder: { requestRules: 'off' } })
    fake.ownedBy = 'vllm'
    const auto = await front()
    try {
      for (const f of [off, auto]) {
        const r = await post(f, '/v1/chat/completions', { messages: [{ role: 'user', content: 'hi' }], logit_bias: { 5: 10 } })
        expect(r.status).toBe(200)
        expect(r.verdict).toMatch(/^declined: short prompt/)
      }
    } finally {
      fake.ownedBy = 'pd-bridge'
    }
  })
})

describe('a large body is tokenized once, in a worker thread, while /health answers', () => {
  const big = (): string => {
    const words = ['alpha', 'river', 'stone', 'cloud', 'maple', 'seven', 'quartz', 'lantern']
    const parts: string[] = []
    let n = 0
    for (let i = 0; n < 3_500_000; i++) { const w = words[(i * 7919) % words.length] + (i % 13 === 0 ? '.\n' : ' '); parts.push(w); n += w.length }
    return parts.join('')
  }

  async function race (f: FrontDoor, text: string): Promise<{ order: string[], answer: Awaited<ReturnType<typeof post>> }> {
    const order: string[] = []
    let health: Promise<void> | undefined
    f.tokenizer.once('start', () => {
      // Asked the moment tokenization starts; it can only finish first if the event loop is free.
      health = fetch(`${f.url}/health`).then(async (res) => { await res.json(); order.push(`health ${res.status}`) })
    })
    f.tokenizer.once('done', () => order.push('tokenized'))
    const answer = await post(f, '/v1/completions', { prompt: text, max_tokens: 4 })
    await health
    return { order, answer }
  }

  it('/health completes before the tokenization does; the tokenizer ran once for the request', async () => {
    fake.health = embeddedHealth(1 << 30)
    const f = await front({ limits: { maxBodyBytes: 8 << 20 } })
    const text = big()
    const { order, answer } = await race(f, text)
    expect(order).toEqual(['health 200', 'tokenized'])
    expect(answer.status).toBe(200)
    const t = art.tokenizer.encode(text, { addSpecialTokens: true }).length
    expect(answer.verdict).toBe(`declined: prompt over the envelope guard (${t} tokens > PD_MAX_BRIDGE_TOKENS 8192)`)
    expect(answer.body.pd_bridge.prompt_tokens).toBe(t)
    expect(f.tokenizer.stats).toEqual({ runs: 1, worker: 1, inline: 0, failed: 0 })
    const h = await (await fetch(`${f.url}/health`)).json() as Record<string, any>
    expect(h.tokenize).toEqual({ runs: 1, worker: 1, inline: 0, failed: 0 })
  })

  it('the control: tokenized on the event loop (threshold above the body), /health waits for it', async () => {
    const f = await front({ limits: { maxBodyBytes: 8 << 20, tokenizeWorkerBytes: 16 << 20 } })
    const { order, answer } = await race(f, big())
    expect(order).toEqual(['tokenized', 'health 200'])
    expect(answer.status).toBe(200)
    expect(f.tokenizer.stats).toEqual({ runs: 1, worker: 0, inline: 1, failed: 0 })
    fake.health = embeddedHealth(4096)
  })

  it('small bodies stay on the event loop and give the same ids as the worker', async () => {
    const f = await front({ limits: { tokenizeWorkerBytes: 0 } })
    const g = await front()
    const body = { messages: [{ role: 'user', content: longText(1000) }], max_tokens: 4 }
    const [a, b] = [await post(f, '/v1/chat/completions', body), await post(g, '/v1/chat/completions', body)]
    expect(a.body.pd_bridge.prompt_tokens).toBe(b.body.pd_bridge.prompt_tokens)
    expect(a.body.pd_bridge.prompt_tokens).toBeGreaterThan(2 * BLOCK)
    expect([f.tokenizer.stats.worker, g.tokenizer.stats.inline]).toEqual([1, 1])
  })
})

describe('internal routes and absolute paths', () => {
  it('POST /v1/cache/rescan is a 404 from the front door and never reaches the decoder; /v1/models still passes', async () => {
    const f = await front()
    fake.hits.length = 0
    for (const path of ['/v1/cache/rescan', '/v1/cache/rescan?x=1', '/v1/cache', '/v1/models/../cache/rescan']) {
      const res = await fetch(`${f.url}${path}`, { method: 'POST' })
      expect(res.status, path).toBe(404)
      expect(await res.json()).toMatchObject({ error: { type: 'not_found_error', code: 'unknown_route' } })
    }
    // A trailing slash is an ambiguous spelling: refused before any route is looked up.
    const slash = await fetch(`${f.url}/v1/cache/rescan/`, { method: 'POST' })
    expect(slash.status).toBe(400)
    expect(await slash.json()).toMatchObject({ error: { type: 'invalid_request_error', code: 'invalid_path' } })
    expect(fake.hits.filter((h) => h.includes('/v1/cache'))).toEqual([])
    const models = await fetch(`${f.url}/v1/models`)
    expect(models.status).toBe(200)
    expect(fake.hits).toContain('GET /v1/models')
  })

  it('the redactor: configured roots by name, only at path boundaries; URLs and routes untouched', () => {
    const config = frontConfigSchema.parse({ decoder: { url: 'http://127.0.0.1:1', cacheDir: '/srv/pd/cache', model: '/srv/pd/model' }, sidecar: '/srv/pd/side' })
    const r = pathRedactor(config, '/var/spool/pd-1')
    expect(r("cannot read '/srv/pd/side/sidecar.json'")).toBe("cannot read '<sidecar>/sidecar.json'")
    expect(r('/srv/pd/cache')).toBe('<decoder.cacheDir>')
    expect(r('/var/spool/pd-1/pd-x/layer-000, /srv/pd/model/config.json')).toBe('<capture.spoolDir>/pd-x/layer-000, <decoder.model>/config.json')
    for (const same of ['/x/srv/pd/cache/a', '/srv/pd/cachex/a', 'http://127.0.0.1:8011/srv/pd/cache', 'no route GET /v1/nothing']) expect(r(same)).toBe(same)
  })

  it('/health and client-facing reasons name files relative to the configured roots', async () => {
    const f = await front()
    const text = await (await fetch(`${f.url}/health`)).text()
    expect(text).not.toContain(tmp.dir)
    const h = JSON.parse(text) as Record<string, any>
    expect(h.links.store.dir).toBe('<decoder.cacheDir>')
    expect(h.links.sidecar.dir).toBe('<sidecar>')
    expect(h.links.capture).toMatchObject({ mode: 'share', spool_dir: '<capture.spoolDir>', spool_entries: 0 })

    const broken = await front({ sidecar: join(tmp.dir, 'no-sidecar') })
    const hb = await (await fetch(`${broken.url}/health`)).text()
    expect(hb).not.toContain(tmp.dir)
    expect(JSON.parse(hb).bridge.problems[0]).toContain('<sidecar>')
    const r = await post(broken, '/v1/chat/completions', { messages: [{ role: 'user', content: longText(3000) }], max_tokens: 4 })
    expect(r.verdict).toMatch(/^declined: bridge unavailable: /)
    expect(r.verdict).not.toContain(tmp.dir)
    expect(JSON.stringify(r.body)).not.toContain(tmp.dir)
  })
})
