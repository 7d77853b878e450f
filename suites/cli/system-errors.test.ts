// A busy port is a user's problem to fix, so the CLI names the address instead of printing a stack.
import { execFile } from 'node:child_process'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { createServer, type Server } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { promisify } from 'node:util'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'

const run = promisify(execFile)
const bin = new URL('../../bin/pd-bridge.mjs', import.meta.url).pathname
const dir = mkdtempSync(join(tmpdir(), 'pd-bridge-syserr-'))
let busy: Server
let port: number

beforeAll(async () => {
  busy = createServer()
  await new Promise<void>((resolve) => busy.listen(0, '127.0.0.1', resolve))
  port = (busy.address() as { port: number }).port
})
afterAll(() => {
  busy.close()
  rmSync(dir, { recursive: true, force: true })
})

describe('system errors on the command line', () => {
  it('a front door asked to listen on a busy port names the address, exit 2, no stack trace', async () => {
    const config = join(dir, 'front.json')
    writeFileSync(config, JSON.stringify({ decoder: { url: 'http://127.0.0.1:1' } }))
    const err = await run(process.execPath, [bin, 'front', '--config', config, '--host', '127.0.0.1', '--port', String(port)])
      .then(() => undefined, (e: { code: number, stderr: string }) => e)
    expect(err?.code).toBe(2)
    expect(err?.stderr).toContain(`127.0.0.1:${port}: address already in use`)
    expect(err?.stderr).not.toContain('    at ')
  })
})
