// The front door's links to a decoder under load, in process against a stand-in decoder (a real
// HTTP server): a decoder whose /health misses the link deadline while it decodes is busy, not
// dead, so bridges still run; a dead one (connection refused) is still a problem; and a kept-alive
// socket the decoder closes under a request (its idle timer firing as the request is written) never
// turns a client's request into a 502. Every wait is on a state, never on elapsed time.
import { once } from 'node:events'
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http'
import type { AddressInfo, Socket } from 'node:net'
import { join } from 'node:path'
import pino from 'pino'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { frontConfigSchema } from '../../src/config/index.ts'
import { startFrontDoor, type FrontDoor } from '../../src/front/server.ts'
import { BLOCK, makeArtifacts, tempDir, waitFor, type Artifacts } from './stack.ts'

const MODEL = 'tiny-under-load'

/** A stand-in decoder: answers like the embedded one; /health can be held, and connections can serve one request each. */
interface StandIn {
  url: string
  hits: string[]
  /** Hold every GET /health unanswered (the decoder is busy) until this is set false again. */
  holdHealth: boolean
  /** Drop, unanswered, any request that arrives on a connection that already served one (a stale kept-alive socket). */
  onePerConnection: boolean
  /** Requests that met a closed connection. */
  dropped: number
  close: () => Promise<void>
}

async function startStandIn (): Promise<StandIn> {
  const held: ServerResponse[] = []
  const served = new WeakSet<Socket>()
  const json = (res: ServerResponse, status: number, body: unknown): void => {
    res.writeHead(status, { 'content-type': 'application/json' })
    res.end(JSON.stringify(body))
  }
  const server: Server = createServer((req: IncomingMessage, res: ServerResponse) => {
    if (state.onePerConnection && served.has(req.socket)) {
      state.dropped++
      req.socket.destroy()
      return
    }
    served.add(req.socket)
    const chunks: Buffer[] = []
    req.on('data', (c: Buffer) => chunks.push(c))
    req.on('end', () => {
      const path = (req.url ?? '').split('?')[0]
      state.hits.push(`${req.method} ${path}`)
      if (path === '/health') {
        if (state.holdHealth) held.push(res)
        else json(res, 200, { status: 'ok', model: MODEL, profile: 'decoder', max_position_embeddings: 4096, limits: { max_tokens: 64 }, cache: { block_size: BLOCK } })
        return
      }
      if (path.endsWith('/health')) return json(res, 200, { status: 'ok' })
      if (path === '/v1/models') return json(res, 200, { object: 'list', data: [{ id: MODEL, object: 'model', owned_by: 'pd-bridge' }] })
      if (path === '/v1/completions') {
        return json(res, 200, { id: 'cmpl-1', object: 'text_completion', model: MODEL, choices: [{ index: 0, text: 'ok', finish_reason: 'stop' }], usage: { prompt_tokens: 1, completion_tokens: 1, total_tokens: 2, prompt_tokens_details: { cached_tokens: 0 } } })
      }
      json(res, 404, { error: { message: `no route ${req.method} ${path}`, type: 'not_found_error', param: null, code: 'unknown_route' } })
    })
  })
  // Advertise a long keep-alive, so the client keeps the socket and the stand-in decides when it is stale.
  server.keepAliveTimeout = 600_000
  server.listen(0, '127.0.0.1')
  await once(server, 'listening')
  const state: StandIn = {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    hits: [],
    holdHealth: false,
    onePerConnection: false,
    dropped: 0,
    close: async () => {
      for (const res of held) res.destroy()
      server.closeAllConnections()
      await new Promise<void>((resolve) => server.close(() => resolve()))
    },
  }
  return state
}

let tmp: ReturnType<typeof tempDir>
let art: Artifacts
const fronts: FrontDoor[] = []
const standIns: StandIn[] = []

beforeAll(async () => {
  tmp = tempDir('front-under-load')
  art = await makeArtifacts(tmp.dir)
})

afterAll(async () => {
  for (const f of fronts) await f.close()
  for (const s of standIns) await s.close()
  tmp?.remove()
})

async function standIn (): Promise<StandIn> {
  const s = await startStandIn()
  standIns.push(s)
  return s
}

async function front (decoder: StandIn, decoderBusyMs?: number): Promise<FrontDoor> {
  const config = frontConfigSchema.parse({
    listen: { host: '127.0.0.1', port: 0 },
    decoder: { url: decoder.url, model: art.model, modelName: MODEL, cacheDir: join(tmp.dir, `cache-${fronts.length}`), blockSize: BLOCK },
    // Paths of their own on the stand-in, so a bridge that went past its link checks shows in its hits.
    prefill: { url: `${decoder.url}/prefill` },
    share: { url: `${decoder.url}/share` },
    sidecar: art.sidecar,
    routing: { minTokens: 2 * BLOCK, minTail: BLOCK, maxBridgeTokens: 8192 },
    deadlines: { linkMs: 2000, ...(decoderBusyMs !== undefined ? { decoderBusyMs } : {}) },
    log: { level: 'silent' },
  })
  const f = await startFrontDoor({ config, logger: pino({ level: 'silent' }) })
  fronts.push(f)
  return f
}

