// PD_API_KEY on the whole stack (engine, share, decoder and front door all started with it): the
// front door answers 401 in OpenAI's shape without the key or with a wrong one, its /health then
// says only ok and status (no URL, path or problem), and with the key a cold prompt still bridges
// complete, so the front door sent the key on every internal request. Each internal service
// refuses a request without it.
import OpenAI from 'openai'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { chatPrompt, frontConfig, makeArtifacts, startFront, startStack, tempDir, type Artifacts, type Stack } from './stack.ts'
import { HANG_LIMIT_MS } from '../support/hang-limit.ts'

const KEY = 'front-test-key-c0ffee'
const tmp = tempDir('front-key')
let art: Artifacts
let stack: Stack
let front: Awaited<ReturnType<typeof startFront>>

beforeAll(async () => {
  art = await makeArtifacts(tmp.dir)
  stack = await startStack(tmp.dir, art, { PD_API_KEY: KEY })
  front = await startFront(tmp.dir, 'keyed', frontConfig(stack), { PD_API_KEY: KEY })
})

afterAll(async () => {
  await front?.stop()
  await stack?.stop()
  tmp.remove()
})

const client = (apiKey: string): OpenAI => new OpenAI({ baseURL: `${front.url}/v1`, apiKey, maxRetries: 0, timeout: HANG_LIMIT_MS })

describe('PD_API_KEY on the front door', () => {
  it.each([['no key', undefined], ['a wrong key', 'Bearer wrong']])('%s: 401 invalid_api_key on completions and passthrough, nothing bridged', async (_name, authorization) => {
    const headers: Record<string, string> = { 'content-type': 'application/json', ...(authorization === undefined ? {} : { authorization }) }
    for (const [method, path, body] of [['POST', '/v1/chat/completions', JSON.stringify({ messages: [{ role: 'user', content: 'hi' }], max_tokens: 2 })], ['GET', '/v1/models'], ['POST', '/v1/cache/rescan']] as const) {
      const res = await fetch(`${front.url}${path}`, { method, headers, body })
      expect(res.status, `${method} ${path}`).toBe(401)
      expect(res.headers.get('www-authenticate')).toBe('Bearer')
      expect(await res.json()).toEqual({ error: { message: expect.stringContaining('API key'), type: 'invalid_request_error', param: null, code: 'invalid_api_key' } })
    }
    await expect(client('wrong').models.list()).rejects.toBeInstanceOf(OpenAI.AuthenticationError)
  })

  it('/health without the key tells the status alone; with it, the whole report (every link ok, so the links took the key)', async () => {
    expect(await (await fetch(`${front.url}/health`)).json()).toEqual({ ok: true, status: 'ok' })
    const full = await (await fetch(`${front.url}/health`, { headers: { authorization: `Bearer ${KEY}` } })).json() as Record<string, any>
    expect(full.status).toBe('ok')
    expect(full.bridge).toEqual({ ready: true, problems: [] })
  })

  it('with the key a cold prompt bridges complete (submit, polls, share, rescan, delete and forward all carried it)', async () => {
    const p = chatPrompt(art.tokenizer, 601, 700)
    const { data, response } = await client(KEY).chat.completions.create({ model: stack.modelName, messages: p.messages as never, max_tokens: 4, temperature: 0 }).withResponse()
    expect(response.headers.get('x-pd-bridge')).toBe('complete')
    const pd = (data as unknown as { pd_bridge: Record<string, any> }).pd_bridge
    expect(pd.cached_tokens).toBe(512)
    expect(pd.capture.retention).toBe('deleted')
    expect(pd.rescan).toEqual({ ok: true })
  })

  it('every internal service refuses a request without the key (401)', async () => {
    expect((await fetch(`${stack.engine.url}/v1/prefill/anything`)).status).toBe(401)
    expect((await fetch(`${stack.share.url}/captures/anything/manifest.json`)).status).toBe(401)
    expect((await fetch(`${stack.decoder.url}/v1/models`)).status).toBe(401)
    expect((await fetch(`${stack.decoder.url}/v1/cache/rescan`, { method: 'POST' })).status).toBe(401)
  })
})
