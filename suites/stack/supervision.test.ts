// Restarts (issue 17, item 3): with restartOnDeath a child that exits after start-up, with code 0
// too, is started again on the port it had, after a backoff that doubles; one that keeps dying
// past the limit is a death naming it with its log tail; the limit's window is the child's up time,
// so a crash loop whose start-ups are slow is still stopped and a long life clears earlier deaths;
// a stop during a backoff starts nothing.
// Then serve end to end: a request in flight while the prefill engine is SIGKILLed gets the
// native answer (200, verdict declined), the engine comes back on its URL, the record follows its
// new pid, and the next request bridges complete.
import { existsSync, readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { loadTokenizer, type Tokenizer } from '../../src/model/tokenizer/index.ts'
import { chatBody, runLeg } from '../../src/stack/demo/legs.ts'
import { buildDemoPrompt } from '../../src/stack/demo/prompt.ts'
import { Supervisor, withPort, type SupervisorEvent } from '../../src/stack/supervisor.ts'
import { alive, envWith, eventually, startServe, tempDir, type ServeChild } from './helpers.ts'
import { HANG_LIMIT_MS } from '../support/hang-limit.ts'

const tmp = tempDir('stack-supervision')
afterAll(() => tmp.remove())

/**
 * A stand-in server: busy for `startMs` (a slow start-up), then listens on the port after its
 * `--port` (0: any), prints its URL, and exits with `code` after `lifeMs` while the number in
 * `counter` is positive (each run takes one off; at 0 it stays up).
 */
function server (counter: string, lifeMs: number, code: number, startMs = 0): string[] {
  const script = `
    const fs = require('node:fs'); const net = require('node:net')
    Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ${startMs})
    const port = Number(process.argv[process.argv.indexOf('--port') + 1])
    const left = Number(fs.readFileSync(${JSON.stringify(counter)}, 'utf8'))
    fs.writeFileSync(${JSON.stringify(counter)}, String(left - 1))
    const srv = net.createServer((s) => s.end()).listen(port, '127.0.0.1', () => {
      console.log('http://127.0.0.1:' + srv.address().port)
      console.error('run ' + left)
      if (left > 0) setTimeout(() => process.exit(${code}), ${lifeMs})
    })`
  return [process.execPath, '-e', script, '--', '--port', '0']
}

function counterFile (name: string, deaths: number): string {
  const f = join(tmp.dir, `${name}.count`)
  writeFileSync(f, String(deaths))
  return f
}

const FAST = { firstDelayMs: 100, maxDelayMs: 400, limit: 3, windowMs: 60_000 }

describe('withPort', () => {
  it('replaces the value of --port, or appends --port N to args (never to a stand-in argv)', () => {
    expect(withPort({ args: ['share', '--root', 'r', '--port', '0'] }, 4242).args).toEqual(['share', '--root', 'r', '--port', '4242'])
    expect(withPort({ args: ['front', '--config', 'f.json'] }, 8012).args).toEqual(['front', '--config', 'f.json', '--port', '8012'])
    expect(withPort({ args: [], argv: ['node', '-e', 's'] }, 1).argv).toEqual(['node', '-e', 's'])
    expect(withPort({ args: ['x'] }, undefined).args).toEqual(['x'])
  })
})

describe('restartOnDeath', () => {
  it('starts a child that exited with code 0 again on the same port, and reports no death', async () => {
    const events: SupervisorEvent[] = []
    const sup = new Supervisor({ logDir: tmp.dir, graceMs: 1000, onEvent: (e) => events.push(e) })
    sup.restartOnDeath(FAST)
    const deaths: string[] = []
    sup.onDeath((_c, m) => deaths.push(m))
    const first = await sup.start({ name: 'once', args: [], argv: server(counterFile('once', 1), 200, 0) })
    const firstPid = sup.livePids()[0]
    expect(await eventually(() => events.some((e) => e.kind === 'restarted'))).toBe(true)
    const restarting = events.find((e) => e.kind === 'restarting')
    expect(restarting).toMatchObject({ name: 'once', pid: firstPid, exit: { code: 0, signal: null }, port: Number(new URL(first.url).port), attempt: 1, limit: 3, delayMs: 100 })
    const restarted = events.find((e) => e.kind === 'restarted')
    expect(restarted).toMatchObject({ name: 'once', url: first.url, attempt: 1 })
    expect(sup.livePids()).toEqual([(restarted as { pid: number }).pid])
    expect(sup.started[0].ready?.url).toBe(first.url)
    expect(deaths).toEqual([])
    // Both runs append to the one log file. The second run's stderr line comes on another pipe than
    // its ready line (stdout), so it can reach the log after `restarted` (it did once in CI, and the
    // stop then came first): wait for it, then stop.
    const logFile = join(tmp.dir, 'once.log')
    expect(await eventually(() => readFileSync(logFile, 'utf8').includes('"msg":"run 0"'))).toBe(true)
    await sup.stopAll()
    const log = readFileSync(logFile, 'utf8')
    expect(log.match(/"event":"spawn"/g)).toHaveLength(2)
    expect(log).toContain('"msg":"run 1"')
    expect(log).toContain('"msg":"run 0"')
    expect(alive(firstPid)).toBe(false)
  })

  it('doubles the backoff, and a child that keeps dying past the limit is a death naming it with its tail', async () => {
    const events: SupervisorEvent[] = []
    const sup = new Supervisor({ logDir: tmp.dir, graceMs: 1000, onEvent: (e) => events.push(e) })
    sup.restartOnDeath(FAST)
    const deaths: string[] = []
    sup.onDeath((_c, m) => deaths.push(m))
    await sup.start({ name: 'crashy', args: [], argv: server(counterFile('crashy', 100), 100, 3) })
    expect(await eventually(() => deaths.length === 1)).toBe(true)
    const restarts = events.filter((e) => e.kind === 'restarting')
    expect(restarts.map((e) => [e.attempt, e.delayMs])).toEqual([[1, 100], [2, 200], [3, 400]])
    expect(events.filter((e) => e.kind === 'restarted')).toHaveLength(3)
    expect(deaths[0]).toMatch(/^crashy died 4 times within 60 s of up time \(at most 3 restarts are allowed\): giving up, the stack stops\. Its last death: crashy \(pid \d+\) exited with code 3 while the stack was running; last lines of \S+crashy\.log:\n {2}http:\/\/127\.0\.0\.1:\d+\n {2}run 97$/)
    expect(events.filter((e) => e.kind === 'died')).toHaveLength(1)
    await sup.stopAll()
    expect(sup.livePids()).toEqual([])
  })

  it('a restart that fails at start-up counts as another death', async () => {
    const events: SupervisorEvent[] = []
    const sup = new Supervisor({ logDir: tmp.dir, graceMs: 1000, onEvent: (e) => events.push(e) })
    sup.restartOnDeath({ ...FAST, limit: 2 })
    const deaths: string[] = []
    sup.onDeath((_c, m) => deaths.push(m))
    const flag = join(tmp.dir, 'broken.started')
    // The first run serves and exits; every later run fails before its ready line.
    const script = `const fs = require('node:fs'); if (fs.existsSync(${JSON.stringify(flag)})) { console.error('cannot start again'); process.exit(4) }
      fs.writeFileSync(${JSON.stringify(flag)}, ''); console.log('http://127.0.0.1:9'); setTimeout(() => process.exit(0), 100)`
    await sup.start({ name: 'broken', args: [], argv: [process.execPath, '-e', script] })
    expect(await eventually(() => deaths.length === 1)).toBe(true)
    expect(events.filter((e) => e.kind === 'restarting').map((e) => e.attempt)).toEqual([1, 2])
    expect(events.filter((e) => e.kind === 'restarted')).toHaveLength(0)
    expect(deaths[0]).toMatch(/^broken died 3 times within 60 s of up time \(at most 2 restarts are allowed\): giving up, the stack stops\. Its last death: broken exited with code 4 before it was ready; last lines of \S+broken\.log:\n {2}cannot start again$/)
    await sup.stopAll()
  })

  it('a child slow to start is judged by its up time: deaths spread wider than the window in wall time are still a crash loop', async () => {
    const events: SupervisorEvent[] = []
    const sup = new Supervisor({ logDir: tmp.dir, graceMs: 1000, onEvent: (e) => events.push(e) })
    // Each start-up takes longer than the whole window, so three deaths span more than twice the
    // window in wall time; each life after the ready line is 50 ms, far inside it.
    sup.restartOnDeath({ ...FAST, limit: 2, windowMs: 2000 })
    const deaths: string[] = []
    sup.onDeath((_c, m) => deaths.push(m))
    const wallStart = Date.now()
    await sup.start({ name: 'slow-crashy', args: [], argv: server(counterFile('slow-crashy', 100), 50, 3, 2500) })
    expect(await eventually(() => deaths.length === 1)).toBe(true)
    expect(Date.now() - wallStart).toBeGreaterThan(2 * 2000)
    expect(events.filter((e) => e.kind === 'restarting').map((e) => e.attempt)).toEqual([1, 2])
    expect(deaths[0]).toMatch(/^slow-crashy died 3 times within 2 s of up time \(at most 2 restarts are allowed\): giving up/)
    await sup.stopAll()
    expect(sup.livePids()).toEqual([])
  })

  it('a life at least as long as the window clears the earlier deaths: the count and the backoff start over', async () => {
    const events: SupervisorEvent[] = []
    const sup = new Supervisor({ logDir: tmp.dir, graceMs: 1000, onEvent: (e) => events.push(e) })
    // One restart allowed per 300 ms of up time; every life lasts 1.5 s, so none is given up on.
    sup.restartOnDeath({ ...FAST, limit: 1, windowMs: 300 })
    const deaths: string[] = []
    sup.onDeath((_c, m) => deaths.push(m))
    await sup.start({ name: 'steady', args: [], argv: server(counterFile('steady', 3), 1500, 5) })
    expect(await eventually(() => events.filter((e) => e.kind === 'restarted').length === 3)).toBe(true)
    expect(events.filter((e) => e.kind === 'restarting').map((e) => [e.attempt, e.delayMs])).toEqual([[1, 100], [1, 100], [1, 100]])
    expect(deaths).toEqual([])
    await sup.stopAll()
  })

  it('a stop during the backoff starts nothing more', async () => {
    const events: SupervisorEvent[] = []
    const sup = new Supervisor({ logDir: tmp.dir, graceMs: 1000, onEvent: (e) => events.push(e) })
    // A backoff of ten minutes: a stop that waited it out would take that long.
    const backoffMs = 600_000
    sup.restartOnDeath({ ...FAST, firstDelayMs: backoffMs, maxDelayMs: backoffMs })
    await sup.start({ name: 'late', args: [], argv: server(counterFile('late', 1), 100, 1) })
    expect(await eventually(() => events.some((e) => e.kind === 'restarting'))).toBe(true)
    const started = Date.now()
    await sup.stopAll()
    expect(Date.now() - started).toBeLessThan(backoffMs)
    await new Promise((r) => setTimeout(r, 300))
    expect(events.filter((e) => e.kind === 'restarted')).toHaveLength(0)
    expect(sup.livePids()).toEqual([])
    expect(readFileSync(join(tmp.dir, 'late.log'), 'utf8').match(/"event":"spawn"/g)).toHaveLength(1)
  })

  it('without restartOnDeath (the demo) a death is still reported at once', async () => {
    const sup = new Supervisor({ logDir: tmp.dir, graceMs: 1000 })
    const deaths: string[] = []
    sup.onDeath((_c, m) => deaths.push(m))
    await sup.start({ name: 'plain', args: [], argv: server(counterFile('plain', 1), 100, 0) })
    expect(await eventually(() => deaths.length === 1)).toBe(true)
    expect(deaths[0]).toMatch(/^plain \(pid \d+\) exited with code 0 while the stack was running/)
    await sup.stopAll()
  })
})

describe('serve restarts a prefill engine SIGKILLed mid-bridge', () => {
  const state = join(tmp.dir, 'state')
  let serve: ServeChild
  let modelName: string
  let tokenizer: Tokenizer
  const WINDOW_S = Math.round(HANG_LIMIT_MS / 1000)

  beforeAll(async () => {
    // The restart window (up time) above any honest run of these tests, so both kills are counted in it however slow the machine.
    serve = await startServe(['--port', '0'], { ...envWith(state), PD_RESTART_WINDOW_MS: String(HANG_LIMIT_MS) })
    modelName = JSON.parse(readFileSync(join(state, 'run', 'front.json'), 'utf8')).decoder.modelName
    tokenizer = await loadTokenizer(join(state, 'models', 'tiny-seed1'))
  })

  afterAll(async () => {
    if (serve !== undefined && serve.child.exitCode === null && serve.child.signalCode === null) {
      serve.child.kill('SIGKILL')
      await serve.exited
    }
  })

  const prefillPid = (): number => (JSON.parse(readFileSync(join(state, 'stack.json'), 'utf8')).processes as Array<{ name: string, pid: number }>).find((p) => p.name === 'prefill-engine')?.pid as number
  const body = (seed: number): Record<string, unknown> => chatBody(modelName, buildDemoPrompt(tokenizer, 600, seed).messages, 8)

  /** The prefill engine's new pid once it has been restarted, and the front door sees it again. */
  async function restartedFrom (pid: number): Promise<number> {
    expect(await eventually(() => { const p = prefillPid(); return p !== pid && alive(p) })).toBe(true)
    expect(await eventually(async () => {
      const h = await (await fetch(`${serve.ready.front}/health`)).json() as Record<string, any>
      return h.links?.prefill?.ok === true && h.links.prefill.url === serve.ready.prefill && h.bridge?.ready === true
    })).toBe(true)
    return prefillPid()
  }

  it('answers a request whose link check the kill cuts natively (200, declined), and restarts the engine on its port', async () => {
    const pid = prefillPid()
    // Stopped first, so the request is surely waiting on it when it is killed.
    process.kill(pid, 'SIGSTOP')
    const inFlight = runLeg('in-flight', serve.ready.front, body(101), HANG_LIMIT_MS)
    await new Promise((r) => setTimeout(r, 1500))
    process.kill(pid, 'SIGKILL')
    const native = await inFlight
    expect(native.verdict).toMatch(/^declined: prefill engine unreachable/)
    expect(native.completionTokens).toBeGreaterThan(0)
    expect(native.cachedTokens).toBe(0)

    const port = new URL(serve.ready.prefill).port
    expect(await eventually(() => serve.stderr().includes(`pd-bridge serve: prefill-engine (pid ${pid}) was killed by SIGKILL; restarting it on port ${port} in 0.5 s (restart 1 of at most 5 within ${WINDOW_S} s of up time)\n`))).toBe(true)
    await restartedFrom(pid)
    const log = readFileSync(join(state, 'logs', 'serve.log'), 'utf8').split('\n').filter((l) => l !== '').map((l) => JSON.parse(l))
    expect(log.some((r) => r.msg === 'restarting' && r.event.name === 'prefill-engine' && r.event.attempt === 1 && r.event.port === Number(port))).toBe(true)
    expect(log.some((r) => r.msg === 'restarted' && r.event.name === 'prefill-engine' && r.event.url === serve.ready.prefill)).toBe(true)
    expect(serve.stderr()).not.toContain('stopping every process')
  })

  it('answers a request whose prefill job the kill cuts natively (200, declined); after the restart a new request bridges complete', async () => {
    const pid = prefillPid()
    const engineLog = join(state, 'logs', 'prefill-engine.log')
    const before = readFileSync(engineLog, 'utf8').length
    const inFlight = runLeg('mid-bridge', serve.ready.front, body(102), HANG_LIMIT_MS)
    // The engine has the job: freeze it there, then kill it.
    expect(await eventually(() => readFileSync(engineLog, 'utf8').slice(before).includes('"event":"queued"'))).toBe(true)
    process.kill(pid, 'SIGSTOP')
    await new Promise((r) => setTimeout(r, 500))
    process.kill(pid, 'SIGKILL')
    const native = await inFlight
    expect(native.verdict).toMatch(/^declined: /)
    expect(native.completionTokens).toBeGreaterThan(0)
    expect(await eventually(() => serve.stderr().includes(`pd-bridge serve: prefill-engine (pid ${pid}) was killed by SIGKILL; restarting it on port ${new URL(serve.ready.prefill).port} in 1.0 s (restart 2 of at most 5 within ${WINDOW_S} s of up time)\n`))).toBe(true)
    await restartedFrom(pid)
    const bridged = await runLeg('after', serve.ready.front, body(103), HANG_LIMIT_MS)
    expect(bridged.verdict).toMatch(/^complete/)
  })

  it('SIGINT still stops the whole stack and exits 0', async () => {
    const pids = (JSON.parse(readFileSync(join(state, 'stack.json'), 'utf8')).processes as Array<{ pid: number }>).map((p) => p.pid)
    serve.child.kill('SIGINT')
    const [code] = await serve.exited
    expect(code).toBe(0)
    for (const pid of pids) expect(alive(pid)).toBe(false)
    expect(existsSync(join(state, 'stack.json'))).toBe(false)
  })
})
