// `pd-bridge front` as a child process without engines: config refusals exit 2 with one sentence;
// a front whose decoder is down still starts, prints its ready line, reports the decoder down in
// /health (503), answers completions with a 502 and a verdict, and exits 0 on SIGTERM.
import { spawnSync } from 'node:child_process'
import { readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { afterAll, describe, expect, it } from 'vitest'
import { BIN, freePort, startProc, tempDir } from './stack.ts'

const tmp = tempDir('front-cli')
afterAll(() => tmp.remove())

function run (args: string[], env: Record<string, string> = {}): { status: number | null, stderr: string, stdout: string } {
  const r = spawnSync(process.execPath, [BIN, 'front', ...args], { encoding: 'utf8', env: { ...process.env, ...env }, timeout: 30_000 })
  return { status: r.status, stderr: r.stderr, stdout: r.stdout }
}

describe('config refusals', () => {
  it('a missing file, an unknown key, a bad variable: exit 2, one sentence naming the file or variable and the field', () => {
    const missing = run(['--config', join(tmp.dir, 'none.json')])
    expect(missing.status).toBe(2)
    expect(missing.stderr).toBe(`pd-bridge: ${join(tmp.dir, 'none.json')}: (file): no such file\n`)
    const file = join(tmp.dir, 'typo.json')
    writeFileSync(file, JSON.stringify({ decoder: { url: 'http://127.0.0.1:1' }, routing: { min_tokens: 5 } }))
    const typo = run(['--config', file])
    expect(typo.status).toBe(2)
    expect(typo.stderr).toBe(`pd-bridge: ${file}: routing.min_tokens: unknown key; the config refuses keys it does not know\n`)
    const good = join(tmp.dir, 'good.json')
    writeFileSync(good, JSON.stringify({ decoder: { url: 'http://127.0.0.1:1' } }))
    const env = run(['--config', good], { PD_MIN_TAIL: 'lots' })
    expect(env.status).toBe(2)
    expect(env.stderr).toBe('pd-bridge: environment: routing.minTail: PD_MIN_TAIL="lots" is not a non-negative decimal integer\n')
    expect(run(['--config', good, '--port', '99999'])).toMatchObject({ status: 2, stderr: 'pd-bridge: --port: "99999" is not a TCP port (0..65535)\n' })
  })
})

describe('a front door whose decoder is down', () => {
  it('starts, says so in /health, answers 502 with a verdict, exits 0 on SIGTERM', async () => {
    const file = join(tmp.dir, 'down.json')
    const logFile = join(tmp.dir, 'logs', 'down.log')
    const deadPort = await freePort()
    writeFileSync(file, JSON.stringify({ decoder: { url: `http://127.0.0.1:${deadPort}` }, log: { file: logFile } }))
    const port = await freePort()
    const front = await startProc(['front', '--config', file], { PD_PORT: String(port), PD_LINK_TIMEOUT_MS: '1000' })
    try {
      expect(front.ready).toMatchObject({ event: 'ready', url: `http://127.0.0.1:${port}`, config: file, env: ['PD_PORT', 'PD_LINK_TIMEOUT_MS'], decoder: `http://127.0.0.1:${deadPort}`, prefill: null, share: null })
      const h = await fetch(`${front.url}/health`)
      expect(h.status).toBe(503)
      const body = await h.json() as Record<string, any>
      expect(body).toMatchObject({ ok: false, status: 'down', bridge: { ready: false } })
      expect(body.bridge.problems[0]).toMatch(/^bridging is off: the config has no prefill\.url \(PD_PREFILL_URL\), share\.url/)
      expect(body.links.decoder.error).toBe(`decoder (http://127.0.0.1:${deadPort}/health): connection refused (is it running?)`)
      const r = await fetch(`${front.url}/v1/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ messages: [{ role: 'user', content: 'hi' }] }) })
      expect(r.status).toBe(502)
      expect(r.headers.get('x-pd-bridge')).toMatch(/^declined: bridging is off/)
      const json = await r.json() as Record<string, any>
      expect(json.error).toMatchObject({ type: 'bad_gateway_error', code: 'decoder_unreachable' })
      expect(json.pd_bridge.verdict).toBe(r.headers.get('x-pd-bridge'))
    } finally {
      expect(await front.stop('SIGTERM')).toBe(0)
    }
    const events = readFileSync(logFile, 'utf8').split('\n').filter((l) => l.startsWith('{')).map((l) => JSON.parse(l).event)
    expect(events).toEqual(expect.arrayContaining(['ready', 'request', 'shutdown', 'closed']))
  })
})
