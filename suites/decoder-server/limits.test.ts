// `pd-bridge decoder` refusing what it cannot serve: every 4xx in OpenAI's error shape (raw fetch,
// and through the openai client), a full queue (429 + Retry-After), cancelled requests that stop
// decoding, shutdown on SIGTERM mid-stream, and CLI arguments it cannot use.
import { execFile } from 'node:child_process'
import { once } from 'node:events'
import { get } from 'node:http'
import { connect } from 'node:net'
import { promisify } from 'node:util'
import OpenAI from 'openai'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { makeTiny, startDecoderChild, tempDir, waitFor, type DecoderChild } from './helpers.ts'

const tmp = tempDir('decoder-limits')
const MAX_BODY = 4000
let server: DecoderChild
let client: OpenAI
let model: string

beforeAll(async () => {
  const dir = await makeTiny(`${tmp.dir}/model`)
  server = await startDecoderChild(['--model', dir, '--cache-dir', `${tmp.dir}/cache`, '--model-name', 'tiny', '--max-batch', '1', '--max-queue', '0', '--max-body-bytes', String(MAX_BODY)], `${tmp.dir}/decoder.log`)
  client = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: 'unused', maxRetries: 0 })
  model = 'tiny'
})

afterAll(async () => {
  await server?.stop()
  tmp.remove()
})

async function post (path: string, body: string, contentType = 'application/json'): Promise<{ status: number, headers: Headers, json: any }> {
  const res = await fetch(`${server.url}${path}`, { method: 'POST', headers: { 'content-type': contentType }, body })
  return { status: res.status, headers: res.headers, json: await res.json() }
}

async function health (): Promise<Record<string, any>> {
  return await (await fetch(`${server.url}/health`)).json() as Record<string, any>
}

const hi = [{ role: 'user', content: 'hi' }]
const chat = (extra: Record<string, unknown>): string => JSON.stringify({ model: 'tiny', messages: hi, ...extra })

