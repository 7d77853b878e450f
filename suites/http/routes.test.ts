// Every port serves its own routes and nothing else (src/http/route-guard.ts), proved against the
// real stack on loopback (front door, decoder, prefill engine, share as child processes, no key):
// fast-check spells every route of every other server in the ways parsers disagree on (percent-
// encodings in either hex case, dot segments, ./ and ../, double and trailing slashes, encoded and
// raw slashes and backslashes, NUL, case, queries, unicode) and sends each byte for byte; none
// reaches a handler it is not listed for, and the servers' own logs show no work done. No answer,
// body or header, names an absolute path of the deployment. An `Expect: 100-continue` request
// declaring a body over the limit gets its 413 before a body byte is sent.
import { homedir, tmpdir } from 'node:os'
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs'
import { join, resolve } from 'node:path'
import fc from 'fast-check'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { frontConfig, makeArtifacts, startFront, startStack, tempDir, type Artifacts, type Stack } from '../front/stack.ts'
import { expectContinue, rawRequest, type RawAnswer } from './raw-http.ts'

const tmp = tempDir('routes')
let art: Artifacts
let stack: Stack
let front: Awaited<ReturnType<typeof startFront>>
const FRONT_MAX_BODY = 65_536

beforeAll(async () => {
  art = await makeArtifacts(tmp.dir)
  stack = await startStack(tmp.dir, art)
  front = await startFront(tmp.dir, 'routes', frontConfig(stack, { limits: { maxBodyBytes: FRONT_MAX_BODY } }))
})

afterAll(async () => {
  await front?.stop()
  await stack?.stop()
  tmp.remove()
})

interface Route { method: string, path: string }
const r = (method: string, path: string): Route => ({ method, path })

// What each port serves, as docs/front-door.md lists it: the specification these tests hold the servers to.
const SERVED: Record<'front' | 'decoder' | 'engine' | 'share', Route[]> = {
  front: [r('GET', '/health'), r('POST', '/v1/chat/completions'), r('POST', '/v1/completions'), r('GET', '/v1/models'), r('GET', '/v1/models/:id')],
  decoder: [r('GET', '/health'), r('POST', '/v1/chat/completions'), r('POST', '/v1/completions'), r('GET', '/v1/models'), r('GET', '/v1/models/:id'), r('POST', '/v1/cache/rescan')],
  engine: [r('GET', '/health'), r('GET', '/v1/models'), r('POST', '/v1/prefill'), r('GET', '/v1/prefill/:id'), r('DELETE', '/v1/prefill/:id'), r('PUT', '/v1/carry/:id'), r('DELETE', '/v1/carry/:id')],
  share: [r('GET', '/health'), r('GET', '/captures/:id/:file')],
}
const ALL = Object.values(SERVED).flat()
type Port = keyof typeof SERVED
const urlOf = (port: Port): string => ({ front: front.url, decoder: stack.decoder.url, engine: stack.engine.url, share: stack.share.url })[port]

/** The routes of the other servers that `port` does not serve (by path: a port's own /health is its own). */
function internalTo (port: Port): Route[] {
  const served = new Set(SERVED[port].map((x) => x.path))
  const seen = new Set<string>()
  return ALL.filter((x) => !served.has(x.path) && !seen.has(`${x.method} ${x.path}`) && seen.add(`${x.method} ${x.path}`))
}

const concrete = (path: string): string => path.replace(':id', 'tok-1').replace(':file', 'manifest.json')

// ---- spellings -------------------------------------------------------------------------------

const pct = (c: string, lower: boolean): string => [...Buffer.from(c, 'utf8')].map((b) => '%' + (lower ? b.toString(16) : b.toString(16).toUpperCase()).padStart(2, '0')).join('')

