// `pd-bridge prefill-engine` with PD_API_KEY set, as a real child process: every route but a bare
// /health is a 401 without the key or with a wrong one, and /health then says only its status.
// DELETE /v1/prefill/{id} removes a sealed capture's directory (then 404 for it), and refuses a
// running one with 409, leaving it whole.
import { existsSync } from 'node:fs'
import { readdir } from 'node:fs/promises'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { call, startEngine, tempDir, tinyCheckpoint, tinySidecar, type EngineProcess } from './helpers.ts'

const KEY = 'engine-test-key-7f3a'
const tmp = tempDir('prefill-delete')
const root = join(tmp.dir, 'captures')
let engine: EngineProcess
const authed = { authorization: `Bearer ${KEY}` }
const json = { 'content-type': 'application/json' }

beforeAll(async () => {
  engine = await startEngine([
    '--model', await tinyCheckpoint(), '--sidecar', (await tinySidecar()).dir, '--capture-root', root, '--max-chunk', '64', '--max-tokens', '4096',
  ], { PD_API_KEY: KEY })
})
afterAll(async () => {
  if (engine.child.exitCode === null) {
    engine.child.kill('SIGKILL')
    await engine.exited
  }
  tmp.remove()
})

const ids = (n: number, seed: number): number[] => Array.from({ length: n }, (_, i) => (i * 131 + seed * 17 + 3) % 512)
const submit = (body: unknown): ReturnType<typeof call> => call(`${engine.url}/v1/prefill`, { method: 'POST', headers: { ...json, ...authed }, body: JSON.stringify(body) })
const status = (id: string): ReturnType<typeof call> => call(`${engine.url}/v1/prefill/${id}`, { headers: authed })
const remove = (id: string, headers: Record<string, string> = authed): ReturnType<typeof call> => call(`${engine.url}/v1/prefill/${id}`, { method: 'DELETE', headers })

async function until (id: string, done: (s: any) => boolean): Promise<any> {
  for (;;) {
    const s = await status(id)
    if (s.status === 200 && done(s.body)) return s.body
    await new Promise((r) => setTimeout(r, 25))
  }
}

describe('PD_API_KEY on the prefill engine', () => {
  it.each([
    ['no key', {}],
    ['a wrong key', { authorization: 'Bearer not-the-key' }],
    ['the key without Bearer', { authorization: KEY }],
  ])('%s: 401 on submit, status, delete and /v1/models, nothing queued', async (_name, headers: Record<string, string>) => {
    for (const [method, path, body] of [['POST', '/v1/prefill', JSON.stringify({ request_id: 'nokey', tokens: [1, 2] })], ['GET', '/v1/prefill/nokey'], ['DELETE', '/v1/prefill/nokey'], ['GET', '/v1/models']] as const) {
      const r = await call(`${engine.url}${path}`, { method, headers: { ...json, ...headers }, body })
      expect(r.status, `${method} ${path}`).toBe(401)
      expect(r.headers.get('www-authenticate')).toBe('Bearer')
      expect(r.body.error.type).toBe('authentication_error')
      expect(r.body.error.message).not.toContain(KEY)
    }
    expect(existsSync(join(root, 'nokey'))).toBe(false)
  })

  it('/health without the key says only its status; with the key the whole report', async () => {
    expect((await call(`${engine.url}/health`)).body).toEqual({ status: 'ok' })
    const full = await call(`${engine.url}/health`, { headers: authed })
    expect(full.body).toMatchObject({ status: 'ok', model: 'tiny', queue_length: 0 })
  })
})

describe('DELETE /v1/prefill/{id}', () => {
  it('refuses a running capture with 409 and leaves it whole; once done, deletes it (then 404)', async () => {
    expect((await submit({ request_id: 'del-long', tokens: ids(2500, 3) })).status).toBe(202)
    await until('del-long', (s) => s.state === 'running' && s.prefilled_tokens > 0)
    const refused = await remove('del-long')
    expect(refused.status).toBe(409)
    expect(refused.body.error).toMatchObject({ type: 'conflict_error' })
    expect(refused.body.error.message).toContain('running')
    const done = await until('del-long', (s) => s.state !== 'queued' && s.state !== 'running')
    expect(done.state).toBe('done')
    expect(existsSync(join(root, 'del-long', 'manifest.json'))).toBe(true)

    const deleted = await remove('del-long')
    expect(deleted).toMatchObject({ status: 200, body: { request_id: 'del-long', deleted: true } })
    expect(existsSync(join(root, 'del-long'))).toBe(false)
    // Nothing half-deleted is left under the root.
    expect((await readdir(root)).filter((n) => n.startsWith('.deleting-'))).toEqual([])
    expect((await status('del-long')).status).toBe(404)
    expect((await remove('del-long')).status).toBe(404)
    expect(engine.events().some((e) => e.event === 'deleted' && e.request_id === 'del-long')).toBe(true)
  })

  it('refuses a queued request with 409; an unknown id is 404; a delete without the key is 401 and deletes nothing', async () => {
    expect((await submit({ request_id: 'del-a', tokens: ids(2500, 4) })).status).toBe(202)
    expect((await submit({ request_id: 'del-b', tokens: ids(100, 5) })).status).toBe(202)
    expect((await status('del-b')).body.state).toBe('queued')
    expect((await remove('del-b')).status).toBe(409)
    expect((await remove('never-submitted')).status).toBe(404)
    await until('del-b', (s) => s.state === 'done')
    expect((await remove('del-b', {})).status).toBe(401)
    expect(existsSync(join(root, 'del-b', 'manifest.json'))).toBe(true)
    expect((await remove('del-b')).status).toBe(200)
    expect(existsSync(join(root, 'del-b'))).toBe(false)
    expect((await remove('del-a')).status).toBe(200)
  })
})
