// `pd-bridge prefill-engine` as a real child process on the tiny checkpoint: submit tokens, a prompt
// and messages and poll them to done; the capture is bit-identical to one made in process; two
// requests queue in order while /health answers; every refusal is a 4xx JSON error naming the
// problem; SIGTERM fails the running capture, never leaves it claiming done, and exits 0.
import { createHash } from 'node:crypto'
import { readdir, readFile } from 'node:fs/promises'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { CaptureSession, loadSidecar } from '../../src/capture/index.ts'
import { readManifest, validateManifestForRequest } from '../../src/wire/manifest.ts'
import { LOCK_FILE } from '../../src/engines/prefill/root-lock.ts'
import { DeepseekV4Engine } from '../../src/model/engine/index.ts'
import { loadTokenizer, renderChat } from '../../src/model/tokenizer/index.ts'
import { call, exists, pollUntil, sleep, startEngine, submit, tempDir, tinyCheckpoint, tinySidecar, type EngineProcess } from './helpers.ts'

const tmp = tempDir('prefill-api')
const root = join(tmp.dir, 'captures')
let engine: EngineProcess
let model: string
let sidecar: { dir: string, fingerprint: string }

beforeAll(async () => {
  model = await tinyCheckpoint()
  sidecar = await tinySidecar()
  engine = await startEngine([
    '--model', model, '--sidecar', sidecar.dir, '--capture-root', root,
    '--max-queue', '1', '--max-chunk', '64', '--max-tokens', '4096', '--max-body-bytes', '65536',
  ])
})
afterAll(async () => {
  if (engine.child.exitCode === null) {
    engine.child.kill('SIGKILL')
    await engine.exited
  }
  tmp.remove()
})

const ids = (n: number, seed: number): number[] => Array.from({ length: n }, (_, i) => (i * 131 + seed * 17 + 3) % 512)
const sha = (b: Uint8Array): string => createHash('sha256').update(b).digest('hex')