type Twist =
  | 'none' | 'double-slash' | 'trailing-slash' | 'encoded-slash' | 'backslash' | 'encoded-backslash' | 'encoded-nul' | 'raw-nul'
  | 'upper-case' | 'raw-unicode' | 'encoded-unicode' | 'dot-end' | 'double-encoded-dot' | 'tab' | 'raw-space'
const TWISTS: Twist[] = ['none', 'double-slash', 'trailing-slash', 'encoded-slash', 'backslash', 'encoded-backslash', 'encoded-nul', 'raw-nul',
  'upper-case', 'raw-unicode', 'encoded-unicode', 'dot-end', 'double-encoded-dot', 'tab', 'raw-space']

const spellingArb = fc.record({
  encode: fc.array(fc.boolean(), { minLength: 64, maxLength: 64 }),
  lowerHex: fc.boolean(),
  dots: fc.array(fc.record({ at: fc.nat(8), kind: fc.constantFrom('./', 'zz/../', '%2e/', '%2E/', 'a%2Fb/../', '%2e%2E/', 'q/%2e%2e/', 'q/.%2E/') }), { maxLength: 3 }),
  twist: fc.constantFrom(...TWISTS),
  at: fc.nat(8),
  query: fc.option(fc.constantFrom('?', '?x=1', '?path=/v1/cache/rescan', '?a=%2F..%2F', '?%00'), { nil: undefined }),
})
interface Spelling { encode: boolean[], lowerHex: boolean, dots: Array<{ at: number, kind: string }>, twist: Twist, at: number, query: string | undefined }

/** A spelling of `path`: each character maybe percent-encoded, dot segments inserted, one twist, maybe a query. */
function spell (path: string, s: Spelling): string {
  let k = 0
  const segments = path.slice(1).split('/').map((seg) => [...seg].map((c) => (s.encode[k++ % 64] ? pct(c, s.lowerHex) : c)).join(''))
  for (const d of s.dots) segments.splice(d.at % (segments.length + 1), 0, d.kind.replace(/\/$/, ''))
  const i = s.at % segments.length
  let sep = (j: number): string => (j === 0 ? '/' : '/')
  switch (s.twist) {
    case 'double-slash': sep = (j) => (j === i ? '//' : '/'); break
    case 'encoded-slash': sep = (j) => (j === i && j > 0 ? (s.lowerHex ? '%2f' : '%2F') : '/'); break
    case 'backslash': sep = (j) => (j === i && j > 0 ? '\\' : '/'); break
    case 'encoded-backslash': sep = (j) => (j === i && j > 0 ? (s.lowerHex ? '%5c' : '%5C') : '/'); break
    case 'encoded-nul': segments[i] += '%00'; break
    case 'raw-nul': segments[i] += '\u0000'; break
    case 'upper-case': segments[i] = segments[i].toUpperCase(); break
    case 'raw-unicode': segments[i] += Buffer.from('é', 'utf8').toString('latin1'); break
    case 'encoded-unicode': segments[i] += pct('é', s.lowerHex); break
    case 'double-encoded-dot': segments.splice(i, 0, '%252e%252e'); break
    case 'tab': segments[i] += '\t'; break
    case 'raw-space': segments[i] += ' x'; break
    default: break
  }
  let out = segments.map((seg, j) => sep(j) + seg).join('')
  if (s.twist === 'trailing-slash') out += '/'
  if (s.twist === 'dot-end') out += s.lowerHex ? '/.' : '/..'
  return out + (s.query ?? '')
}

// ---- what a handler's own answer looks like (never the guard's) ------------------------------

/** Marks of an answer that came from a handler: its success bodies, and the 404s handlers give themselves. */
const HANDLER_MARKS = ['"cache.rescan"', 'no prefill request', 'no such capture file', 'cache_disabled', 'model_not_found', '"request_id"', '"carry_id"', 'geometry_fingerprint', '"chat.completion"', '"text_completion"', 'shutting down']

