// Health that follows the truth: after the decoder's own block write failed (a full tmpfs,
// ENOSPC), the store became writable again and another process (the bridge) wrote blocks into it.
// The decoder's /health must say `ok` the moment it sees those blocks, through the bridge's rescan
// or through the next prompt's lookup, not once the decoder happens to write a block itself, and
// not once its probe's interval (here an hour) has passed. `pd-bridge doctor` reads this /health,
// so its store check follows too.
import { copyFileSync, mkdirSync, readdirSync, renameSync, rmSync } from 'node:fs'
import { dirname, join } from 'node:path'
import pino from 'pino'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { launchDecoder, type LaunchedDecoder } from '../../src/engines/decoder/index.ts'
import { canMountTmpfs, fillUntilFull, mountTmpfs, unmountTmpfs } from '../support/tmpfs.ts'
import { makeTiny, tempDir } from './helpers.ts'

const tmp = tempDir('decoder-health-follows')
const BLOCK = 256
const HOUR = 3_600_000
let modelDir: string
let other: LaunchedDecoder

/** A 600-token prompt (2 full blocks of 256) from a seed: distinct seeds, distinct blocks. */
function prompt (seed: number): number[] {
  return Array.from({ length: 600 }, (_, i) => (i * 37 + seed * 101 + 11) % 500 + 2)
}

async function complete (url: string, tokens: number[]): Promise<{ status: number, cached: number }> {
  const res = await fetch(`${url}/v1/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ prompt: tokens, max_tokens: 4 }) })
  const body = await res.json() as Record<string, any>
  return { status: res.status, cached: body.usage?.prompt_tokens_details?.cached_tokens ?? -1 }
}

async function health (url: string): Promise<Record<string, any>> {
  return await (await fetch(`${url}/health`)).json() as Record<string, any>
}

function blockFiles (root: string): string[] {
  return readdirSync(root, { recursive: true, encoding: 'utf8' }).filter((n) => n.endsWith('.safetensors') && !n.startsWith('_quarantine'))
}

/** Copy every block of `from` missing in `to` as a writer does: a temporary name first, then a rename. */
function copyBlocks (from: string, to: string): number {
  let n = 0
  for (const rel of blockFiles(from)) {
    const dest = join(to, rel)
    if (blockFiles(to).includes(rel)) continue
    mkdirSync(dirname(dest), { recursive: true })
    copyFileSync(join(from, rel), `${dest}.incoming`)
    renameSync(`${dest}.incoming`, dest)
    n++
  }
  return n
}

beforeAll(async () => {
  modelDir = await makeTiny(join(tmp.dir, 'model'))
  // The other writer: a second decoder on its own store writes the blocks that are then placed.
  other = await launchDecoder({ modelDir, cacheDir: join(tmp.dir, 'other-store'), blockSize: BLOCK, port: 0, modelName: 'tiny', maxTokens: 64, logger: pino({ level: 'silent' }) })
})

afterAll(async () => {
  await other?.server.close()
  tmp.remove()
})

describe.skipIf(!canMountTmpfs(tmp.dir))('a store that takes writes again after a failed write-back', () => {
  const mnt = join(tmp.dir, 'tmpfs')
  const store = join(mnt, 'store')
  const filler = join(mnt, 'filler')
  let dec: LaunchedDecoder

  beforeAll(async () => {
    mountTmpfs(mnt, '4m')
    // The probe may really write only once an hour: only a write seen can refresh it in this test.
    dec = await launchDecoder({ modelDir, cacheDir: store, blockSize: BLOCK, port: 0, modelName: 'tiny', maxTokens: 64, storeProbeMs: HOUR, logger: pino({ level: 'silent' }) })
  })

  afterAll(async () => {
    await dec?.server.close()
    unmountTmpfs(mnt)
  })

  /** Fill the tmpfs, fail the decoder's write-back of a fresh prompt, free the space again. */
  async function failOnce (seed: number): Promise<void> {
    expect(fillUntilFull(filler)).toContain('ENOSPC')
    expect(await complete(dec.server.url, prompt(seed))).toMatchObject({ status: 200, cached: 0 })
    const h = await health(dec.server.url)
    expect(h).toMatchObject({ status: 'degraded', store: { writable: false, code: 'ENOSPC', writes_failing: true } })
    rmSync(filler)
    // Space is back, but nothing was written since: /health keeps the truth it knows (the probe is cached).
    expect((await health(dec.server.url)).status).toBe('degraded')
  }

  it('the bridge\'s rescan: blocks written by another process clear writes_failing and the probe at once', async () => {
    expect((await health(dec.server.url)).status).toBe('ok')
    await failOnce(1)
    const failures = (await health(dec.server.url)).store.write_failures as number
    expect(await complete(other.server.url, prompt(2))).toMatchObject({ status: 200 })
    expect(copyBlocks(join(tmp.dir, 'other-store'), store)).toBe(2)
    const rescan = await fetch(`${dec.server.url}/v1/cache/rescan`, { method: 'POST' })
    expect(rescan.status).toBe(200)
    const h = await health(dec.server.url)
    expect(h).toMatchObject({ status: 'ok', degraded: [], store: { writable: true, writes_failing: false, write_failures: failures } })
    expect(h.store.last_write_failure.code).toBe('ENOSPC')
  })

  it('the next prompt\'s lookup: blocks it finds on disk, written since the failure, clear it too', async () => {
    await failOnce(3)
    expect(await complete(other.server.url, prompt(4))).toMatchObject({ status: 200 })
    const before = blockFiles(store).length
    expect(copyBlocks(join(tmp.dir, 'other-store'), store)).toBe(2)
    // The decoder restores both placed blocks and prefills only the 88-token tail: it writes no block itself.
    expect(await complete(dec.server.url, prompt(4))).toMatchObject({ status: 200, cached: 2 * BLOCK })
    expect(blockFiles(store)).toHaveLength(before + 2)
    expect(await health(dec.server.url)).toMatchObject({ status: 'ok', store: { writable: true, writes_failing: false } })
  })

  it('a block found on disk that was there before the failure proves nothing: still degraded', async () => {
    // Placed first, while the store is healthy; only then does a write-back fail.
    expect(await complete(other.server.url, prompt(5))).toMatchObject({ status: 200 })
    expect(copyBlocks(join(tmp.dir, 'other-store'), store)).toBe(2)
    await failOnce(6)
    expect(await complete(dec.server.url, prompt(5))).toMatchObject({ status: 200, cached: 2 * BLOCK })
    const h = await health(dec.server.url)
    expect(h).toMatchObject({ status: 'degraded', store: { writes_failing: true } })
  })
})