describe('4xx answers in OpenAI\'s error shape', () => {
  const cases: Array<[string, string, string, number, string, string | null, string | null, RegExp]> = [
    ['bad JSON', '/v1/chat/completions', '{"messages": [', 400, 'invalid_request_error', null, 'invalid_json', /not valid JSON/],
    ['an empty body', '/v1/chat/completions', '', 400, 'invalid_request_error', null, 'invalid_json', /empty/],
    ['a body that is not an object', '/v1/completions', '"hello"', 400, 'invalid_request_error', null, null, /must be a JSON object, got a string/],
    ['a wrong type', '/v1/chat/completions', chat({ max_tokens: 'ten' }), 400, 'invalid_request_error', 'max_tokens', null, /'max_tokens' must be an integer, got a string/],
    ['missing messages', '/v1/chat/completions', '{"model": "tiny"}', 400, 'invalid_request_error', 'messages', null, /'messages' is required/],
    ['missing prompt', '/v1/completions', '{"model": "tiny"}', 400, 'invalid_request_error', 'prompt', null, /'prompt' is required/],
    ['an unknown model', '/v1/chat/completions', JSON.stringify({ model: 'gpt-4o', messages: hi }), 404, 'invalid_request_error', 'model', 'model_not_found', /'gpt-4o' does not exist; this decoder serves 'tiny'/],
    ['prompt + max_tokens over max_position_embeddings', '/v1/completions', JSON.stringify({ prompt: [0, 1, 2], max_tokens: 32766 }), 400, 'invalid_request_error', 'max_tokens', 'context_length_exceeded',
      /^the prompt \(3 tokens\) \+ max_tokens \(32766\) = 32769 tokens, more than max_position_embeddings \(32768\)$/],
    ['max_tokens over --max-tokens', '/v1/chat/completions', chat({ max_tokens: 5000 }), 400, 'invalid_request_error', 'max_tokens', null, /'max_tokens' is 5000, more than this server allows \(--max-tokens 4096\)/],
    ['n over the limit', '/v1/chat/completions', chat({ n: 9 }), 400, 'invalid_request_error', 'n', null, /'n' must be an integer between 1 and 8, got 9/],
    ['an unsupported role', '/v1/chat/completions', JSON.stringify({ messages: [{ role: 'function', content: 'x', name: 'a' }] }), 400, 'invalid_request_error', 'messages[0].role', 'unsupported_value', /'function'/],
    ['a temperature over 2', '/v1/chat/completions', chat({ temperature: 2.5 }), 400, 'invalid_request_error', 'temperature', null, /'temperature' must be between 0 and 2, got 2.5/],
    ['a token id outside the vocabulary', '/v1/completions', JSON.stringify({ prompt: [0, 600] }), 400, 'invalid_request_error', 'prompt', null, /'prompt\[1\]' is 600, not a token id below vocab_size \(512\)/],
    ['a body over --max-body-bytes', '/v1/chat/completions', chat({ user: 'x'.repeat(MAX_BODY) }), 413, 'request_too_large_error', null, 'request_too_large', /--max-body-bytes 4000/],
    ['an unknown route', '/v1/embeddings', '{}', 404, 'not_found_error', null, 'unknown_route', /no route POST \/v1\/embeddings/],
  ]
  it.each(cases)('%s', async (_what, path, body, status, type, param, code, message) => {
    const r = await post(path, body)
    expect(r.status).toBe(status)
    expect(Object.keys(r.json)).toEqual(['error'])
    expect(r.json.error).toEqual({ message: expect.stringMatching(message), type, param, code })
  })

  it('a body that is not JSON is a 415', async () => {
    const r = await post('/v1/chat/completions', 'messages=hi', 'application/x-www-form-urlencoded')
    expect(r.status).toBe(415)
    expect(r.json.error).toMatchObject({ type: 'unsupported_media_type_error', code: 'unsupported_media_type' })
  })

  it('the openai client raises them as its typed errors, with the message and param', async () => {
    const e = await client.chat.completions.create({ model, messages: [{ role: 'user', content: 'x' }], n: 9 }).then(() => undefined, (err: unknown) => err)
    expect(e).toBeInstanceOf(OpenAI.BadRequestError)
    expect((e as InstanceType<typeof OpenAI.BadRequestError>).param).toBe('n')
    expect((e as Error).message).toMatch(/'n' must be an integer between 1 and 8/)
    await expect(client.chat.completions.create({ model: 'other', messages: [{ role: 'user', content: 'x' }] })).rejects.toBeInstanceOf(OpenAI.NotFoundError)
  })
})

/** Start a long streamed completion and wait until its first text arrives (it then holds the engine). */
async function startLongStream (): Promise<AsyncIterator<OpenAI.Completion>> {
  const stream = await client.completions.create({ model, prompt: 'Count forever:', max_tokens: 4000, ignore_eos: true, stream: true } as OpenAI.CompletionCreateParamsStreaming)
  const it = stream[Symbol.asyncIterator]()
  for (;;) {
    const { value, done } = await it.next()
    if (done) throw new Error('the stream ended before any text')
    if ((value.choices[0]?.text ?? '') !== '') return it
  }
}

function generations (): Array<Record<string, any>> {
  return server.log().filter((l) => l.event === 'generation')
}

