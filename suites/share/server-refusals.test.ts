// What the share refuses, and with which status: traversal in every spelling (400), symlinks that
// lead out of the root (403), missing files (404), writes (405). Raw request targets, real server.
import { mkdirSync, symlinkSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { execFileSync } from 'node:child_process'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { ConfigError } from '../../src/errors.ts'
import { startShareServer, type ShareServer } from '../../src/share/index.ts'
import { layerBytes, logCollector, makeCapture, rawRequest, rawSocketStatus, requestFor, tempDir } from './helpers.ts'

const tmp = tempDir('server-refusals')
const root = join(tmp.dir, 'root')
const outside = join(tmp.dir, 'outside')
const logs = logCollector()
let server: ShareServer

beforeAll(async () => {
  mkdirSync(root)
  mkdirSync(outside)
  await makeCapture(root, requestFor('good', 2))
  // A secret outside the root, and a capture-shaped directory outside it.
  writeFileSync(join(outside, 'secret.txt'), 'do not serve')
  await makeCapture(outside, requestFor('elsewhere', 2))
  // A request directory that is a symlink leading out of the root.
  symlinkSync(join(outside, 'elsewhere'), join(root, 'linked-out'))
  // A capture whose layer file is a symlink out of the root, and one whose link stays inside.
  mkdirSync(join(root, 'mixed'))
  symlinkSync(join(outside, 'secret.txt'), join(root, 'mixed', 'layer-000.safetensors'))
  symlinkSync(join(root, 'good', 'layer-001.safetensors'), join(root, 'mixed', 'layer-001.safetensors'))
  symlinkSync(join(root, 'good'), join(root, 'linked-in'))
  // A relative link climbing out, a dangling link, a link loop, a directory and a FIFO under layer names.
  symlinkSync('../../outside/secret.txt', join(root, 'mixed', 'layer-002.safetensors'))
  symlinkSync(join(root, 'absent'), join(root, 'mixed', 'layer-003.safetensors'))
  symlinkSync('layer-005.safetensors', join(root, 'mixed', 'layer-004.safetensors'))
  symlinkSync('layer-004.safetensors', join(root, 'mixed', 'layer-005.safetensors'))
  mkdirSync(join(root, 'mixed', 'layer-006.safetensors'))
  execFileSync('mkfifo', [join(root, 'mixed', 'layer-007.safetensors')])
  writeFileSync(join(root, 'good', 'layer-009.safetensors.partial-1-abc'), layerBytes(9))
  server = await startShareServer({ root, log: logs.log })
})
afterAll(async () => {
  await server.close()
  tmp.remove()
})

describe('traversal and malformed targets -> 400', () => {
  const targets = [
    '/captures/../outside/secret.txt',
    '/captures/good/../../outside/secret.txt',
    '/captures/good/..',
    '/captures/../../../../etc/passwd',
    '/captures/%2e%2e/outside/secret.txt',
    '/captures/%2E%2E/%2E%2E/etc/passwd',
    '/captures/.%2e/secret.txt',
    '/captures/good%2f..%2f..%2foutside/secret.txt',
    '/captures/good/%2e%2e%2fsecret.txt',
    '/captures/good/manifest.json%00',
    '/captures/good/manifest%2ejson',
    '/captures/good\\..\\..\\outside/secret.txt',
    '/captures/..\\outside/secret.txt',
    '/captures/%5c..%5coutside/secret.txt',
    '//etc/passwd',
    '/captures//etc/passwd',
    '/captures/good//manifest.json',
    '/captures/good/./manifest.json',
    '/captures/./good/manifest.json',
    '/captures/good/',
    '/captures/a..b/manifest.json',
    '/captures/.hidden/manifest.json',
    '/captures/good/.manifest.json',
    '/captures/good/secret.txt',
    '/captures/good/layer-1.safetensors',
    '/captures/good/layer-0001.safetensors',
    '/captures/good/layer-000.safetensors.partial-1-abc',
    '/captures/good/layer-009.safetensors.partial-1-abc',
    '/captures/good/LAYER-000.SAFETENSORS',
    '/captures/ba:d/manifest.json',
    `/captures/${'x'.repeat(129)}/manifest.json`,
    'http://127.0.0.1/captures/good/manifest.json',
    '*',
  ]
  it.each(targets)('%s', async (target) => {
    const r = await rawRequest(server.url, target)
    expect(r.status).toBe(400)
    expect(JSON.parse(r.body.toString()).error).toMatch(/\w/)
  })

  it('a raw NUL or space in the target is refused by the parser with 400', async () => {
    expect(await rawSocketStatus(server.url, 'GET /captures/good/manifest.json\u0000 HTTP/1.1\r\nHost: x\r\n\r\n')).toBe(400)
    expect(await rawSocketStatus(server.url, 'GET /captures/good/mani fest.json HTTP/1.1\r\nHost: x\r\n\r\n')).toBe(400)
  })

  it('a target over 1024 characters -> 414', async () => {
    expect((await rawRequest(server.url, '/captures/' + 'a'.repeat(1100))).status).toBe(414)
  })

  it('the same files are served when asked for plainly (so the 400s are about the spelling)', async () => {
    expect((await rawRequest(server.url, '/captures/good/manifest.json')).status).toBe(200)
    expect((await rawRequest(server.url, '/captures/good/manifest.json?cache=no')).status).toBe(200)
  })
})

describe('symlinks leading out of the root -> 403; staying inside is fine', () => {
  it.each([
    ['a request directory linked outside', '/captures/linked-out/manifest.json'],
    ['a layer file linked to a file outside', '/captures/mixed/layer-000.safetensors'],
    ['a relative link climbing out', '/captures/mixed/layer-002.safetensors'],
    ['a link loop', '/captures/mixed/layer-004.safetensors'],
  ])('%s', async (_, target) => {
    const r = await rawRequest(server.url, target)
    expect(r.status).toBe(403)
    expect(r.body.toString()).not.toContain('do not serve')
  })

  it('links that resolve inside the root are served', async () => {
    expect((await rawRequest(server.url, '/captures/mixed/layer-001.safetensors')).status).toBe(200)
    expect((await rawRequest(server.url, '/captures/linked-in/manifest.json')).status).toBe(200)
  })
})

describe('missing or not a file -> 404', () => {
  it.each([
    ['an unknown request id', '/captures/nobody/manifest.json'],
    ['an unlisted layer', '/captures/good/layer-042.safetensors'],
    ['a dangling link', '/captures/mixed/layer-003.safetensors'],
    ['a directory under a layer name', '/captures/mixed/layer-006.safetensors'],
    ['a FIFO under a layer name (and the server does not hang on it)', '/captures/mixed/layer-007.safetensors'],
    ['an unknown route', '/metrics'],
    ['the captures root itself', '/captures'],
    ['a request directory', '/captures/good'],
  ])('%s', async (_, target) => {
    expect((await rawRequest(server.url, target)).status).toBe(404)
  })
})

describe('methods other than GET and HEAD -> 405', () => {
  it.each(['POST', 'PUT', 'DELETE', 'PATCH', 'OPTIONS'])('%s', async (method) => {
    const r = await rawRequest(server.url, '/captures/good/manifest.json', { method })
    expect(r.status).toBe(405)
    expect(r.headers.allow).toBe('GET, HEAD')
  })
})

describe('startShareServer refuses a bad root or port', () => {
  it('names a missing root, a file given as root, and a port out of range', async () => {
    await expect(startShareServer({ root: join(tmp.dir, 'absent') })).rejects.toThrow(ConfigError)
    await expect(startShareServer({ root: join(tmp.dir, 'absent') })).rejects.toThrow(/absent: root: no such directory/)
    await expect(startShareServer({ root: join(outside, 'secret.txt') })).rejects.toThrow(/is not a directory/)
    await expect(startShareServer({ root, port: 70000 })).rejects.toThrow(/port: 70000 is not a TCP port/)
    await expect(startShareServer({ root, port: server.port })).rejects.toThrow(/already in use/)
    await expect(startShareServer({ root, host: '192.0.2.1' })).rejects.toThrow(/host: cannot listen on 192\.0\.2\.1:0: EADDRNOTAVAIL/)
  })
})

describe('every refusal is logged with its status and reason', () => {
  it('has log lines for 400, 403, 404 and 405', () => {
    const statuses = new Set(logs.lines.map((l) => l.status))
    for (const s of [400, 403, 404, 405, 414]) expect(statuses.has(s)).toBe(true)
    expect(logs.lines.filter((l) => l.status >= 400).every((l) => typeof l.reason === 'string' && l.reason.length > 0)).toBe(true)
  })
})