async function health (f: FrontDoor): Promise<{ status: number, body: any }> {
  const res = await fetch(`${f.url}/health`)
  return { status: res.status, body: await res.json() }
}

async function complete (f: FrontDoor, prompt: string): Promise<{ status: number, verdict: string | null }> {
  const res = await fetch(`${f.url}/v1/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ prompt, max_tokens: 4 }) })
  await res.arrayBuffer()
  return { status: res.status, verdict: res.headers.get('x-pd-bridge') }
}

/** A prompt over two blocks (routed to a bridge), fresh per seed. */
const coldPrompt = (seed: number): string => Array.from({ length: 1000 }, (_, i) => ['alpha', 'river', 'stone', 'cloud', 'maple', 'seven'][(i * 7 + seed) % 6] + (i % 50 === seed % 50 ? ` s${seed}` : '')).join(' ')
const submits = (s: StandIn): number => s.hits.filter((h) => h === 'POST /prefill/v1/prefill').length

describe('a busy decoder is not a dead one', () => {
  it('never heard from and busy: declined (nothing to check against); heard from, then busy: bridges still run and /health stays 200; dead: unreachable', async () => {
    const decoder = await standIn()
    decoder.holdHealth = true
    const f = await front(decoder)

    // Busy from the start: the front door has no facts of it to check a bridge against.
    const first = await complete(f, coldPrompt(1))
    expect(first.status).toBe(200)
    expect(first.verdict).toMatch(/^declined: decoder not answering: .*it accepts connections, so it is busy, not down/)
    expect(submits(decoder)).toBe(0)

    // It answers once: its facts are known.
    decoder.holdHealth = false
    await waitFor(async () => (await health(f)).status === 200 ? true : undefined)

    // Busy again (its /health misses the deadline, as while it decodes a batch under load).
    decoder.holdHealth = true
    const h = await health(f)
    expect(h.status).toBe(200)
    expect(h.body.status).toBe('degraded')
    expect(h.body.links.decoder).toMatchObject({ ok: false, busy: true, model: MODEL, blockSize: BLOCK })
    expect(h.body.bridge.problems.filter((p: string) => p.startsWith('decoder'))).toEqual([])
    const second = await complete(f, coldPrompt(2))
    expect(second.status).toBe(200)
    expect(second.verdict).not.toMatch(/decoder/)
    // The bridge went past its link checks to the prefill engine's submit.
    expect(submits(decoder)).toBe(1)

    // Dead: the port refuses connections. Busy-ness is never assumed for it.
    await decoder.close()
    const dead = await health(f)
    expect(dead.status).toBe(503)
    expect(dead.body.links.decoder.busy).toBeUndefined()
    expect(dead.body.bridge.problems[0]).toMatch(/^decoder unreachable: .*connection refused/)
    const third = await complete(f, coldPrompt(3))
    expect(third.status).toBe(502)
    expect(third.verdict).toMatch(/^declined: decoder unreachable/)
  })
})

describe('busy lasts deadlines.decoderBusyMs from the last answer', () => {
  it('a decoder that stops answering for longer is down: 503, and bridges are declined', async () => {
    const decoder = await standIn()
    // 1 ms: any held /health (it waits linkMs, 2 s) ends past it, so the state decides, not a clock race.
    const f = await front(decoder, 1)
    expect((await health(f)).status).toBe(200)
    decoder.holdHealth = true
    const hung = await health(f)
    expect(hung.status).toBe(503)
    expect(hung.body.status).toBe('down')
    expect(hung.body.bridge.problems[0]).toMatch(/^decoder not answering: /)
    const cold = await complete(f, coldPrompt(4))
    expect(cold.verdict).toMatch(/^declined: decoder not answering/)
    expect(submits(decoder)).toBe(0)
  })
})

describe('a kept-alive socket the decoder closes under a request', () => {
  it('a forwarded request goes on a connection of its own (200, never 502); a link check that meets a closed socket asks once more', async () => {
    const decoder = await standIn()
    decoder.onePerConnection = true
    const f = await front(decoder)
    // The link checks leave kept-alive sockets to the decoder in the front door's pool.
    expect((await health(f)).status).toBe(200)
    const short = await complete(f, 'a short prompt')
    expect(short).toEqual({ status: 200, verdict: expect.stringMatching(/^declined: /) })
    expect(decoder.hits.filter((h) => h === 'POST /v1/completions')).toHaveLength(1)
    // The next checks meet those sockets closed: asked again on fresh connections, they answer.
    const again = await health(f)
    expect(again.status).toBe(200)
    expect(again.body.links.decoder.ok).toBe(true)
    expect(decoder.dropped).toBeGreaterThan(0)
    expect((await complete(f, 'another short prompt')).status).toBe(200)
  })
})