describe('queue bound and cancellation', () => {
  it('with the queue full a request is a 429 with Retry-After; a cancelled stream stops decoding and frees the engine', async () => {
    const before = generations().length
    const running = await startLongStream()
    const refused = await post('/v1/completions', JSON.stringify({ prompt: 'x', max_tokens: 2 }))
    expect(refused.status).toBe(429)
    expect(Number(refused.headers.get('retry-after'))).toBeGreaterThanOrEqual(1)
    expect(refused.json.error).toMatchObject({ type: 'rate_limit_error', code: 'queue_full', message: expect.stringMatching(/--max-queue 0/) })
    await expect(client.completions.create({ model, prompt: 'x', max_tokens: 2 })).rejects.toBeInstanceOf(OpenAI.RateLimitError)
    expect((await health()).queue).toMatchObject({ running: 1, waiting: 0, refused: 2 })
    await running.return?.() // the client aborts the request
    const line = await waitFor(async () => generations().slice(before).find((l) => l.finish_reason === 'cancelled'))
    expect(line.completion_tokens).toBeLessThan(4000)
    // The server writes that line and gives the engine back in the same turn of its event loop, so
    // any request it answers after the line is in the log sees the engine free.
    expect((await health()).queue).toMatchObject({ running: 0, waiting: 0 })
    const ok = await client.completions.create({ model, prompt: 'x', max_tokens: 2 })
    expect(ok.choices[0].finish_reason).toMatch(/stop|length/)
  })

  it('a whole (non-streamed) request whose client goes away stops too', async () => {
    const before = generations().length
    const abort = new AbortController()
    const pending = fetch(`${server.url}/v1/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ prompt: 'Again:', max_tokens: 4000, ignore_eos: true }), signal: abort.signal })
    await waitFor(async () => (await health()).queue.running === 1 ? true : undefined)
    abort.abort()
    await expect(pending).rejects.toThrow()
    const line = await waitFor(async () => generations().slice(before).find((l) => l.finish_reason === 'cancelled'))
    expect(line).toMatchObject({ stream: false })
    expect(line.completion_tokens).toBeLessThan(4000)
  })
})

describe('shutdown', () => {
  it('SIGTERM mid-stream ends the stream with an error event and exits 0, whatever connections clients hold open', async () => {
    const { hostname, port } = new URL(server.url)
    // A connection that never sends a request, as HTTP client pools (undici's, so this test's own
    // fetch now and then) and browsers open ahead of use. Node counts it as active, not idle, and
    // stops timing it out once the server closes, so it used to hold the shutdown until the client
    // dropped it. Made explicit here instead of waiting for the pool to leave one behind.
    const idle = connect(Number(port), hostname)
    idle.on('error', () => {}) // the server may reset it; only its closing matters
    const idleClosed = new Promise((resolve) => idle.once('close', resolve))
    await once(idle, 'connect')
    // A request on a fresh connection: once it is answered the server has accepted every connection
    // queued before it, `idle` included.
    await new Promise<void>((resolve, reject) => get(`${server.url}/health`, { agent: false }, (res) => { res.resume().on('end', resolve) }).on('error', reject))
    const running = await startLongStream() // its first text has arrived: the request is mid-stream
    const code = server.stop('SIGTERM')
    const err = await (async () => {
      for (;;) {
        const { done } = await running.next()
        if (done) return undefined
      }
    })().then(() => undefined, (e: unknown) => e)
    expect(err).toBeInstanceOf(OpenAI.APIError)
    expect((err as Error).message).toMatch(/shutting down/)
    expect(await code).toBe(0)
    await idleClosed
    const log = server.log()
    expect(log.some((l) => l.event === 'shutdown' && l.signal === 'SIGTERM')).toBe(true)
    expect(log[log.length - 1].event).toBe('closed')
  })
})

describe('command line', () => {
  it('names a bad port and a missing model directory, exit code 2, no stack', async () => {
    const run = promisify(execFile)
    const bin = new URL('../../bin/pd-bridge.mjs', import.meta.url).pathname
    for (const [args, fragment] of [
      [['--model', `${tmp.dir}/model`, '--cache-dir', `${tmp.dir}/c2`, '--port', 'eighty'], '--port: "eighty" is not an integer in [0, 65535]'],
      [['--model', `${tmp.dir}/absent`, '--cache-dir', `${tmp.dir}/c2`, '--port', '0'], `${tmp.dir}/absent/config.json: config.json: missing`],
    ] as Array<[string[], string]>) {
      const e = await run(process.execPath, [bin, 'decoder', ...args]).then(() => undefined, (err: { code: number, stderr: string }) => err)
      expect(e?.code).toBe(2)
      expect(e?.stderr).toContain(fragment)
      expect(e?.stderr).not.toContain('    at ')
    }
  })
})