function expectRefused (port: Port, target: string, a: RawAnswer): void {
  const where = `${port} ${JSON.stringify(target)} -> ${a.status} ${a.body.slice(0, 200)}`
  expect([400, 404, 405, 414], where).toContain(a.status)
  for (const m of HANDLER_MARKS) expect(a.body.includes(m), `${where} carries ${m}`).toBe(false)
  if (a.status === 404) expect(a.body, where).toMatch(/no route|no such route/)
}

// ---- absolute paths --------------------------------------------------------------------------

const INSTALL = resolve(new URL('../..', import.meta.url).pathname)
function deploymentPaths (): string[] {
  return [...new Set([tmp.dir, stack.captureRoot, stack.cacheDir, art.model, art.sidecar, tmpdir(), homedir(), process.cwd(), INSTALL].map((p) => resolve(p)))]
}
const answers: Array<{ what: string, a: RawAnswer }> = []

function expectNoPath (what: string, a: RawAnswer): void {
  for (const p of deploymentPaths()) expect(a.text.includes(p), `${what} names ${p}: ${a.text.slice(0, 400)}`).toBe(false)
}

// Events a handler logs when it works: none may appear while internal routes are tried.
function workDone (): number {
  const decoderLog = readFileSync(join(stack.dir, 'decoder.log'), 'utf8')
  const engineOut = stack.engine.output()
  return ['"event":"rescan"', '"event":"generation"'].reduce((n, m) => n + decoderLog.split(m).length - 1, 0) +
    ['"event":"queued"', '"event":"deleted"', '"event":"carry-received"', '"event":"carry-removed"'].reduce((n, m) => n + engineOut.split(m).length - 1, 0)
}

describe('every port serves its own routes and nothing else', () => {
  it('the oracle can fail: each internal route answers on its own port, and a normalized spelling of a served route is served', async () => {
    const rescan = await rawRequest(stack.decoder.url, 'POST', '/v1/cache/rescan')
    expect(rescan.status).toBe(200)
    expect(rescan.body).toContain('"cache.rescan"')
    answers.push({ what: 'decoder rescan', a: rescan })
    const status = await rawRequest(stack.engine.url, 'GET', '/v1/prefill/tok-1')
    expect(status.body).toContain('no prefill request')
    for (const [port, target] of [['front', '/v1/./models'], ['front', '/v1/x/../%6Dodels'], ['decoder', '/v1/%2e/models'], ['engine', '/v1/%6d%6F%64els?x=1'], ['share', '/health']] as const) {
      const a = await rawRequest(urlOf(port), 'GET', target)
      expect(a.status, `${port} ${target}`).toBe(200)
      answers.push({ what: `${port} GET ${target}`, a })
    }
  })

  for (const port of ['front', 'decoder', 'engine', 'share'] as const) {
    it(`${port}: no spelling of another server's route reaches a handler`, async () => {
      const before = workDone()
      const routes = internalTo(port)
      expect(routes.length).toBeGreaterThan(0)
      await fc.assert(fc.asyncProperty(fc.constantFrom(...routes), spellingArb, async (route, s) => {
        const target = spell(concrete(route.path), s)
        const a = await rawRequest(urlOf(port), route.method, target, { 'content-type': 'application/json' }, route.method === 'POST' || route.method === 'PUT' ? '{}' : '')
        answers.push({ what: `${port} ${route.method} ${JSON.stringify(target)}`, a })
        expectRefused(port, target, a)
      }), { numRuns: 120 })
      expect(workDone()).toBe(before)
    })
  }

  it('the front door forwards the decoder only the normalized spelling of a client route', async () => {
    const a = await rawRequest(front.url, 'GET', `/v1/./x/../models/${encodeURIComponent(stack.modelName).replace('t', '%74')}`)
    expect(a.status).toBe(200)
    expect(JSON.parse(a.body)).toMatchObject({ id: stack.modelName, object: 'model' })
    for (const target of ['/v1/models/..%2Fcache/rescan', '/v1/models%2F..%2Fcache%2Frescan', '/v1/models/%252e%252e/cache/rescan', '/v1/models\\..\\cache\\rescan']) {
      const b = await rawRequest(front.url, 'POST', target, { 'content-type': 'application/json' }, '{}')
      expect(b.status, target).toBe(400)
      expect(JSON.parse(b.body)).toMatchObject({ error: { code: 'invalid_path' } })
    }
  })
})

