// The share's waiting conditional GET (src/share/wait.ts, `Prefer: wait=N`), against a real server on
// 127.0.0.1: a matching If-None-Match is held until the capture's directory changes, then answered
// as usual; without the preference, or with a tag that no longer matches, the answer comes at once;
// a wait that sees nothing ends with its 304 after N seconds; closing the server ends every wait.
import { renameSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { startShareServer, type ShareServer } from '../../src/share/index.ts'
import { MAX_WAIT_S, preferredWait } from '../../src/share/wait.ts'
import { logCollector, makeCapture, rawRequest, requestFor, tempDir, type MadeCapture } from './helpers.ts'

const tmp = tempDir('share-wait')
const logs = logCollector()
let server: ShareServer
let capture: MadeCapture
const target = '/captures/wait-1/manifest.json'

beforeAll(async () => {
  capture = await makeCapture(tmp.dir, requestFor('wait-1', 2), { state: 'running' }, 64)
  server = await startShareServer({ root: tmp.dir, log: logs.log })
})
afterAll(async () => {
  await server.close()
  tmp.remove()
})

// As the engine publishes: a temporary file renamed into the capture directory.
function publish (name: string, text: string): void {
  writeFileSync(join(capture.dir, `.${name}.tmp`), text)
  renameSync(join(capture.dir, `.${name}.tmp`), join(capture.dir, name))
}

async function currentTag (): Promise<string> {
  const r = await rawRequest(server.url, target)
  expect(r.status).toBe(200)
  return r.headers.etag as string
}

describe('Prefer: wait=N', () => {
  it('reads the seconds, clamped; anything else asks no wait', () => {
    expect(preferredWait('wait=3')).toBe(3)
    expect(preferredWait('respond-async, wait=5')).toBe(5)
    expect(preferredWait('wait=100000')).toBe(MAX_WAIT_S)
    for (const h of [undefined, '', 'wait=0', 'wait=-1', 'wait=1.5', 'wait', 'handling=lenient', 'waits=3']) expect(preferredWait(h), String(h)).toBeUndefined()
  })

  it('a matching tag is held until the capture changes (another file of it), then answered as usual', async () => {
    const tag = await currentTag()
    let answered = false
    const held = rawRequest(server.url, target, { headers: { 'if-none-match': tag, prefer: `wait=${MAX_WAIT_S}` } }).then((r) => {
      answered = true
      return r
    })
    // Not answered while nothing changes (a 304 at once would have come back by now).
    await new Promise((resolve) => setTimeout(resolve, 300))
    expect(answered).toBe(false)
    publish('segments.json', '{}\n')
    const r = await held
    expect(r.status).toBe(304)
    expect(r.headers['preference-applied']).toBe(`wait=${MAX_WAIT_S}`)
  })

  it('the manifest itself replaced: the held request gets the new bytes (200)', async () => {
    const tag = await currentTag()
    const held = rawRequest(server.url, target, { headers: { 'if-none-match': tag, prefer: 'wait=5' } })
    setTimeout(() => publish('manifest.json', JSON.stringify({ replaced: true }) + '\n'), 50)
    const r = await held
    expect(r.status).toBe(200)
    expect(r.headers.etag).not.toBe(tag)
    expect(JSON.parse(r.body.toString())).toEqual({ replaced: true })
  })

  it('without the preference, or with a stale tag, the answer comes at once and says no wait', async () => {
    const tag = await currentTag()
    const plain = await rawRequest(server.url, target, { headers: { 'if-none-match': tag } })
    expect(plain.status).toBe(304)
    expect(plain.headers['preference-applied']).toBeUndefined()
    const stale = await rawRequest(server.url, target, { headers: { 'if-none-match': '"stale"', prefer: 'wait=5' } })
    expect(stale.status).toBe(200)
    expect(stale.headers['preference-applied']).toBeUndefined()
    const missing = await rawRequest(server.url, '/captures/wait-1/segment-000009.safetensors', { headers: { 'if-none-match': tag, prefer: 'wait=5' } })
    expect(missing.status).toBe(404)
  })

  it('nothing changes: the 304 after the wait, saying it waited', async () => {
    const tag = await currentTag()
    const r = await rawRequest(server.url, target, { headers: { 'if-none-match': tag, prefer: 'wait=1' } })
    expect(r.status).toBe(304)
    expect(r.headers['preference-applied']).toBe('wait=1')
  })

  it('closing the server ends a wait at once', async () => {
    const own = await startShareServer({ root: tmp.dir, log: () => {} })
    const first = await rawRequest(own.url, target)
    const held = rawRequest(own.url, target, { headers: { 'if-none-match': first.headers.etag as string, prefer: `wait=${MAX_WAIT_S}` } })
    await new Promise((resolve) => setTimeout(resolve, 100))
    await own.close()
    expect((await held).status).toBe(304)
  })
})
