// The engine watch's progress deadline, driven by a clock the test owns: a real status server on
// 127.0.0.1 answers each poll from a script and moves the clock 0.6 x stallMs per answer, so the
// outcome depends on what the engine reports, never on how fast this machine is.
// The case behind it: transformers on the H200 changes prefilled_tokens once per 4,096-token chunk,
// and a late chunk of a 32K prompt outlasted the 20 s deadline; its hook_rows moves once per layer.
import { createServer, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import { afterEach, describe, expect, it } from 'vitest'
import { EngineWatch, type EngineStatus } from '../../src/front/engine-watch.ts'

const STALL_MS = 20_000

interface Run {
  failure: string | undefined
  sealed: EngineStatus | undefined
  polls: number
}

let server: Server | undefined
afterEach(async () => {
  await new Promise<void>((resolve) => { if (server === undefined) resolve(); else server.close(() => { resolve() }) })
  server = undefined
})

/**
 * Watch one request whose n-th status (0-based) is script(n); the last one repeats. With `delayMs`,
 * each answer leaves that many (real) ms after its poll arrived: an engine busy with a chunk.
 */
async function watch (script: Array<Record<string, unknown>>, opts: { linkMs?: number, delayMs?: number } = {}): Promise<Run> {
  let clock = 0
  let polls = 0
  server = createServer((req, res) => {
    const body = script[Math.min(polls, script.length - 1)]
    polls++
    clock += 0.6 * STALL_MS
    const answer = (): void => {
      res.writeHead(req.url === '/v1/prefill/doc-1' ? 200 : 404, { 'content-type': 'application/json' })
      res.end(JSON.stringify({ request_id: 'doc-1', token_count: 32_768, ...body }))
    }
    if (opts.delayMs === undefined) answer()
    else setTimeout(answer, opts.delayMs)
  })
  await new Promise<void>((resolve) => server!.listen(0, '127.0.0.1', resolve))
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
  return await new Promise<Run>((resolve) => {
    const w: EngineWatch = new EngineWatch({
      url,
      requestId: 'doc-1',
      pollMs: 1,
      linkMs: opts.linkMs ?? 60_000,
      downPolls: 3,
      stallMs: STALL_MS,
      now: () => clock,
      onFailure: (reason) => { resolve({ failure: reason, sealed: undefined, polls }) },
    })
    void w.sealed.then((s) => { resolve({ failure: undefined, sealed: s, polls }) })
    w.start()
  })
}

/** One chunk's polls: prefilled stays at `at` while the hook's rows move (or not). */
function chunk (at: number, polls: number, hookRows: (i: number) => number | undefined): Array<Record<string, unknown>> {
  return Array.from({ length: polls }, (_, i) => {
    const rows = hookRows(i)
    return { state: 'running', sealed_length: 0, prefilled_tokens: at, ...(rows === undefined ? {} : { hook_rows: rows }) }
  })
}

const done = { state: 'done', sealed_length: 32_768, prefilled_tokens: 32_768 }

describe('the engine watch progress deadline', () => {
  it('a chunk longer than the deadline is progress while the hook rows move', async () => {
    const r = await watch([...chunk(12_288, 12, (i) => 4 * 12_288 + i * 4096), done])
    expect(r.failure).toBeUndefined()
    expect(r.sealed).toMatchObject({ state: 'done', sealedLength: 32_768 })
    expect(r.polls).toBe(13)
  })

  it('the same chunk reported without hook rows is a stall (the engine that failed the 32K run)', async () => {
    const r = await watch([...chunk(12_288, 12, () => undefined), done])
    expect(r.failure).toBe("capture stalled: the prefill engine's status of the request did not change for 20000 ms (last status: running, 12288 tokens prefilled)")
    expect(r.polls).toBe(3)
  })

  it('hook rows that stop moving are a stall, named in the reason', async () => {
    const r = await watch([...chunk(12_288, 4, (i) => 49_152 + i * 4096), ...chunk(12_288, 8, () => 61_440), done])
    expect(r.failure).toBe("capture stalled: the prefill engine's status of the request did not change for 20000 ms (last status: running, 12288 tokens prefilled, 61440 hook rows)")
    // The fourth answer moved last (clock 2.4 x stall); the sixth (3.6 x) is the first a full deadline later.
    expect(r.polls).toBe(6)
  })

  it('an engine that answers each poll only after linkMs, but moves, is progress: the poll waits for it', async () => {
    // Each answer comes 200 ms after its poll, 10 times linkMs; every one reports another chunk. A
    // poll that gave up at linkMs saw nothing move and declined the bridge (the 1M-token run).
    const r = await watch([...[512, 1024, 1536, 2048].map((at) => ({ state: 'running', sealed_length: 0, prefilled_tokens: at })), done], { linkMs: 20, delayMs: 200 })
    expect(r.failure).toBeUndefined()
    expect(r.sealed).toMatchObject({ state: 'done', sealedLength: 32_768 })
    expect(r.polls).toBe(5)
  })

  it('one that never answers still stalls at the deadline', async () => {
    // A short deadline here: the poll waits for it (100 ms) before it gives up.
    let clock = 0
    server = createServer(() => { clock += 100 }) // takes each poll, answers none
    await new Promise<void>((resolve) => server!.listen(0, '127.0.0.1', resolve))
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
    const failure = await new Promise<string>((resolve) => {
      new EngineWatch({ url, requestId: 'doc-1', pollMs: 1, linkMs: 20, downPolls: 3, stallMs: 100, now: () => clock, onFailure: resolve }).start()
    })
    expect(failure).toBe("capture stalled: the prefill engine's status of the request did not change for 100 ms (no status seen; last poll: no answer within 100 ms)")
    server.closeAllConnections()
  })
})
