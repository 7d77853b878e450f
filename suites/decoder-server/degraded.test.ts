// Degraded, not down: a decoder whose block store cannot be written still answers every prompt
// (200, the healthy decoder's greedy tokens), counts each failed block write in /health's cache
// section, and says `status: "degraded"` with `store.writable: false` in /health. The read path
// (restoring stored blocks) is unaffected.
//
// How the failure is made real, without mocks:
// - everywhere (CI included, root or not): the decoder runs as a child under `ulimit -f 0`
//   (RLIMIT_FSIZE), so the kernel refuses every write into a regular file with EFBIG, its probe's
//   and its blocks' alike. chmod would not do: the tests run as root, and root ignores modes.
// - where `mount` works (root with CAP_SYS_ADMIN, as on this machine; skipped elsewhere): the store
//   on a real tmpfs, first filled to ENOSPC, then remounted read-only for EROFS, the two failures
//   seen on the embedded stack.
import { execFileSync, spawn, type ChildProcess } from 'node:child_process'
import { once } from 'node:events'
import { cpSync, readdirSync, rmSync } from 'node:fs'
import { join } from 'node:path'
import pino from 'pino'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { launchDecoder, type LaunchedDecoder } from '../../src/engines/decoder/index.ts'
import { cutAtEos, makeTiny, tempDir, waitFor } from './helpers.ts'
import { canMountTmpfs, fillUntilFull, mountTmpfs, unmountTmpfs } from '../support/tmpfs.ts'

const tmp = tempDir('decoder-degraded')
const BLOCK = 256
const bin = new URL('../../bin/pd-bridge.mjs', import.meta.url).pathname
let modelDir: string
let healthy: LaunchedDecoder
let healthyStore: string

/** A 600-token prompt (2 full blocks of 256) from a seed: distinct seeds, distinct blocks. */
function prompt (seed: number): number[] {
  return Array.from({ length: 600 }, (_, i) => (i * 37 + seed * 101 + 11) % 500 + 2)
}

interface Answer { status: number, ids: number[], cached: number, body: Record<string, any> }

async function complete (url: string, tokens: number[], stream = false): Promise<Answer> {
  const res = await fetch(`${url}/v1/completions`, {
    method: 'POST', headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ prompt: tokens, max_tokens: 12, return_token_ids: true, stream, ...(stream ? { stream_options: { include_usage: true } } : {}) }),
  })
  if (!stream) {
    const body = await res.json() as Record<string, any>
    return { status: res.status, ids: body.choices?.[0]?.token_ids ?? [], cached: body.usage?.prompt_tokens_details?.cached_tokens ?? -1, body }
  }
  const text = await res.text()
  const events = text.split('\n\n').filter((e) => e.startsWith('data: ') && e !== 'data: [DONE]').map((e) => JSON.parse(e.slice(6)) as Record<string, any>)
  const ids = events.flatMap((e) => e.choices?.[0]?.token_ids ?? [])
  const usage = events.find((e) => e.usage != null)?.usage
  return { status: res.status, ids, cached: usage?.prompt_tokens_details?.cached_tokens ?? -1, body: { events, done: text.endsWith('data: [DONE]\n\n') } }
}

async function health (url: string): Promise<Record<string, any>> {
  const res = await fetch(`${url}/health`)
  expect(res.status).toBe(200)
  return await res.json() as Record<string, any>
}

function blockFiles (root: string): string[] {
  return readdirSync(root, { recursive: true, encoding: 'utf8' }).filter((n) => n.endsWith('.safetensors'))
}

/** `pd-bridge decoder` as a child whose every regular-file write fails with EFBIG (`ulimit -f 0`); logs on stderr. */
async function startUnwritableDecoder (cacheDir: string): Promise<{ child: ChildProcess, url: string, output: () => string, log: () => Array<Record<string, any>>, stop: () => Promise<void> }> {
  const child = spawn('sh', ['-c', 'trap "" XFSZ; ulimit -f 0; exec "$@"', 'sh', process.execPath, bin, 'decoder', '--port', '0',
    '--model', modelDir, '--cache-dir', cacheDir, '--block-size', String(BLOCK), '--max-tokens', '64', '--model-name', 'tiny'], { stdio: ['ignore', 'pipe', 'pipe'] })
  let out = ''
  child.stdout!.on('data', (c: Buffer) => { out += c.toString() })
  child.stderr!.on('data', (c: Buffer) => { out += c.toString() })
  const exited = once(child, 'exit')
  const ready = await new Promise<Record<string, unknown>>((resolve, reject) => {
    child.stdout!.on('data', () => {
      const line = out.split('\n').find((l) => l.startsWith('{"event":"ready"'))
      if (line !== undefined) resolve(JSON.parse(line) as Record<string, unknown>)
    })
    child.once('exit', (code) => reject(new Error(`the decoder exited with ${code} before it was ready:\n${out}`)))
  })
  return {
    child,
    url: ready.url as string,
    output: () => out,
    log: () => out.split('\n').filter((l) => l.startsWith('{') && !l.startsWith('{"event":"ready"')).map((l) => JSON.parse(l) as Record<string, any>),
    stop: async () => {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM')
      await exited
    },
  }
}

