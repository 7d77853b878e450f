// `pd-bridge share` as a real child process: prints its URL, serves, logs JSON lines, and exits 0
// on SIGTERM and SIGINT; bad arguments get a sentence and exit code 2.
import { spawn, execFile } from 'node:child_process'
import { once } from 'node:events'
import { promisify } from 'node:util'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { makeCapture, requestFor, tempDir } from './helpers.ts'

const bin = new URL('../../bin/pd-bridge.mjs', import.meta.url).pathname
const tmp = tempDir('share-cli')
beforeAll(async () => { await makeCapture(tmp.dir, requestFor('cli-1')) })
afterAll(tmp.remove)

async function serveUntil (signal: NodeJS.Signals): Promise<{ code: number | null, stderr: string, status: number, manifestStatus: number }> {
  const child = spawn(process.execPath, [bin, 'share', '--root', tmp.dir, '--port', '0'], { stdio: ['ignore', 'pipe', 'pipe'] })
  let stdout = ''
  let stderr = ''
  child.stderr.on('data', (c: Buffer) => { stderr += c.toString() })
  const url = await new Promise<string>((resolve, reject) => {
    child.stdout.on('data', (c: Buffer) => {
      stdout += c.toString()
      if (stdout.includes('\n')) resolve(stdout.split('\n')[0])
    })
    child.once('exit', () => reject(new Error(`exited early: ${stderr}`)))
  })
  expect(url).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/)
  const health = await fetch(`${url}/health`)
  await health.body?.cancel()
  const manifest = await fetch(`${url}/captures/cli-1/manifest.json`)
  await manifest.text()
  child.kill(signal)
  const [code] = await once(child, 'exit') as [number | null]
  return { code, stderr, status: health.status, manifestStatus: manifest.status }
}

describe('pd-bridge share', () => {
  it.each(['SIGTERM', 'SIGINT'] as NodeJS.Signals[])('serves the root and exits 0 on %s', async (signal) => {
    const r = await serveUntil(signal)
    expect([r.status, r.manifestStatus, r.code]).toEqual([200, 200, 0])
    const lines = r.stderr.split('\n').filter((l) => l.startsWith('{')).map((l) => JSON.parse(l) as { target: string, status: number })
    expect(lines.map((l) => [l.target, l.status])).toEqual([['/health', 200], ['/captures/cli-1/manifest.json', 200]])
    expect(r.stderr).toContain(`${signal}, closing`)
  })

  it('names a missing root and a bad port, exit code 2, no stack', async () => {
    const run = promisify(execFile)
    for (const [args, fragment] of [
      [['--root', `${tmp.dir}/absent`], 'root: no such directory'],
      [['--root', tmp.dir, '--port', 'eighty'], '--port: "eighty" is not a TCP port'],
    ] as Array<[string[], string]>) {
      const e = await run(process.execPath, [bin, 'share', ...args]).then(() => undefined, (err: { code: number, stderr: string }) => err)
      expect(e?.code).toBe(2)
      expect(e?.stderr).toContain(fragment)
      expect(e?.stderr).not.toContain('    at ')
    }
  })
})
