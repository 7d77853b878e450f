// `pd-bridge serve` as a real child process: it starts every part of the embedded stack, the front
// door's /health reports each link, doctor passes on it and names a stopped decoder, a second
// serve on the same state is refused, `serve --config` runs the front door alone, SIGINT stops
// every child, a child dying mid-run is restarted on its port until it dies past the limit (the
// restart policy set from the environment), which stops the stack, a bad restart setting is refused
// before anything starts, a SIGKILLed supervisor leaves no orphans,
// and a child that dies at start-up is named with its log tail.
import { readFileSync, readdirSync, existsSync, rmSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { exportWeights } from '../../src/capture/index.ts'
import { alive, envWith, eventually, runCli, startServe, tempDir, type ServeChild } from './helpers.ts'
import { HANG_LIMIT_MS } from '../support/hang-limit.ts'

const tmp = tempDir('stack-serve')
const state = join(tmp.dir, 'state')
// A block key in the shell reaches every child (the stack passes it on): doctor's `blocks` check
// then finds the decoder authenticating blocks with the key this shell derives.
const env = { ...envWith(state), PD_BLOCK_KEY: 'serve-test-block-key' }
let serve: ServeChild
let record: Record<string, any>

beforeAll(async () => {
  serve = await startServe(['--port', '0'], env)
  record = JSON.parse(readFileSync(join(state, 'stack.json'), 'utf8'))
})

afterAll(async () => {
  if (serve.child.exitCode === null && serve.child.signalCode === null) {
    serve.child.kill('SIGKILL')
    await serve.exited
  }
  tmp.remove()
})

function pidOf (name: string): number {
  return record.processes.find((p: { name: string }) => p.name === name).pid
}

describe('serve starts the embedded stack', () => {
  it('prints one JSON ready line with every URL, and records four live children', () => {
    expect(serve.ready).toMatchObject({ event: 'ready', state_dir: state, logs: join(state, 'logs') })
    for (const key of ['url', 'front', 'prefill', 'share', 'decoder']) expect(serve.ready[key]).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/)
    expect(serve.ready.url).toBe(serve.ready.front)
    expect(record.processes.map((p: { name: string }) => p.name)).toEqual(['prefill-engine', 'share', 'decoder', 'front'])
    expect(record.supervisorPid).toBe(serve.child.pid)
    for (const p of record.processes) expect(alive(p.pid)).toBe(true)
    expect(serve.stderr()).toMatch(/checkpoint +made +\S+models\/tiny-seed1/)
  })

  it('writes one log file per process, every line a JSON object', () => {
    const files = readdirSync(join(state, 'logs')).sort()
    expect(files).toEqual(['decoder.log', 'front.log', 'prefill-engine.log', 'serve.log', 'share.log'])
    for (const f of files) {
      const lines = readFileSync(join(state, 'logs', f), 'utf8').split('\n').filter((l) => l !== '')
      expect(lines.length).toBeGreaterThan(0)
      for (const l of lines) expect(typeof JSON.parse(l)).toBe('object')
    }
    // The share prints its URL as a bare line; the log holds it wrapped in a record.
    const share = readFileSync(join(state, 'logs', 'share.log'), 'utf8').split('\n').filter((l) => l !== '').map((l) => JSON.parse(l))
    expect(share.some((r) => r.msg === serve.ready.share && r.stream === 'stdout')).toBe(true)
  })

  it('the front door\'s /health reports every link up', async () => {
    const res = await fetch(`${serve.ready.front}/health`)
    const h = await res.json() as Record<string, any>
    expect(res.status).toBe(200)
    expect(h.status).toBe('ok')
    expect(h.links.decoder).toMatchObject({ ok: true, url: serve.ready.decoder })
    expect(h.links.prefill).toMatchObject({ ok: true, url: serve.ready.prefill })
    expect(h.links.share).toMatchObject({ ok: true, url: serve.ready.share })
    expect(h.links.store.ok).toBe(true)
    expect(h.links.sidecar.ok).toBe(true)
    expect(h.bridge).toEqual({ ready: true, problems: [] })
  })
})