beforeAll(async () => {
  modelDir = await makeTiny(join(tmp.dir, 'model'))
  healthyStore = join(tmp.dir, 'healthy-store')
  healthy = await launchDecoder({ modelDir, cacheDir: healthyStore, blockSize: BLOCK, port: 0, modelName: 'tiny', maxTokens: 64, logger: pino({ level: 'silent' }) })
})

afterAll(async () => {
  await healthy?.server.close()
  tmp.remove()
})

describe('a healthy store', () => {
  it('/health says ok, store writable, no write failures', async () => {
    const h = await health(healthy.server.url)
    expect(h.status).toBe('ok')
    expect(h.degraded).toEqual([])
    // Without PD_API_KEY nobody holds the key: the store is shown by its name, never its path.
    expect(h.store).toMatchObject({ dir: '<cacheDir>', writable: true, code: null, error: null, writes_failing: false, write_failures: 0, last_write_failure: null })
    expect(h.cache).toMatchObject({ write_failures: 0, last_write_failure: null })
    // The probe leaves nothing behind, and nothing the block scan would see.
    expect(readdirSync(healthyStore).filter((n) => n.startsWith('.pd-store-probe'))).toEqual([])
  })
})

describe('a store every write to which fails (EFBIG, ulimit -f 0)', () => {
  let dec: Awaited<ReturnType<typeof startUnwritableDecoder>>
  const store = join(tmp.dir, 'unwritable-store')
  const stored = prompt(1)
  const fresh = prompt(2)
  let storedWant: Answer
  let freshWant: Answer

  beforeAll(async () => {
    // The healthy decoder writes the blocks of `stored`; a copy of that store (only those two
    // blocks) is the unwritable decoder's. Then the healthy one answers `fresh` too: the reference.
    storedWant = await complete(healthy.server.url, stored)
    expect(storedWant.status, JSON.stringify(storedWant.body)).toBe(200)
    expect(blockFiles(healthyStore)).toHaveLength(2)
    cpSync(healthyStore, store, { recursive: true })
    freshWant = await complete(healthy.server.url, fresh)
    expect(freshWant.status).toBe(200)
    dec = await startUnwritableDecoder(store)
  })

  afterAll(async () => { await dec?.stop() })

  it('a prompt with full blocks answers 200 with the healthy decoder\'s greedy tokens, whole and streamed; each failed block is counted', async () => {
    const { engine } = healthy.model
    expect(freshWant.ids).toEqual(cutAtEos(engine.greedy(fresh, 12), engine.config.eosTokenId))
    const a = await complete(dec.url, fresh)
    expect(a.status).toBe(200)
    expect(a.ids).toEqual(freshWant.ids)
    expect(a.cached).toBe(0)
    const s = await complete(dec.url, fresh, true)
    expect(s.status).toBe(200)
    expect(s.body.done).toBe(true)
    expect(s.ids).toEqual(freshWant.ids)
    expect(s.cached).toBe(0)
    // Nothing was stored (no block, no leftover temporary file), and each of the 2 + 2 block writes failed and was counted.
    expect(readdirSync(store, { recursive: true, encoding: 'utf8' }).filter((n) => n.includes('.safetensors'))).toHaveLength(2)
    // A stream's generation line is logged right after its last event: wait for it.
    const gens = await waitFor(async () => { const g = dec.log().filter((l) => l.event === 'generation'); return g.length >= 2 ? g : undefined })
    expect(gens.map((g) => [g.stored_blocks, g.failed_blocks, g.reused_blocks])).toEqual([[0, 2, 0], [0, 2, 0]])
    const failed = dec.log().filter((l) => l.event === 'cache.write-failed')
    expect(failed).toHaveLength(4)
    expect(failed[0]).toMatchObject({ level: 40, detail: { kind: 'write-failed', block: 0, code: 'EFBIG', writeFailures: 1 } })
    const h = await health(dec.url)
    expect(h.cache.write_failures).toBe(4)
    expect(h.cache.stats.writeFailures).toBe(4)
    expect(h.cache.last_write_failure).toMatchObject({ block: 1, code: 'EFBIG' })
  })

  it('the read path is unaffected: stored blocks are restored (cached 512) and answer the same tokens', async () => {
    const a = await complete(dec.url, stored)
    expect(a).toMatchObject({ status: 200, cached: 512, ids: storedWant.ids })
  })

  it('/health answers 200 with status degraded, store.writable false and the error; the probe is cached', async () => {
    const h = await health(dec.url)
    expect(h.status).toBe('degraded')
    expect(h.store).toMatchObject({ dir: '<cacheDir>', writable: false, code: 'EFBIG', writes_failing: true, write_failures: 4, probe_every_ms: 10_000 })
    expect(h.store.error).toMatch(/cannot write a 8192-byte probe file in .*: EFBIG/)
    expect(h.degraded).toHaveLength(2)
    expect(h.degraded[0]).toMatch(/^the block store cannot be written \(EFBIG\)/)
    expect(h.degraded[1]).toMatch(/^the last block write failed at .* \(EFBIG; 4 failed since start\)/)
    // Every field a healthy decoder reports is still there.
    for (const k of ['model', 'model_dir', 'profile', 'geometry_fingerprint', 'max_position_embeddings', 'limits', 'queue', 'cache']) expect(h).toHaveProperty(k)
    const again = await health(dec.url)
    expect(again.store.checked_at).toBe(h.store.checked_at)
  })
})

