// The share's HTTP surface for well-formed requests, against a real server on 127.0.0.1: full
// responses, single ranges, 416 for every odd range, conditional requests, ETag stability.
import { createHash } from 'node:crypto'
import { readFileSync, renameSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { startShareServer, type ShareServer } from '../../src/share/index.ts'
import { readManifest } from '../../src/wire/manifest.ts'
import { logCollector, makeCapture, rawRequest, requestFor, tempDir, type MadeCapture } from './helpers.ts'

const tmp = tempDir('server-http')
const logs = logCollector()
let server: ShareServer
let capture: MadeCapture
let size: number
const layerPath = '/captures/http-1/layer-001.safetensors'
const sha = (b: Uint8Array): string => createHash('sha256').update(b).digest('hex')

beforeAll(async () => {
  capture = await makeCapture(tmp.dir, requestFor('http-1', 3), { state: 'done' }, 1000)
  size = capture.layers[1].length
  server = await startShareServer({ root: tmp.dir, log: logs.log })
})
afterAll(async () => {
  await server.close()
  tmp.remove()
})

const get = (headers: Record<string, string> = {}, target = layerPath, method = 'GET') => rawRequest(server.url, target, { method, headers })
const slice = (start: number, end: number): Buffer => Buffer.from(capture.layers[1].subarray(start, end + 1))

describe('GET of a layer file: 200 with ETag, checksum and Accept-Ranges', () => {
  it('sends the exact bytes, the manifest entry\'s SHA-256 and a strong ETag', async () => {
    const r = await get()
    expect(r.status).toBe(200)
    expect(Buffer.compare(r.body, Buffer.from(capture.layers[1]))).toBe(0)
    expect(r.headers['content-length']).toBe(String(size))
    expect(r.headers['accept-ranges']).toBe('bytes')
    expect(r.headers['content-type']).toBe('application/octet-stream')
    const listed = (await readManifest(capture.dir)).layers[1].sha256
    expect(r.headers['x-content-sha256']).toBe(listed)
    expect(r.headers['x-content-sha256']).toBe(sha(capture.layers[1]))
    expect(r.headers.etag).toMatch(/^"[0-9a-f]+-[0-9a-f]+-[0-9a-f]+"$/)
  })

  it('a layer file the manifest does not list (yet) is served without a checksum header', async () => {
    writeFileSync(join(capture.dir, 'layer-007.safetensors'), capture.layers[0])
    const r = await get({}, '/captures/http-1/layer-007.safetensors')
    expect(r.status).toBe(200)
    expect(Buffer.compare(r.body, Buffer.from(capture.layers[0]))).toBe(0)
    expect(r.headers['x-content-sha256']).toBeUndefined()
    expect(r.headers.etag).toMatch(/^"/)
  })

  it('GET of the manifest sends it with the SHA-256 of its own bytes', async () => {
    const r = await get({}, '/captures/http-1/manifest.json')
    expect(r.status).toBe(200)
    expect(r.headers['content-type']).toBe('application/json')
    const onDisk = readFileSync(join(capture.dir, 'manifest.json'))
    expect(Buffer.compare(r.body, onDisk)).toBe(0)
    expect(r.headers['x-content-sha256']).toBe(sha(onDisk))
  })

  it('HEAD sends the same headers and no body', async () => {
    const full = await get()
    const head = await get({}, layerPath, 'HEAD')
    expect(head.status).toBe(200)
    expect(head.body.length).toBe(0)
    for (const h of ['etag', 'content-length', 'x-content-sha256', 'accept-ranges']) expect(head.headers[h]).toBe(full.headers[h])
  })

  it('/health answers 200', async () => {
    const r = await get({}, '/health')
    expect(r.status).toBe(200)
    expect(JSON.parse(r.body.toString())).toEqual({ status: 'ok' })
  })
})

describe('Range: one byte range -> 206 with Content-Range and exactly those bytes', () => {
  const cases: Array<[string, () => [number, number]]> = [
    ['bytes=10-19', () => [10, 19]],
    ['bytes=0-0', () => [0, 0]],
    ['bytes=100-', () => [100, size - 1]],
    ['bytes=-16', () => [size - 16, size - 1]],
    ['bytes=-999999999', () => [0, size - 1]],
    ['bytes=5-999999999', () => [5, size - 1]],
    ['BYTES=1-2', () => [1, 2]],
  ]
  it.each(cases)('%s', async (range, expected) => {
    const [start, end] = expected()
    const r = await get({ range })
    expect(r.status).toBe(206)
    expect(r.headers['content-range']).toBe(`bytes ${start}-${end}/${size}`)
    expect(r.headers['content-length']).toBe(String(end - start + 1))
    expect(Buffer.compare(r.body, slice(start, end))).toBe(0)
    // The checksum header always describes the whole file.
    expect(r.headers['x-content-sha256']).toBe(sha(capture.layers[1]))
  })

  it('ranges over the manifest work the same way', async () => {
    const onDisk = readFileSync(join(capture.dir, 'manifest.json'))
    const r = await get({ range: 'bytes=0-9' }, '/captures/http-1/manifest.json')
    expect(r.status).toBe(206)
    expect(Buffer.compare(r.body, onDisk.subarray(0, 10))).toBe(0)
  })

  it('a unit other than bytes is ignored (RFC 9110 14.2): 200 with the whole file', async () => {
    const r = await get({ range: 'items=0-5' })
    expect(r.status).toBe(200)
    expect(r.body.length).toBe(size)
  })
})

describe('unsatisfiable or absurd ranges -> 416 with Content-Range: bytes */size', () => {
  const cases = [
    'bytes=20-10', // start after end
    'bytes=SIZE-', // start at the size
    'bytes=SIZE-SIZE', // start past the last byte
    'bytes=abc-def', // not numbers
    'bytes=1.5-3',
    'bytes=-', // neither end
    'bytes=-0', // an empty suffix
    'bytes= 1-2 x',
    'bytes=9999999999999999-', // 16 digits: not exact in a double
    'bytes=0-99999999999999999999999',
    'bytes=0-1,4-5', // multiple ranges (a documented choice)
    'bytes=0-1, 0-1',
    'bytes',
  ]
  it.each(cases)('%s', async (spec) => {
    const r = await get({ range: spec.replaceAll('SIZE', String(size)) })
    expect(r.status).toBe(416)
    expect(r.headers['content-range']).toBe(`bytes */${size}`)
    expect(JSON.parse(r.body.toString()).error).toMatch(/\w/)
  })
})

describe('conditional requests', () => {
  it('If-None-Match with the current ETag -> 304, even with a Range', async () => {
    const { headers } = await get()
    const etag = headers.etag as string
    for (const inm of [etag, `W/${etag}`, `"other", ${etag}`, '*']) {
      const r = await get({ 'if-none-match': inm, range: 'bytes=0-3' })
      expect(r.status).toBe(304)
      expect(r.body.length).toBe(0)
      expect(r.headers.etag).toBe(etag)
    }
    expect((await get({ 'if-none-match': '"stale"' })).status).toBe(200)
  })

  it('If-Range with the current ETag honours the Range; a stale tag, a weak tag or a date sends all', async () => {
    const etag = (await get()).headers.etag as string
    const hit = await get({ range: 'bytes=4-7', 'if-range': etag })
    expect(hit.status).toBe(206)
    expect(Buffer.compare(hit.body, slice(4, 7))).toBe(0)
    for (const ifRange of ['"stale"', `W/${etag}`, new Date().toUTCString()]) {
      const miss = await get({ range: 'bytes=4-7', 'if-range': ifRange })
      expect(miss.status).toBe(200)
      expect(miss.body.length).toBe(size)
    }
    // An unsatisfiable range under a stale If-Range is moot: the whole file is sent.
    expect((await get({ range: 'bytes=20-10', 'if-range': '"stale"' })).status).toBe(200)
  })
})

describe('ETag stability', () => {
  it('is the same on every request and across a server restart, and changes when the file is replaced', async () => {
    const first = (await get()).headers.etag
    expect((await get()).headers.etag).toBe(first)
    const again = await startShareServer({ root: tmp.dir, log: () => undefined })
    try {
      expect((await rawRequest(again.url, layerPath)).headers.etag).toBe(first)
    }
    finally {
      await again.close()
    }
    // Same bytes, new file (the way every capture file is written): a new ETag.
    const path = join(capture.dir, 'layer-001.safetensors')
    writeFileSync(path + '.tmp', capture.layers[1])
    renameSync(path + '.tmp', path)
    const replaced = await get()
    expect(replaced.headers.etag).not.toBe(first)
    expect(Buffer.compare(replaced.body, Buffer.from(capture.layers[1]))).toBe(0)
  })

  it('differs between two files of the same size', async () => {
    const a = await get({}, '/captures/http-1/layer-000.safetensors')
    const b = await get({}, '/captures/http-1/layer-002.safetensors')
    expect(a.headers['content-length']).toBe(b.headers['content-length'])
    expect(a.headers.etag).not.toBe(b.headers.etag)
  })
})

describe('request log', () => {
  it('writes one JSON line per request with method, target, status and body bytes', async () => {
    const before = logs.lines.length
    await get({ range: 'bytes=0-9' })
    await get({}, '/captures/http-1/nope')
    await new Promise((resolve) => setTimeout(resolve, 20))
    const added = logs.lines.slice(before)
    expect(added).toHaveLength(2)
    expect(added[0]).toMatchObject({ method: 'GET', target: layerPath, status: 206, bytes: 10, range: 'bytes=0-9', complete: true })
    expect(added[1]).toMatchObject({ status: 400, bytes: expect.any(Number) })
    expect(added[1].reason).toContain('none of manifest.json, segments.json, layer')
  })
})
