// The share with an API key (PD_API_KEY): every capture file is a 401 without the key or with a
// wrong one (before the file system is looked at: a missing capture is a 401 too, not a 404),
// /health stays open and says only ok, and streamCapture with the key's header streams as before.
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { ShareHttpError, startShareServer, streamCapture, type ShareServer } from '../../src/share/index.ts'
import { logCollector, makeCapture, rawRequest, requestFor, tempDir } from './helpers.ts'

const KEY = 'share-test-key-51be'
const tmp = tempDir('share-key')
const logs = logCollector()
let server: ShareServer

beforeAll(async () => {
  server = await startShareServer({ root: tmp.dir, log: logs.log, apiKey: KEY })
  await makeCapture(tmp.dir, requestFor('keyed'))
})
afterAll(async () => {
  await server.close()
  tmp.remove()
})

describe('PD_API_KEY on the share', () => {
  it.each([
    ['no key', {}],
    ['a wrong key', { authorization: 'Bearer wrong' }],
    ['another scheme', { authorization: `Basic ${KEY}` }],
  ])('%s: 401 with WWW-Authenticate for a manifest, a layer, a missing capture and a HEAD', async (_name, headers: Record<string, string>) => {
    for (const [method, target] of [['GET', '/captures/keyed/manifest.json'], ['GET', '/captures/keyed/layer-000.safetensors'], ['GET', '/captures/absent/manifest.json'], ['HEAD', '/captures/keyed/manifest.json']]) {
      const r = await rawRequest(server.url, target, { method, headers })
      expect(r.status, `${method} ${target}`).toBe(401)
      expect(r.headers['www-authenticate']).toBe('Bearer')
      expect(r.headers.etag).toBeUndefined()
      expect(r.headers['x-content-sha256']).toBeUndefined()
      if (method === 'GET') expect(r.body.toString()).not.toContain(KEY)
    }
  })

  it('/health is open and says only ok; with the key files are served', async () => {
    const h = await rawRequest(server.url, '/health')
    expect([h.status, JSON.parse(h.body.toString())]).toEqual([200, { status: 'ok' }])
    const m = await rawRequest(server.url, '/captures/keyed/manifest.json', { headers: { authorization: `Bearer ${KEY}` } })
    expect(m.status).toBe(200)
    expect(JSON.parse(m.body.toString())).toMatchObject({ requestId: 'keyed', state: 'done' })
  })

  it('streamCapture sends the key on every request and streams every layer; without it, a refusal (401, not retried)', async () => {
    const got: number[] = []
    const r = await streamCapture({ ...requestFor('keyed'), baseUrl: server.url, pollMs: 10, headers: { authorization: `Bearer ${KEY}` }, onLayer: (i) => { got.push(i) } })
    expect([r.state, got]).toEqual(['done', [0, 1, 2]])
    const refused = await streamCapture({ ...requestFor('keyed'), baseUrl: server.url, pollMs: 10, onLayer: () => {} }).then(() => undefined, (e: unknown) => e)
    expect(refused).toBeInstanceOf(ShareHttpError)
    expect((refused as ShareHttpError).status).toBe(401)
  })
})
