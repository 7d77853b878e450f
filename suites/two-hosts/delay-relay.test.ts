// harness/two-hosts/delay-relay.mjs, the two-host link's added delay where the kernel has no netem:
// every byte arrives, in order, in each direction, and the end of a stream is passed on. On
// loopback, no namespaces needed.
import { spawn, type ChildProcess } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { createConnection, createServer, type AddressInfo, type Server } from 'node:net'
import { fileURLToPath } from 'node:url'
import { afterEach, describe, expect, it } from 'vitest'

const RELAY = fileURLToPath(new URL('../../harness/two-hosts/delay-relay.mjs', import.meta.url))

/** Start the relay in front of `port`; its URL once it printed its ready line. */
async function startRelay (port: number, delayMs: number): Promise<{ child: ChildProcess, port: number }> {
  const child = spawn(process.execPath, [RELAY, '127.0.0.1', '0', '127.0.0.1', String(port), String(delayMs)], { stdio: ['ignore', 'pipe', 'pipe'] })
  const line = await new Promise<string>((resolve, reject) => {
    let text = ''
    child.stdout?.on('data', (d: Buffer) => { text += d.toString(); if (text.includes('\n')) resolve(text.split('\n')[0]) })
    child.on('exit', (code) => reject(new Error(`relay exited ${code}`)))
  })
  const ready = JSON.parse(line) as { event: string, url: string, delayMs: number }
  expect(ready.event).toBe('ready')
  expect(ready.delayMs).toBe(delayMs)
  return { child, port: Number(new URL(ready.url).port) }
}

describe('the delay relay', () => {
  const cleanup: Array<() => void> = []
  afterEach(() => { for (const f of cleanup.splice(0)) f() })

  it('carries every byte in order both ways and passes the end on', async () => {
    // An upstream that answers each connection with what it received, reversed byte for byte, at the end.
    const upstream: Server = createServer((s) => {
      const parts: Buffer[] = []
      s.on('data', (d: Buffer) => parts.push(d))
      s.on('end', () => s.end(Buffer.from(Buffer.concat(parts)).reverse()))
    })
    await new Promise<void>((resolve) => upstream.listen(0, '127.0.0.1', resolve))
    cleanup.push(() => upstream.close())
    const relay = await startRelay((upstream.address() as AddressInfo).port, 20)
    cleanup.push(() => relay.child.kill('SIGTERM'))
    const sent = randomBytes(3 * 1024 * 1024)
    const got = await new Promise<Buffer>((resolve, reject) => {
      const c = createConnection({ host: '127.0.0.1', port: relay.port })
      const parts: Buffer[] = []
      c.on('data', (d: Buffer) => parts.push(d))
      c.on('end', () => resolve(Buffer.concat(parts)))
      c.on('error', reject)
      // In pieces, so the relay holds many chunks at once.
      for (let i = 0; i < sent.length; i += 100_000) c.write(sent.subarray(i, i + 100_000))
      c.end()
    })
    expect(got.equals(Buffer.from(sent).reverse())).toBe(true)
  })

  it('refuses a wrong command line (exit 2)', async () => {
    const child = spawn(process.execPath, [RELAY, '127.0.0.1', 'x'], { stdio: 'ignore' })
    expect(await new Promise((resolve) => child.on('exit', resolve))).toBe(2)
  })
})