describe.skipIf(!canMountTmpfs(tmp.dir))('a store on a real tmpfs: full (ENOSPC), then read-only (EROFS)', () => {
  const mnt = join(tmp.dir, 'tmpfs')
  const filler = join(mnt, 'filler')
  let dec: LaunchedDecoder

  beforeAll(async () => {
    mountTmpfs(mnt, '4m')
    dec = await launchDecoder({ modelDir, cacheDir: join(mnt, 'store'), blockSize: BLOCK, port: 0, modelName: 'tiny', maxTokens: 64, logger: pino({ level: 'silent' }) })
  })

  afterAll(async () => {
    await dec?.server.close()
    unmountTmpfs(mnt)
  })

  it('full: 200 with the right tokens, failures counted as ENOSPC, /health degraded', async () => {
    expect((await health(dec.server.url)).status).toBe('ok')
    // Fill every page of the tmpfs.
    expect(fillUntilFull(filler)).toEqual(['ENOSPC', 'ENOSPC', 'ENOSPC'])
    const p = prompt(3)
    const want = await complete(healthy.server.url, p)
    const a = await complete(dec.server.url, p)
    expect(a).toMatchObject({ status: 200, cached: 0, ids: want.ids })
    const h = await health(dec.server.url)
    expect(h.status).toBe('degraded')
    expect(h.cache.write_failures).toBe(2)
    expect(h.cache.last_write_failure.code).toBe('ENOSPC')
    expect(h.store).toMatchObject({ writable: false, code: 'ENOSPC' })
  })

  it('read-only: 200 with the right tokens, failures counted as EROFS, /health degraded with EROFS', async () => {
    rmSync(filler)
    execFileSync('mount', ['-o', 'remount,ro', mnt])
    const p = prompt(4)
    const want = await complete(healthy.server.url, p)
    const a = await complete(dec.server.url, p)
    expect(a).toMatchObject({ status: 200, cached: 0, ids: want.ids })
    // A failed block write makes the next /health probe again instead of using its cached answer.
    const h = await waitFor(async () => { const b = await health(dec.server.url); return b.store.code === 'EROFS' ? b : undefined })
    expect(h.status).toBe('degraded')
    expect(h.store.writable).toBe(false)
    expect(h.cache.write_failures).toBe(4)
    expect(h.cache.last_write_failure.code).toBe('EROFS')
  })

  it('writable again: a block written clears writes_failing, the next probe says ok', async () => {
    execFileSync('mount', ['-o', 'remount,rw', mnt])
    const p = prompt(5)
    const a = await complete(dec.server.url, p)
    expect(a.status).toBe(200)
    const h = await health(dec.server.url)
    expect(h).toMatchObject({ status: 'ok', degraded: [], store: { writable: true, writes_failing: false, write_failures: 4 } })
    expect(blockFiles(join(mnt, 'store'))).toHaveLength(2)
  })
})
