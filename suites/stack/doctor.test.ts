// doctor without a running deployment, in process: a config whose links are all down, a config
// that does not validate, and a state directory with nothing in it. Each says what is wrong.
import { writeFileSync } from 'node:fs'
import { createServer } from 'node:net'
import { join } from 'node:path'
import { afterAll, describe, expect, it } from 'vitest'
import { runDoctor } from '../../src/stack/doctor/doctor.ts'
import { tempDir } from './helpers.ts'

const tmp = tempDir('stack-doctor')
afterAll(() => tmp.remove())

/** A local port nothing listens on (bound, then released). */
async function freePort (): Promise<number> {
  const s = createServer()
  await new Promise<void>((resolve) => s.listen(0, '127.0.0.1', resolve))
  const port = (s.address() as { port: number }).port
  await new Promise((resolve) => s.close(resolve))
  return port
}

describe('a configured deployment that is down', () => {
  it('fails each link by name, with what was tried', async () => {
    const [d, p, s] = [await freePort(), await freePort(), await freePort()]
    const file = join(tmp.dir, 'front.json')
    writeFileSync(file, JSON.stringify({
      listen: { port: 0 },
      decoder: { url: `http://127.0.0.1:${d}`, cacheDir: join(tmp.dir, 'store'), blockSize: 256 },
      prefill: { url: `http://127.0.0.1:${p}` },
      share: { url: `http://127.0.0.1:${s}` },
      routing: { minTokens: 512 },
    }))
    const r = await runDoctor({ config: file, stateDir: tmp.dir, env: {} })
    expect(r.ok).toBe(false)
    const by = Object.fromEntries(r.checks.map((c) => [c.name, c]))
    expect(by.decoder).toEqual({ name: 'decoder', status: 'fail', detail: `http://127.0.0.1:${d}: connection refused (nothing listens there)` })
    expect(by['prefill engine'].detail).toBe(`http://127.0.0.1:${p}: connection refused (nothing listens there)`)
    expect(by.share.status).toBe('fail')
    expect(by['front door'].status).toBe('warn')
    expect(by.sidecar.status).toBe('warn')
    expect(by.store).toEqual({ name: 'store', status: 'pass', detail: `${join(tmp.dir, 'store')} is writable` })
    expect(r.verdict).toBe(`3 of ${r.checks.length} checks failed: decoder, prefill engine, share`)
  })

  it('PD_* variables override the file, as they do for the front door', async () => {
    const port = await freePort()
    const file = join(tmp.dir, 'front-env.json')
    writeFileSync(file, JSON.stringify({ decoder: { url: 'http://127.0.0.1:1' } }))
    const r = await runDoctor({ config: file, stateDir: tmp.dir, env: { PD_DECODER_URL: `http://127.0.0.1:${port}` } })
    expect(r.checks[0]).toMatchObject({ name: 'config', status: 'pass', detail: `${file} is valid (with PD_DECODER_URL)` })
    expect(r.checks.find((c) => c.name === 'decoder')?.detail).toBe(`http://127.0.0.1:${port}: connection refused (nothing listens there)`)
  })
})

describe('a config that does not validate', () => {
  it('fails the config check with the loader\'s sentence and checks nothing else', async () => {
    const file = join(tmp.dir, 'bad.json')
    writeFileSync(file, JSON.stringify({ decoder: { url: 'http://127.0.0.1:1' }, routing: { minTokns: 5 } }))
    const r = await runDoctor({ config: file, stateDir: tmp.dir, env: {} })
    expect(r.checks).toHaveLength(1)
    expect(r.checks[0].status).toBe('fail')
    expect(r.checks[0].detail).toContain(`${file}: routing.minTokns: unknown key`)
  })
})

describe('an empty state directory', () => {
  it('says there is nothing to check and how to start something', async () => {
    const r = await runDoctor({ stateDir: join(tmp.dir, 'nothing') })
    expect(r.ok).toBe(false)
    expect(r.checks).toEqual([{ name: 'stack', status: 'fail', detail: `nothing to check in ${join(tmp.dir, 'nothing')}: no stack.json and no run/front.json (start one with \`pd-bridge serve\`, or pass --config FILE)` }])
  })
})
