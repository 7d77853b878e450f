// doctor and a block store that cannot be written: it reports the decoder's degraded store from the
// decoder's /health (a decoder under `ulimit -f 0`, whose every file write fails with EFBIG, while
// the directory is writable from here), and its own store check is a real write that a full disk
// fails (a filled tmpfs, where mount works; skipped elsewhere), although access() passes there.
import { spawn, type ChildProcess } from 'node:child_process'
import { once } from 'node:events'
import { accessSync, constants, mkdirSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { makeCheckpoint } from '../../src/model/checkpoint/index.ts'
import { runDoctor } from '../../src/stack/doctor/doctor.ts'
import { tempDir } from './helpers.ts'
import { canMountTmpfs, fillUntilFull, mountTmpfs, unmountTmpfs } from '../support/tmpfs.ts'

const tmp = tempDir('stack-doctor-store')
const bin = new URL('../../bin/pd-bridge.mjs', import.meta.url).pathname
afterAll(() => tmp.remove())

function config (name: string, decoderUrl: string, cacheDir: string): string {
  const file = join(tmp.dir, `${name}.json`)
  writeFileSync(file, JSON.stringify({
    listen: { port: 0 },
    decoder: { url: decoderUrl, cacheDir, blockSize: 256, modelName: 'tiny' },
    capture: { dir: tmp.dir },
    routing: { minTokens: 512 },
  }))
  return file
}

describe('a decoder that cannot write its store', () => {
  let child: ChildProcess
  let url: string
  const store = join(tmp.dir, 'store')

  beforeAll(async () => {
    const model = join(tmp.dir, 'model')
    await makeCheckpoint({ preset: 'tiny', seed: 1, out: model })
    // RLIMIT_FSIZE 0: the kernel refuses this process every write into a regular file (EFBIG), as
    // a full disk refuses every allocation; it works as root, where chmod would not.
    child = spawn('sh', ['-c', 'trap "" XFSZ; ulimit -f 0; exec "$@"', 'sh', process.execPath, bin, 'decoder', '--port', '0',
      '--model', model, '--cache-dir', store, '--block-size', '256', '--model-name', 'tiny'], { stdio: ['ignore', 'pipe', 'pipe'] })
    let out = ''
    child.stderr!.on('data', (c: Buffer) => { out += c.toString() })
    url = await new Promise<string>((resolve, reject) => {
      child.stdout!.on('data', (c: Buffer) => {
        out += c.toString()
        const line = out.split('\n').find((l) => l.startsWith('{"event":"ready"'))
        if (line !== undefined) resolve((JSON.parse(line) as { url: string }).url)
      })
      child.once('exit', (code) => reject(new Error(`the decoder exited with ${code}:\n${out}`)))
    })
  })

  afterAll(async () => {
    if (child !== undefined && child.exitCode === null && child.signalCode === null) {
      const exited = once(child, 'exit')
      child.kill('SIGTERM')
      await exited
    }
  })

  it('the decoder check warns "degraded" with its reason; the store check fails with the decoder\'s error', async () => {
    const r = await runDoctor({ config: config('degraded', url, store), stateDir: tmp.dir, env: {} })
    const by = Object.fromEntries(r.checks.map((c) => [c.name, c]))
    expect(by.decoder.status).toBe('warn')
    expect(by.decoder.detail).toMatch(new RegExp(`^${url} answers /health \\(\\d+ ms\\) with status "degraded": the block store cannot be written \\(EFBIG\\)`))
    expect(by.store.status).toBe('fail')
    expect(by.store.detail).toMatch(new RegExp(`^${store} is writable here, but the decoder cannot write its store <cacheDir> \\(EFBIG\\): cannot write a 8192-byte probe file .*; prompts are answered, but no block is stored and nothing can be bridged$`))
    // A degraded decoder is still up: versions and geometry are judged from its /health.
    expect(by.versions).toMatchObject({ status: 'pass', detail: expect.stringContaining('decoder serves tiny') })
    expect(r.ok).toBe(false)
    expect(r.verdict).toMatch(/checks failed: .*store/)
  })
})

describe.skipIf(!canMountTmpfs(tmp.dir))('a full disk (a filled tmpfs)', () => {
  const mnt = join(tmp.dir, 'full')
  beforeAll(() => {
    mountTmpfs(mnt, '1m')
    mkdirSync(join(mnt, 'store'))
    expect(fillUntilFull(join(mnt, 'filler'))).toEqual(['ENOSPC', 'ENOSPC', 'ENOSPC'])
  })
  afterAll(() => {
    unmountTmpfs(mnt)
  })

  it('fails the store check with ENOSPC, where access(W_OK) says writable', async () => {
    const store = join(mnt, 'store')
    expect(() => accessSync(store, constants.W_OK)).not.toThrow()
    const r = await runDoctor({ config: config('full', 'http://127.0.0.1:1', store), stateDir: tmp.dir, env: {} })
    expect(r.checks.find((c) => c.name === 'store')).toEqual({ name: 'store', status: 'fail', detail: `${store}: cannot write (ENOSPC)` })
  })
})
