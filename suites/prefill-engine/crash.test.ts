// Crash safety with real processes: an engine SIGKILLed mid-capture leaves its manifest `running`
// (never done) and its lock behind; the next engine on the same root takes the stale lock, seals
// that capture failed ('engine restarted'), answers for it from disk, and refuses its id. A second
// live engine on the same root is refused by name.
import { execFile } from 'node:child_process'
import { readFile } from 'node:fs/promises'
import { join } from 'node:path'
import { promisify } from 'node:util'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { readManifest } from '../../src/wire/manifest.ts'
import { LOCK_FILE } from '../../src/engines/prefill/root-lock.ts'
import { BIN, call, exists, pollUntil, startEngine, submit, tempDir, tinyCheckpoint, tinySidecar, type EngineProcess } from './helpers.ts'

const tmp = tempDir('prefill-crash')
const root = join(tmp.dir, 'captures')
let args: string[]
const started: EngineProcess[] = []
beforeAll(async () => {
  args = ['--model', await tinyCheckpoint(), '--sidecar', (await tinySidecar()).dir, '--capture-root', root, '--max-chunk', '64']
})
afterAll(async () => {
  for (const e of started) {
    if (e.child.exitCode === null && e.child.signalCode === null) {
      e.child.kill('SIGKILL')
      await e.exited
    }
  }
  tmp.remove()
})

async function engine (): Promise<EngineProcess> {
  const e = await startEngine(args)
  started.push(e)
  return e
}

const tokens = Array.from({ length: 4000 }, (_, i) => (i * 7 + 1) % 512)

describe('SIGKILL mid-capture, then a restart', () => {
  it('the killed capture is running, never done; the restart seals it failed and refuses its id', async () => {
    const first = await engine()
    expect((await submit(first.url, { request_id: 'killed-1', tokens })).status).toBe(202)
    // Mid-capture: the capture started and the engine has run at least one chunk, not all.
    const status = await pollUntil(first.url, 'killed-1', (s) => s.state === 'running' && s.prefilled_tokens > 0)
    expect(status.prefilled_tokens).toBeLessThan(4000)
    first.child.kill('SIGKILL')
    expect((await first.exited).signal).toBe('SIGKILL')

    const left = await readManifest(join(root, 'killed-1'))
    expect(left.state).toBe('running')
    expect(left.sealedLength).toBe(0)
    const lock = JSON.parse(await readFile(join(root, LOCK_FILE), 'utf8')) as { pid: number }
    expect(lock.pid).toBe(first.child.pid)

    const second = await engine()
    expect(second.ready.recovered_failed).toEqual(['killed-1'])
    const sealed = await readManifest(join(root, 'killed-1'))
    expect(sealed.state).toBe('failed')
    expect(sealed.error).toBe(`engine restarted: the previous engine (pid ${first.child.pid}) stopped while this capture was running`)
    expect(second.events().find((e) => e.event === 'recovered')).toMatchObject({ request_id: 'killed-1', state: 'failed' })

    // Status of a request the previous process owned comes from its manifest.
    const polled = await call(`${second.url}/v1/prefill/killed-1`)
    expect(polled.body).toMatchObject({ request_id: 'killed-1', state: 'failed', token_count: 4000, sealed_length: 0, error: sealed.error })
    const again = await submit(second.url, { request_id: 'killed-1', tokens: [1] })
    expect([again.status, again.body.error.type, again.body.error.param]).toEqual([409, 'conflict_error', 'request_id'])
    expect(again.body.error.message).toContain('its capture directory exists under the capture root')

    // Without --max-tokens the model's window is the limit, and it is named.
    const long = await submit(second.url, { tokens: new Array(32769).fill(5) })
    expect(long.status).toBe(400)
    expect(long.body.error.message).toContain("32769 tokens, more than the model's max_position_embeddings (32768)")

    // The restarted engine works: a new request runs to done.
    expect((await submit(second.url, { request_id: 'after-1', tokens: tokens.slice(0, 50) })).status).toBe(202)
    expect((await pollUntil(second.url, 'after-1')).state).toBe('done')

    // A third engine on the same root while the second lives is refused, exit code 2, no stack.
    const refused = await promisify(execFile)(process.execPath, [BIN, 'prefill-engine', ...args]).then(() => undefined, (e: { code: number, stderr: string }) => e)
    expect(refused?.code).toBe(2)
    expect(refused?.stderr).toContain(`is in use by another prefill engine (pid ${second.child.pid}`)
    expect(refused?.stderr).not.toContain('    at ')

    second.child.kill('SIGINT')
    expect((await second.exited).code).toBe(0)
    expect(second.events().at(-1)).toMatchObject({ event: 'stopped', reason: 'SIGINT' })
  })
})

describe('start-up refusals name the flag', () => {
  it('bad numbers and a missing model directory: exit code 2 and a sentence', async () => {
    const run = promisify(execFile)
    const sidecar = (await tinySidecar()).dir
    const model = await tinyCheckpoint()
    const base = ['--sidecar', sidecar, '--capture-root', join(tmp.dir, 'other')]
    for (const [extra, fragment] of [
      [['--model', model, '--port', 'eighty'], '--port: must be a non-negative integer, got "eighty"'],
      [['--model', model, '--max-chunk', '0'], '--max-chunk: must be an integer in [1,'],
      [['--model', model, '--max-tokens', '40000'], "--max-tokens: 40000 is more than the model's max_position_embeddings (32768)"],
      [['--model', join(tmp.dir, 'absent')], 'config.json: missing'],
    ] as Array<[string[], string]>) {
      const e = await run(process.execPath, [BIN, 'prefill-engine', ...base, ...extra]).then(() => undefined, (err: { code: number, stderr: string }) => err)
      expect(e?.code).toBe(2)
      expect(e?.stderr).toContain(fragment)
      expect(e?.stderr).not.toContain('    at ')
    }
    // A start that failed after taking the root's lock gave it back.
    expect(exists(join(tmp.dir, 'other', LOCK_FILE))).toBe(false)
    expect(exists(join(tmp.dir, 'other'))).toBe(true)
  })
})