describe('no absolute path leaves a process without the key', () => {
  it('bodies and headers of health, errors, refusals and reports name no file by its absolute path', async () => {
    // A capture whose manifest cannot be read: the engine's status answer explains the read failure.
    mkdirSync(join(stack.captureRoot, 'broken-1'), { recursive: true })
    writeFileSync(join(stack.captureRoot, 'broken-1', 'manifest.json'), '{ not json')
    const probes: Array<[Port, string, string, string?]> = [
      ['front', 'GET', '/health'], ['decoder', 'GET', '/health'], ['engine', 'GET', '/health'], ['share', 'GET', '/health'],
      ['decoder', 'POST', '/v1/cache/rescan', '{}'], ['decoder', 'GET', '/v1/models'], ['front', 'GET', '/v1/models'],
      ['decoder', 'POST', '/v1/completions', '{"prompt":"hi","model":"nope"}'], ['front', 'POST', '/v1/completions', '{"prompt":"hi","model":"nope"}'],
      ['decoder', 'POST', '/v1/completions', '{not json'], ['engine', 'POST', '/v1/prefill', '{"tokens":"x"}'],
      ['engine', 'GET', '/v1/prefill/broken-1'], ['engine', 'DELETE', '/v1/carry/nothing-here'], ['share', 'GET', '/captures/broken-1/layer-000.safetensors'],
    ]
    for (const [port, method, target, body] of probes) {
      const a = await rawRequest(urlOf(port), method, target, { 'content-type': 'application/json' }, body ?? '')
      expect(a.status, `${port} ${method} ${target}`).toBeGreaterThan(0)
      answers.push({ what: `${port} ${method} ${target}`, a })
    }
    const broken = answers.at(-3)?.a
    expect(broken?.body).toMatch(/manifest cannot be read/)
    const health = JSON.parse(answers.find((x) => x.what === 'decoder GET /health')?.a.body ?? '{}') as Record<string, any>
    expect(health.cache.dir).toBe('<cacheDir>')
    expect(health.model_dir).toBe('<model>')
    expect(answers.length).toBeGreaterThan(400)
    for (const { what, a } of answers) expectNoPath(what, a)
  })
})

describe('Expect: 100-continue over the body limit is refused before the body', () => {
  it('front door, decoder and prefill engine answer 413 to the headers alone; under the limit they ask for the body', async () => {
    const decoderLimit = (JSON.parse((await rawRequest(stack.decoder.url, 'GET', '/health')).body) as { limits: { max_body_bytes: number } }).limits.max_body_bytes
    const cases: Array<[Port, string, number]> = [['front', '/v1/completions', FRONT_MAX_BODY + 1], ['decoder', '/v1/completions', decoderLimit + 1], ['engine', '/v1/prefill', 2 ** 40]]
    for (const [port, target, length] of cases) {
      const a = await expectContinue(urlOf(port), 'POST', target, length)
      expect(a.status, `${port} ${target} ${length}`).toBe(413)
      expect(a.head).not.toMatch(/^HTTP\/1\.1 100/)
      expect(JSON.parse(a.body)).toMatchObject({ error: { type: 'request_too_large_error' } })
      if (port === 'front') expect(a.headers['x-pd-bridge']).toBe('declined: request refused (413)')
      const ok = await expectContinue(urlOf(port), 'POST', target, 2)
      expect(ok.status, `${port} under the limit`).toBe(100)
    }
  })
})
