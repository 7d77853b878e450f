// The embedded stack as a newcomer meets it: it passes its own window gate (every rule but the
// needle law, which the tiny random checkpoint cannot satisfy); your front.json is read at every
// start and never rewritten, and a key the stack owns there is refused before anything starts; a
// busy front door port is found before any child starts; the demo runs while serve holds the same
// state directory. Real processes on 127.0.0.1 throughout.
import { readFileSync, readdirSync, writeFileSync, mkdirSync, existsSync } from 'node:fs'
import { createServer, type Server } from 'node:net'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { envWith, runCli, startServe, tempDir, type ServeChild } from './helpers.ts'

const tmp = tempDir('stack-settings')
const state = join(tmp.dir, 'state')
const env = envWith(state)
const yours = { routing: { minTokens: 600 }, queue: { maxWaiting: 2 }, deadlines: { linkMs: 4000 } }
const yoursText = JSON.stringify(yours, null, 2) + '\n'
let serve: ServeChild

beforeAll(async () => {
  mkdirSync(state, { recursive: true })
  writeFileSync(join(state, 'front.json'), yoursText)
  serve = await startServe(['--port', '0'], env)
})

afterAll(async () => {
  if (serve !== undefined && serve.child.exitCode === null && serve.child.signalCode === null) {
    serve.child.kill('SIGTERM')
    await serve.exited
  }
  tmp.remove()
})

describe('your front.json', () => {
  it('is read at start and left exactly as you wrote it; the generated config carries your settings', () => {
    expect(readFileSync(join(state, 'front.json'), 'utf8')).toBe(yoursText)
    const generated = JSON.parse(readFileSync(join(state, 'run', 'front.json'), 'utf8'))
    expect(generated.routing).toEqual({ minTokens: 600, minTail: 256, maxBridgeTokens: 32768 - 256 })
    expect(generated.queue).toEqual({ maxWaiting: 2 })
    expect(generated.deadlines).toEqual({ linkMs: 4000 })
    // The body limit fits a prompt that fills the window (32 B a token), never below 4 MiB.
    expect(generated.limits).toEqual({ maxBodyBytes: 4 * 1024 * 1024 })
    expect(generated.decoder.url).toBe(serve.ready.decoder)
  })

  it('a key the stack owns there is refused in one line, before any child starts', async () => {
    const other = join(tmp.dir, 'owned')
    mkdirSync(other, { recursive: true })
    writeFileSync(join(other, 'front.json'), JSON.stringify({ decoder: { url: 'http://127.0.0.1:9' } }))
    const r = await runCli(['serve', '--port', '0'], envWith(other))
    expect(r.code).toBe(2)
    expect(r.stderr).toMatch(/^pd-bridge: \S+front\.json: decoder: is set by the embedded stack/)
    expect(r.stderr.trim().split('\n')).toHaveLength(1)
    expect(existsSync(join(other, 'logs', 'decoder.log'))).toBe(false)
  })
})

describe('a busy front door port', () => {
  it('is named before any child starts', async () => {
    const holder: Server = createServer()
    await new Promise<void>((resolve) => holder.listen(0, '127.0.0.1', resolve))
    const port = (holder.address() as { port: number }).port
    const other = join(tmp.dir, 'busy')
    try {
      const r = await runCli(['serve', '--port', String(port)], envWith(other))
      expect(r.code).toBe(2)
      expect(r.stderr).toContain(`pd-bridge: the front door's address 127.0.0.1:${port} is in use by another process; pick another with --port`)
      const logs = existsSync(join(other, 'logs')) ? readdirSync(join(other, 'logs')) : []
      expect(logs.filter((f) => f !== 'serve.log')).toEqual([])
    }
    finally {
      holder.close()
    }
  })
})

describe('the embedded default and its own gate', () => {
  it('pd-bridge gate --config <the generated front.json> passes every rule but the needle law', async () => {
    // --launch and --prefill-config come from the launch.env the stack wrote beside the config.
    const r = await runCli(['gate', '--config', join(state, 'run', 'front.json'), '--report-dir', join(tmp.dir, 'gate-report')], env)
    expect(r.stdout).toContain(`launch   ${join(state, 'run', 'launch.env')}`)
    expect(r.stdout).toContain(`prefill  ${join(state, 'models', 'tiny-seed1', 'config.json')}`)
    const fails = r.stdout.split('\n').filter((l) => l.startsWith('  FAIL '))
    expect(fails, r.stdout).toHaveLength(1)
    expect(fails[0]).toMatch(/^ {2}FAIL needle /)
    expect(r.stdout).toMatch(/ok +native +32\/32 bit-exact/)
    expect(r.code).toBe(1)
  })
})

describe('demo beside serve', () => {
  it('runs while serve holds the same state directory, with a stack of its own, and passes', async () => {
    const r = await runCli(['demo', '--tokens', '600', '--max-tokens', '8'], env)
    expect(r.code, r.stderr).toBe(0)
    expect(r.stdout).toContain('PASS: verdict complete')
    // serve's stack is untouched: still its record, still answering.
    expect(JSON.parse(readFileSync(join(state, 'stack.json'), 'utf8')).supervisorPid).toBe(serve.child.pid)
    expect((await fetch(`${serve.ready.front}/health`)).status).toBe(200)
  })
})
