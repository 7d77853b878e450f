// `pd-bridge decoder` with PD_API_KEY set, as a real child process: completions, models and the
// internal rescan are a 401 in OpenAI's error shape without the key or with a wrong one, a bare
// /health says only its status, and with the key everything answers as before.
import { join, resolve } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { loadTokenizer } from '../../src/model/tokenizer/index.ts'
import { makeTiny, startDecoderChild, tempDir, type DecoderChild } from './helpers.ts'

const KEY = 'decoder-test-key-19c2'
const tmp = tempDir('decoder-key')
let decoder: DecoderChild
let model: string

beforeAll(async () => {
  model = await makeTiny(join(tmp.dir, 'model'))
  decoder = await startDecoderChild(['--model', model, '--cache-dir', join(tmp.dir, 'cache'), '--block-size', '256', '--max-tokens', '8'], join(tmp.dir, 'decoder.log'), { PD_API_KEY: KEY })
})
afterAll(async () => {
  await decoder?.stop()
  tmp.remove()
})

async function call (path: string, init: RequestInit = {}): Promise<{ status: number, headers: Headers, body: any }> {
  const res = await fetch(`${decoder.url}${path}`, init)
  return { status: res.status, headers: res.headers, body: await res.json() }
}

const completion = { prompt: 'hello there', max_tokens: 2, temperature: 0 }

describe('PD_API_KEY on the decoder', () => {
  it.each([
    ['no key', {}],
    ['a wrong key', { authorization: 'Bearer wrong' }],
  ])('%s: 401 invalid_api_key on completions, models and rescan', async (_name, headers: Record<string, string>) => {
    for (const [method, path, body] of [['POST', '/v1/completions', JSON.stringify(completion)], ['GET', '/v1/models'], ['POST', '/v1/cache/rescan']] as const) {
      const r = await call(path, { method, headers: { 'content-type': 'application/json', ...headers }, body })
      expect(r.status, `${method} ${path}`).toBe(401)
      expect(r.headers.get('www-authenticate')).toBe('Bearer')
      expect(r.body).toEqual({ error: { message: expect.stringContaining('API key'), type: 'invalid_request_error', param: null, code: 'invalid_api_key' } })
    }
  })

  it('/health without the key says only its status; with the key the whole report and a completion', async () => {
    expect((await call('/health')).body).toEqual({ status: 'ok' })
    const auth = { authorization: `Bearer ${KEY}` }
    expect((await call('/health', { headers: auth })).body).toMatchObject({ status: 'ok', geometry_fingerprint: expect.any(String) })
    // The digests a front door holds its own tokenizer and chat template against (front/prompt-agreement.ts).
    const t = await loadTokenizer(model)
    expect((await call('/health', { headers: auth })).body).toMatchObject({ tokenizer_digest: t.digest, chat_template_digest: t.chatFormat.digest })
    const r = await call('/v1/completions', { method: 'POST', headers: { 'content-type': 'application/json', ...auth }, body: JSON.stringify(completion) })
    expect(r.status).toBe(200)
    expect(r.body.usage.completion_tokens).toBeGreaterThan(0)
  })

  it('the key holder sees the deployment paths (the default model name is the model directory); nobody else is told them', async () => {
    const auth = { authorization: `Bearer ${KEY}` }
    const h = (await call('/health', { headers: auth })).body
    expect(h).toMatchObject({ model: resolve(model), model_dir: model, cache: { dir: join(tmp.dir, 'cache') } })
    expect((await call('/v1/models', { headers: auth })).body.data[0].id).toBe(resolve(model))
    const anonymous = await fetch(`${decoder.url}/health`)
    expect(await anonymous.text()).not.toContain(tmp.dir)
  })
})