describe('doctor', () => {
  it('passes every check on the running stack', async () => {
    const r = await runCli(['doctor'], env)
    expect(r.stderr).toBe('')
    expect(r.code).toBe(0)
    const lines = r.stdout.trim().split('\n')
    expect(lines[0]).toBe(`pd-bridge doctor: embedded stack in ${state} (supervisor pid ${serve.child.pid})`)
    const checks = lines.slice(1, -1)
    expect(checks.map((l) => l.trim().split(/\s{2,}/)[1])).toEqual(['config', 'processes', 'front door', 'decoder', 'prefill engine', 'share', 'sidecar', 'versions', 'geometry', 'limits', 'store', 'blocks', 'spool', 'clocks'])
    for (const l of checks) expect(l).toMatch(/^ {2}ok {4}/)
    expect(lines.at(-1)).toBe('verdict: healthy: 14 checks passed')
    expect(r.stdout).toMatch(/ {2}ok {4}blocks +blocks are authenticated: HMAC-SHA-256 under the block key \(key id [0-9a-f]{16}, from PD_BLOCK_KEY\) written and checked before use; this environment has the same key\n/)
    expect(r.stdout).not.toContain('serve-test-block-key')
  })

  it('names a stopped decoder and fails', async () => {
    const decoder = pidOf('decoder')
    process.kill(decoder, 'SIGSTOP')
    let r
    try {
      r = await runCli(['doctor', '--timeout', '1500'], env)
    }
    finally {
      process.kill(decoder, 'SIGCONT')
    }
    expect(r.code).toBe(1)
    expect(r.stdout).toContain(`  FAIL  decoder         ${serve.ready.decoder}: no answer within 1500 ms`)
    // The front door answers, degraded: its decoder accepts connections and answered moments ago, so it
    // is busy until deadlines.decoderBusyMs (front/decoder-under-load shows it down past that); only the decoder is a failure.
    expect(r.stdout).toMatch(/ {2}warn {2}front door {6}\S+ answers \(HTTP 200\) with status "degraded"/)
    expect(r.stdout).toMatch(/ {2}ok {4}prefill engine/)
    expect(r.stdout.trim().split('\n').at(-1)).toBe('verdict: FAILED, 1 of 14 checks failed: decoder')
  })

  it('with --json prints the same report as data', async () => {
    const r = await runCli(['doctor', '--json'], env)
    expect(r.code).toBe(0)
    const report = JSON.parse(r.stdout)
    expect(report.ok).toBe(true)
    expect(report.checks).toHaveLength(14)
    expect(report.checks.every((c: { status: string }) => c.status === 'pass')).toBe(true)
  })

  it('fails the geometry when the config\'s sidecar was exported for another profile', async () => {
    const other = join(tmp.dir, 'sidecar-f32')
    await exportWeights({ model: join(state, 'models', 'tiny-seed1'), profile: 'f32', out: other, blockSize: 256 })
    const config = JSON.parse(readFileSync(join(state, 'run', 'front.json'), 'utf8'))
    config.sidecar = other
    const file = join(tmp.dir, 'front-f32.json')
    writeFileSync(file, JSON.stringify(config))
    const r = await runCli(['doctor', '--config', file], env)
    expect(r.code).toBe(1)
    expect(r.stdout).toMatch(/ {2}FAIL {2}versions +the sidecar's profile f32 v\d+ is not this build's decoder/)
    expect(r.stdout).toMatch(/ {2}FAIL {2}geometry +the sidecar gives geometry \w{12} but the decoder's is \w{12} \(another rope table, window or profile: every bridged block would be a miss\); the prefill engine pools with sidecar/)
    expect(r.stdout.trim().split('\n').at(-1)).toBe('verdict: FAILED, 2 of 13 checks failed: versions, geometry')
  })
})

describe('a second serve on the same state directory', () => {
  it('is refused with a sentence naming the running one', async () => {
    const r = await runCli(['serve', '--port', '0'], env)
    expect(r.code).toBe(2)
    expect(r.stderr).toContain(`pd-bridge: a stack is already running from ${state} (pid ${serve.child.pid}, front door ${serve.ready.front}); stop it first`)
  })
})

describe('serve --config', () => {
  it('runs the front door alone for a deployment whose engines run elsewhere', async () => {
    const config = JSON.parse(readFileSync(join(state, 'run', 'front.json'), 'utf8'))
    config.listen.port = 0
    const file = join(tmp.dir, 'front-only.json')
    writeFileSync(file, JSON.stringify(config))
    const other = join(tmp.dir, 'front-only-state')
    const front = await startServe(['--config', file, '--state-dir', other], env)
    try {
      expect(Object.keys(front.ready).sort()).toEqual(['event', 'front', 'logs', 'pid', 'state_dir', 'url'])
      expect(front.ready.url).not.toBe(serve.ready.front)
      const h = await (await fetch(`${front.ready.url}/health`)).json() as Record<string, any>
      expect(h.status).toBe('ok')
      expect(h.links.decoder.url).toBe(serve.ready.decoder)
      expect(readdirSync(join(other, 'logs')).sort()).toEqual(['front.log', 'serve.log'])
    }
    finally {
      front.child.kill('SIGTERM')
    }
    expect((await front.exited)[0]).toBe(0)
  })

  it('refuses a restart setting that does not validate before starting anything, naming its variable', async () => {
    const other = join(tmp.dir, 'restart-state')
    const r = await runCli(['serve', '--port', '0', '--state-dir', other], { ...env, PD_RESTART_LIMIT: 'many' })
    expect(r.code).toBe(2)
    expect(r.stderr).toBe('pd-bridge: environment: restarts.limit: PD_RESTART_LIMIT="many" is not a non-negative decimal integer\n')
    expect(existsSync(join(other, 'models'))).toBe(false)
    expect(existsSync(join(other, 'stack.json'))).toBe(false)
  })

  it('refuses a config that does not validate before starting anything', async () => {
    const file = join(tmp.dir, 'bad-front.json')
    writeFileSync(file, JSON.stringify({ decoder: {} }))
    const r = await runCli(['serve', '--config', file, '--state-dir', join(tmp.dir, 'bad-state')], env)
    expect(r.code).toBe(2)
    expect(r.stderr).toBe(`pd-bridge: ${file}: decoder.url: is required\n`)
  })
})

describe('SIGINT', () => {
  it('stops every child, newest first, exits 0 and removes the record', async () => {
    const pids = record.processes.map((p: { pid: number }) => p.pid)
    serve.child.kill('SIGINT')
    const [code] = await serve.exited
    expect(code).toBe(0)
    for (const pid of pids) expect(alive(pid)).toBe(false)
    expect(existsSync(join(state, 'stack.json'))).toBe(false)
    const order = [...serve.stderr().matchAll(/serve: (\S+) +stopped \(exit 0\)/g)].map((m) => m[1])
    expect(order).toEqual(['front', 'decoder', 'share', 'prefill-engine'])
    expect(serve.stderr().trim().split('\n').at(-1)).toBe('pd-bridge serve: stopped')
  })
})

describe('a child that dies while the stack runs', () => {
  it('is restarted on its port (an exit with code 0 too); one that keeps dying past the limit stops the stack, and serve exits 1 naming it with its log tail', async () => {
    // The policy from the environment (docs/configuration.md, `restarts`): shorter backoffs than the
    // defaults, and a window of up time above any honest run of this test, so the six deaths are a
    // crash loop however slow each restart is on a loaded machine.
    const restartEnv = { ...env, PD_RESTART_DELAY_MS: '100', PD_RESTART_MAX_DELAY_MS: '800', PD_RESTART_WINDOW_MS: String(HANG_LIMIT_MS) }
    const windowS = Math.round(HANG_LIMIT_MS / 1000)
    const again = await startServe(['--port', '0'], restartEnv)
    const processes = (): Array<{ name: string, pid: number }> => JSON.parse(readFileSync(join(state, 'stack.json'), 'utf8')).processes
    const sharePid = (): number => (processes().find((p) => p.name === 'share') as { pid: number }).pid
    const others = processes().filter((p) => p.name !== 'share').map((p) => p.pid)
    const port = new URL(again.ready.share).port
    const seen: number[] = []
    const delays = ['0.1', '0.2', '0.4', '0.8', '0.8']
    for (let n = 1; n <= 6; n++) {
      const pid = sharePid()
      seen.push(pid)
      // The first stop is a clean one: SIGTERM, the share closes and exits 0, and is restarted all the same.
      process.kill(pid, n === 1 ? 'SIGTERM' : 'SIGKILL')
      if (n === 6) break
      const how = n === 1 ? 'exited with code 0' : 'was killed by SIGKILL'
      expect(await eventually(() => again.stderr().includes(`pd-bridge serve: share (pid ${pid}) ${how}; restarting it on port ${port} in ${delays[n - 1]} s (restart ${n} of at most 5 within ${windowS} s of up time)\n`))).toBe(true)
      // Back on the same URL: the front door's link to it is up again.
      expect(await eventually(() => sharePid() !== pid && alive(sharePid()))).toBe(true)
      expect(await eventually(async () => {
        const h = await (await fetch(`${again.ready.front}/health`)).json() as Record<string, any>
        return h.links?.share?.ok === true && h.links.share.url === again.ready.share
      })).toBe(true)
      for (const p of others) expect(alive(p)).toBe(true)
    }
    const [code] = await again.exited
    expect(code).toBe(1)
    expect(again.stderr()).toContain(`pd-bridge serve: share died 6 times within ${windowS} s of up time (at most 5 restarts are allowed): giving up, the stack stops. Its last death: share (pid ${seen[5]}) was killed by SIGKILL while the stack was running; last lines of ${join(state, 'logs', 'share.log')}:\n  ${again.ready.share}`)
    expect(again.stderr().trim().split('\n').at(-1)).toBe('pd-bridge serve: stopped')
    for (const p of [...others, ...seen]) expect(alive(p)).toBe(false)
    expect(existsSync(join(state, 'stack.json'))).toBe(false)
  })
})

describe('a supervisor killed with SIGKILL', () => {
  it('leaves no orphans: every child stops itself once its channel to the supervisor closes', async () => {
    const again = await startServe(['--port', '0'], env)
    // The checkpoint and sidecar of the first start are reused.
    expect(again.stderr()).toMatch(/checkpoint +reusing/)
    expect(again.stderr()).toMatch(/sidecar +reusing/)
    const pids = JSON.parse(readFileSync(join(state, 'stack.json'), 'utf8')).processes.map((p: { pid: number }) => p.pid)
    expect(pids).toHaveLength(4)
    again.child.kill('SIGKILL')
    await again.exited
    expect(await eventually(() => pids.every((pid: number) => !alive(pid)))).toBe(true)
    // Its record is stale now: doctor says so, and a new serve may start.
    const r = await runCli(['doctor', '--timeout', '500'], env)
    expect(r.code).toBe(1)
    expect(r.stdout).toMatch(/FAIL {2}processes +the supervisor \(pid \d+\) is not running; stack.json is stale/)
  })
})

describe('a child that dies at start-up', () => {
  it('is named with its log tail, and the children started before it are stopped', async () => {
    // The front door starts last; a log file it cannot create (under a regular file) kills it at
    // start-up, after the other three are ready. (A busy port is caught before any child starts.)
    const blocker = join(tmp.dir, 'a-regular-file')
    writeFileSync(blocker, '')
    writeFileSync(join(state, 'front.json'), JSON.stringify({ log: { file: join(blocker, 'front.log') } }))
    try {
      const r = await runCli(['serve', '--port', '0'], env)
      expect(r.code).toBe(2)
      expect(r.stderr).toContain(`before it was ready; last lines of ${join(state, 'logs', 'front.log')}:`)
      expect(r.stderr).toMatch(/\npd-bridge: front exited with code \d+ before it was ready/)
      expect(r.stderr).toContain('EEXIST')
      const started = [...r.stderr.matchAll(/serve: (\S+) +ready +\S+ +pid (\d+)/g)].map((m) => ({ name: m[1], pid: Number(m[2]) }))
      expect(started.map((s) => s.name).sort()).toEqual(['decoder', 'prefill-engine', 'share'])
      for (const s of started) expect(alive(s.pid)).toBe(false)
      expect(existsSync(join(state, 'stack.json'))).toBe(false)
    }
    finally {
      rmSync(join(state, 'front.json'), { force: true })
    }
  })
})