describe('the engine announces itself', () => {
  it('prints one ready line and answers /health and /v1/models', async () => {
    expect(engine.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/)
    expect(engine.ready).toMatchObject({ event: 'ready', model: 'tiny', profile: 'prefill', sidecar_fingerprint: sidecar.fingerprint, max_tokens: 4096, recovered_failed: [] })
    const health = await call(`${engine.url}/health`)
    expect(health.status).toBe(200)
    expect(health.body).toEqual({
      status: 'ok', model: 'tiny', profile: 'prefill', sidecar_fingerprint: sidecar.fingerprint,
      queue_length: 0, running: null, accepted_requests: 0, engine_prefilled_tokens: 0, max_queue: 1, max_tokens: 4096, prefix_caching: false,
      // The prefill profile is not the decoder's: a carry of the decoder's cache would not continue this engine's own prefill.
      warm_extend: { supported: false, reason: expect.stringMatching(/prefills under profile prefill and the decoder's cache is under decoder/) },
      stream_blocks: true,
    })
    const models = await call(`${engine.url}/v1/models`)
    expect(models.body).toMatchObject({ object: 'list', data: [{ id: 'tiny', object: 'model', owned_by: 'pd-bridge', max_model_len: 32768 }] })
  })
})

describe('a tokens request runs to a done capture', () => {
  it('polls to done; the manifest validates and its layer files are bit-identical to an in-process capture', async () => {
    const tokens = ids(300, 1)
    const r = await submit(engine.url, { request_id: 'tok-1', tokens })
    expect(r.status).toBe(202)
    expect(r.body).toEqual({ request_id: 'tok-1', status_url: `${engine.url}/v1/prefill/tok-1`, token_count: 300, queue_position: 0 })
    expect(r.headers.get('location')).toBe('/v1/prefill/tok-1')
    const status = await pollUntil(engine.url, 'tok-1')
    expect(status).toMatchObject({ request_id: 'tok-1', state: 'done', token_count: 300, sealed_length: 300, prefilled_tokens: 300 })
    expect(Object.keys(status.timings).sort()).toEqual(['finish', 'prefill', 'queue', 'total'])

    const dir = join(root, 'tok-1')
    const m = await readManifest(dir)
    validateManifestForRequest(m, { requestId: 'tok-1', tokenCount: 300, sidecarFingerprint: sidecar.fingerprint })
    expect([m.state, m.numLayers, m.profile]).toEqual(['done', 4, 'decoder'])
    expect((await readdir(dir)).sort()).toEqual(['layer-000.safetensors', 'layer-001.safetensors', 'layer-002.safetensors', 'layer-003.safetensors', 'manifest.json'])
    for (const entry of m.layers) expect(sha(await readFile(join(dir, entry.file)))).toBe(entry.sha256)

    // The same request in process, one shot (the engine ran it in chunks of 64).
    const local = await DeepseekV4Engine.load(model, 'prefill')
    const session = await CaptureSession.start({ sidecar: await loadSidecar(sidecar.dir), captureRoot: tmp.dir, requestId: 'tok-1', tokenCount: 300 })
    local.prefill(tokens, local.newCache(), { attnInputHook: session.onAttentionInput, logits: 'none' })
    const mine = await session.finish()
    expect(m.layers.map((e) => e.sha256)).toEqual(mine.layers.map((e) => e.sha256))
  })
})

describe('a request over its memory budget seals a prefix', () => {
  it('memory_budget_bytes reaches the capture: the request ends partial with a valid sealed prefix, and the prefill stops early', async () => {
    const r = await submit(engine.url, { request_id: 'budget-1', tokens: ids(1000, 8), memory_budget_bytes: 500_000 })
    expect(r.status).toBe(202)
    const status = await pollUntil(engine.url, 'budget-1')
    expect(status.state).toBe('partial')
    expect(status.sealed_length).toBeGreaterThan(0)
    expect(status.sealed_length).toBeLessThan(1000)
    // The engine stops after the chunk (64 tokens) in which the cut was made, not at T.
    expect(status.prefilled_tokens).toBeGreaterThanOrEqual(status.sealed_length)
    expect(status.prefilled_tokens).toBeLessThanOrEqual(status.sealed_length + 64)
    expect(status.prefilled_tokens % 64).toBe(0)
    const m = await readManifest(join(root, 'budget-1'))
    validateManifestForRequest(m, { requestId: 'budget-1', tokenCount: 1000, sidecarFingerprint: sidecar.fingerprint })
    expect([m.state, m.sealedLength, m.memoryBudgetBytes]).toEqual(['partial', status.sealed_length, 500_000])
  })
})

describe('text requests go through the tokenizer', () => {
  it('a prompt gets bos + its tokens, messages the chat template with the generation prompt; both finish', async () => {
    const tokenizer = await loadTokenizer(model)
    const prompt = 'The harbour town woke slowly on winter mornings.'
    const messages = [{ role: 'system', content: 'Answer briefly.' }, { role: 'user', content: 'Who bakes the bread?' }] as const
    const p = await submit(engine.url, { request_id: 'text-prompt', prompt })
    const c = await submit(engine.url, { request_id: 'text-chat', messages })
    expect([p.status, c.status]).toEqual([202, 202])
    expect(p.body.token_count).toBe(tokenizer.encode(prompt, { addSpecialTokens: true }).length)
    expect(c.body.token_count).toBe(tokenizer.encode(renderChat(messages, true)).length)
    for (const id of ['text-prompt', 'text-chat']) {
      expect((await pollUntil(engine.url, id)).state).toBe('done')
      expect((await readManifest(join(root, id))).state).toBe('done')
    }
  })
})

describe('requests queue one at a time, and the engine stays responsive', () => {
  it('the second reports position 1, a third gets 429 with Retry-After, /health answers during the long prefill, both finish in order', async () => {
    const a = await submit(engine.url, { request_id: 'q-long', tokens: ids(2500, 2) })
    const b = await submit(engine.url, { request_id: 'q-short', tokens: ids(100, 3) })
    const c = await submit(engine.url, { request_id: 'q-over', tokens: ids(10, 4) })
    expect([a.status, a.body.queue_position, b.status, b.body.queue_position]).toEqual([202, 0, 202, 1])
    expect(c.status).toBe(429)
    expect(c.body.error.type).toBe('rate_limit_error')
    expect(c.body.error.message).toContain('--max-queue 1')
    expect(c.headers.get('retry-after')).toMatch(/^[1-9]\d*$/)
    expect((await call(`${engine.url}/v1/prefill/q-over`)).status).toBe(404)

    const queued = await call(`${engine.url}/v1/prefill/q-short`)
    expect(queued.body).toMatchObject({ state: 'queued', queue_position: 1, sealed_length: 0 })
    // /health answers between engine chunks: an answer that says q-long is running was given while
    // the prefill ran (no time bound: the machine may be loaded, what matters is that it answered).
    let sawRunning = 0
    for (let i = 0; i < 3; i++) {
      const h = await call(`${engine.url}/health`)
      if (h.body.running === 'q-long') {
        sawRunning++
        expect(h.body.queue_length).toBe(1)
      }
      await sleep(100)
    }
    expect(sawRunning).toBeGreaterThan(0)
    const running = await call(`${engine.url}/v1/prefill/q-long`)
    expect(running.body.state).toBe('running')
    expect(running.body.prefilled_tokens).toBeLessThan(2500)

    const short = await pollUntil(engine.url, 'q-short')
    const long = await pollUntil(engine.url, 'q-long')
    expect([long.state, short.state]).toEqual(['done', 'done'])
    const order = engine.events().filter((e) => (e.event === 'prefill-start' || e.event === 'prefill-end') && String(e.request_id).startsWith('q-'))
    // One at a time, in arrival order: q-short started only after q-long ended, so it waited.
    // (Not compared with q-long's prefill time: q-short was submitted after q-long started, so its
    // wait is shorter than that by however long the submission came after the start.)
    expect(order.map((e) => `${String(e.event)} ${String(e.request_id)}`)).toEqual(['prefill-start q-long', 'prefill-end q-long', 'prefill-start q-short', 'prefill-end q-short'])
    expect(short.timings.queue).toBeGreaterThan(0)
  })
})

describe('every bad request is a 4xx JSON error naming the problem', () => {
  const json = { 'content-type': 'application/json' }
  const cases: Array<[string, string, string, RequestInit, number, string, string]> = [
    ['bad JSON', 'POST', '/v1/prefill', { headers: json, body: '{"tokens": [1,' }, 400, 'invalid_request_error', 'not valid JSON'],
    ['empty body', 'POST', '/v1/prefill', { headers: json, body: '' }, 400, 'invalid_request_error', 'the request body is empty'],
    ['wrong type', 'POST', '/v1/prefill', { headers: json, body: '{"tokens": "1 2 3"}' }, 400, 'invalid_request_error', 'tokens must be an array'],
    ['unknown field', 'POST', '/v1/prefill', { headers: json, body: '{"tokens": [1], "stream": true}' }, 400, 'invalid_request_error', 'unknown field "stream"'],
    ['empty prompt', 'POST', '/v1/prefill', { headers: json, body: '{"prompt": ""}' }, 400, 'invalid_request_error', 'prompt is empty'],
    ['two prompts', 'POST', '/v1/prefill', { headers: json, body: '{"prompt": "a", "messages": []}' }, 400, 'invalid_request_error', 'not prompt and messages'],
    ['token out of vocab', 'POST', '/v1/prefill', { headers: json, body: '{"tokens": [1, 512]}' }, 400, 'invalid_request_error', 'tokens[1] is number 512, not a token id in [0, 512)'],
    ['too many tokens', 'POST', '/v1/prefill', { headers: json, body: JSON.stringify({ tokens: ids(4097, 5) }) }, 400, 'invalid_request_error', "4097 tokens, more than this engine's --max-tokens (4096)"],
    ['bad request id', 'POST', '/v1/prefill', { headers: json, body: '{"request_id": "../x", "tokens": [1]}' }, 400, 'invalid_request_error', 'request_id the string "../x" must be a string matching'],
    ['duplicate request id', 'POST', '/v1/prefill', { headers: json, body: '{"request_id": "tok-1", "tokens": [1]}' }, 409, 'conflict_error', '"tok-1" is already in use by a done request'],
    ['body too large', 'POST', '/v1/prefill', { headers: json, body: JSON.stringify({ prompt: 'x'.repeat(70_000) }) }, 413, 'request_too_large_error', 'more than the limit of 65536 bytes'],
    ['not JSON content', 'POST', '/v1/prefill', { headers: { 'content-type': 'text/plain' }, body: '{"tokens": [1]}' }, 415, 'unsupported_media_type_error', 'Content-Type "text/plain" is not application/json'],
    ['unknown id', 'GET', '/v1/prefill/never-seen', {}, 404, 'not_found_error', 'no prefill request "never-seen"'],
    ['unknown path', 'GET', '/v2/prefill', {}, 404, 'not_found_error', 'no route GET /v2/prefill'],
    ['wrong method on status', 'PUT', '/v1/prefill/tok-1', {}, 405, 'method_not_allowed_error', 'PUT is not allowed on /v1/prefill/tok-1; allowed: GET, DELETE'],
    ['wrong method on submit', 'GET', '/v1/prefill', {}, 405, 'method_not_allowed_error', 'allowed: POST'],
    ['wrong method on health', 'POST', '/health', { headers: json, body: '{}' }, 405, 'method_not_allowed_error', 'allowed: GET'],
  ]
  it.each(cases)('%s', async (_name, method, path, init, status, type, fragment) => {
    const r = await call(`${engine.url}${path}`, { method, ...init })
    expect(r.status).toBe(status)
    expect(r.headers.get('content-type')).toBe('application/json; charset=utf-8')
    expect(r.body.error.type).toBe(type)
    expect(r.body.error.message).toContain(fragment)
    if (status === 405) expect(r.headers.get('allow')).toBe(fragment.split('allowed: ')[1])
  })

  it('names the field in param, and nothing refused was queued or left a capture directory', async () => {
    const r = await submit(engine.url, { tokens: [1, 2, 999] })
    expect(r.body.error.param).toBe('tokens[2]')
    const health = await call(`${engine.url}/health`)
    expect([health.body.queue_length, health.body.running]).toEqual([0, null])
    expect((await readdir(root)).filter((n) => !n.startsWith('.')).sort()).toEqual(['budget-1', 'q-long', 'q-short', 'text-chat', 'text-prompt', 'tok-1'])
  })
})

describe('SIGTERM stops the engine cleanly', () => {
  it('fails the running capture (never done) and the queued request, releases the lock, exits 0', async () => {
    expect(exists(join(root, LOCK_FILE))).toBe(true)
    await submit(engine.url, { request_id: 'term-run', tokens: ids(3000, 6) })
    await submit(engine.url, { request_id: 'term-wait', tokens: ids(10, 7) })
    await pollUntil(engine.url, 'term-run', (s) => s.state === 'running' && s.prefilled_tokens > 0)
    engine.child.kill('SIGTERM')
    const { code } = await engine.exited
    expect(code).toBe(0)
    const m = await readManifest(join(root, 'term-run'))
    expect(m.state).toBe('failed')
    expect(m.error).toMatch(/^engine shut down \(SIGTERM\) after \d+ of 3000 tokens$/)
    expect(exists(join(root, 'term-wait'))).toBe(false)
    expect(exists(join(root, LOCK_FILE))).toBe(false)
    const end = engine.events().filter((e) => e.event === 'prefill-end' && String(e.request_id).startsWith('term-'))
    expect(end.map((e) => [e.request_id, e.state])).toEqual([['term-run', 'failed']])
    expect(engine.events().at(-1)).toMatchObject({ event: 'stopped', reason: 'SIGTERM' })
  })
})
