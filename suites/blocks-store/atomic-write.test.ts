// Writes are atomic: the temporary name never matches the scan pattern, a leftover temporary file is
// never indexed and is removed once its writer is gone, and a failed write leaves nothing behind.
import { spawnSync } from 'node:child_process'
import { mkdir, readdir, utimes, writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import fc from 'fast-check'
import { SafetensorsStreamWriter } from '../../src/formats/safetensors/index.ts'
import { BLOCK_FILE_NAME, TEMP_FILE_NAME, BlockStore, blockPath } from '../../src/decode/store/index.ts'
import { BLOCK, blockPayload, openStore, tempDir, tinyLayout, tokens } from './helpers.ts'

let dir: string
let cleanup: () => Promise<void>
beforeEach(async () => ({ dir, cleanup } = await tempDir()))
afterEach(async () => await cleanup())

/** The pid of a process that has exited (so no writer can own a file named after it). */
function deadPid (): number {
  const r = spawnSync(process.execPath, ['-e', 'process.stdout.write(String(process.pid))'], { encoding: 'utf8' })
  return Number(r.stdout)
}

describe('the temporary name never matches the block file pattern', () => {
  it('holds for the name the writer really uses', async () => {
    // writeBlockFile goes through SafetensorsStreamWriter; hold one open and look at its file.
    const hash = 'd'.repeat(64)
    await mkdir(join(dir, 'd'), { recursive: true })
    const writer = await SafetensorsStreamWriter.create(blockPath(dir, hash), [{ name: 'x', dtype: 'F32', shape: [1] }])
    try {
      const names = await readdir(join(dir, 'd'))
      expect(names).toHaveLength(1)
      expect(names[0]).toMatch(TEMP_FILE_NAME)
      expect(names[0]).not.toMatch(BLOCK_FILE_NAME)
      expect(names[0].endsWith('.safetensors')).toBe(false)
    } finally {
      await writer.abort()
    }
  })

  it('holds for every hash and pid', () => {
    fc.assert(fc.property(fc.stringMatching(/^[0-9a-f]{64}$/), fc.integer({ min: 1, max: 2 ** 22 }), fc.stringMatching(/^[0-9a-f]{12}$/), (hash, pid, rnd) => {
      const name = `${hash}.safetensors.partial-${pid}-${rnd}`
      expect(BLOCK_FILE_NAME.test(name)).toBe(false)
      expect(TEMP_FILE_NAME.exec(name)?.[2]).toBe(String(pid))
    }))
  })
})

describe('leftover temporary files are ignored, and removed once their writer is gone', () => {
  it('removes one whose writer pid has exited, keeps one whose writer is alive, indexes neither', async () => {
    const { store: first } = await openStore(dir)
    const [k0, k1] = first.keysFor(tokens(2 * BLOCK))
    await first.put(k0, blockPayload(0))
    const dead = join(dir, k1[0], `${k1}.safetensors.partial-${deadPid()}-abcdef`)
    const alive = join(dir, k1[0], `${k1}.safetensors.partial-${process.ppid}-123456`)
    await writeFile(dead, 'half a block')
    await writeFile(alive, 'a block being written')
    const { store, events } = await openStore(dir)
    expect(store.size).toBe(1)
    expect(await store.has(k1)).toBe(false)
    const names = await readdir(join(dir, k1[0]))
    expect(names).toContain(`${k1}.safetensors.partial-${process.ppid}-123456`)
    expect(names.some((n) => n.includes('abcdef'))).toBe(false)
    expect(store.stats.tempRemoved).toBe(1)
    expect(events.filter((e) => e.kind === 'temp-removed').map((e) => e.kind === 'temp-removed' && e.why)).toEqual([expect.stringMatching(/writer pid \d+ is gone/)])
  })

  it('removes one untouched for longer than staleTempMs even if its pid is alive (pid reuse)', async () => {
    const old = join(dir, 'e', `${'e'.repeat(64)}.safetensors.partial-${process.ppid}-0a0a0a`)
    await mkdir(join(dir, 'e'), { recursive: true })
    await writeFile(old, 'stale')
    const past = Date.now() / 1000 - 7200
    await utimes(old, past, past)
    const store = await BlockStore.open({ root: dir, layout: tinyLayout(), log: () => undefined, staleTempMs: 3_600_000 })
    expect(store.stats.tempRemoved).toBe(1)
    expect(await readdir(join(dir, 'e'))).toEqual([])
  })
})

describe('a write in flight is safe from a scan by another store in the same process', () => {
  it('completes while a second store rescans the directory during the write', async () => {
    const { store } = await openStore(dir)
    const { store: other } = await openStore(dir)
    const keys = store.keysFor(tokens(6 * BLOCK))
    let done = false
    const writes = Promise.all(keys.map(async (k, b) => await store.put(k, blockPayload(b)))).finally(() => { done = true })
    // Rescan for as long as the writes run: a scan that removed an in-flight temp file would fail a rename.
    let scans = 0
    while (!done) {
      await other.rescan()
      scans++
    }
    await writes
    expect(scans).toBeGreaterThan(0)
    await other.rescan()
    expect(other.size).toBe(6)
    expect(other.stats.tempRemoved).toBe(0)
  })
})

describe('a failed write leaves no file and no temporary file', () => {
  it('cleans up when the payload cannot be encoded', async () => {
    const { store } = await openStore(dir)
    const [k] = store.keysFor(tokens(BLOCK))
    const payload = blockPayload(0)
    // An F4 tensor with a zero-size dim has no (1,) stand-in in whole bytes: encoding fails.
    payload.layers[0] = { kind: 'state', className: 'RotatingKVCache', elements: [{ dtype: 'F4', shape: [0, 3], data: new Uint8Array(0) }, null] }
    await expect(store.put(k, payload)).rejects.toThrow(/layer_0_state_0/)
    expect(await readdir(join(dir, k[0]))).toEqual([])
    expect(store.size).toBe(0)
  })
})
