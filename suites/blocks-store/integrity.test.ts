// Nothing wrong is ever served: every block carries a SHA-256 of its content (content_sha256),
// stamped when it is written and checked on every load before any tensor is used. A block whose
// bytes changed since (a flipped bit on a real file), whose digest is malformed, or that has no
// digest at all (written before digests) is refused, moved into the store's quarantine (never
// deleted) and counted; `pd-bridge cache scan --verify` finds such blocks without serving them.
import { execFile } from 'node:child_process'
import { createHash } from 'node:crypto'
import { readFile, stat } from 'node:fs/promises'
import { join } from 'node:path'
import { promisify } from 'node:util'
import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import { SafetensorsFile, writeSafetensors, type Tensor } from '../../src/formats/safetensors/index.ts'
import { BlockStore, blockPath, QUARANTINE_DIR, type StoreEvent } from '../../src/decode/store/index.ts'
import { deriveBlockKey } from '../../src/config/block-key.ts'
import { tamperBlock } from '../support/tamper-block.ts'
import { flipTensorBit as flipBit } from '../support/flip-bit.ts'
import { BLOCK, GEOMETRY_B, blockPayload, openStore, payloadDiff, tempDir, tinyLayout, tokens } from './helpers.ts'

const run = promisify(execFile)
const bin = new URL('../../bin/pd-bridge.mjs', import.meta.url).pathname

async function cli (...args: string[]): Promise<{ code: number, stdout: string, stderr: string }> {
  return await cliWith(process.env, ...args)
}

async function cliWith (env: NodeJS.ProcessEnv, ...args: string[]): Promise<{ code: number, stdout: string, stderr: string }> {
  try {
    const { stdout, stderr } = await run(process.execPath, [bin, ...args], { env })
    return { code: 0, stdout, stderr }
  } catch (err) {
    const e = err as { code: number, stdout: string, stderr: string }
    return { code: e.code, stdout: e.stdout, stderr: e.stderr }
  }
}

let dir: string
let cleanup: () => Promise<void>
beforeEach(async () => ({ dir, cleanup } = await tempDir()))
afterEach(async () => await cleanup())

/** Three blocks of one prompt in a fresh store on `dir`; their keys. */
async function threeBlocks (): Promise<string[]> {
  const { store } = await openStore(dir)
  const keys = store.keysFor(tokens(3 * BLOCK))
  for (const [b, k] of keys.entries()) await store.put(k, blockPayload(b))
  return keys
}


/** Rewrite a block file with its tensors unchanged and its metadata edited (the digest is NOT stamped anew). */
async function rewriteMetadata (path: string, change: (meta: Record<string, string>) => void): Promise<void> {
  const f = await SafetensorsFile.open(path)
  const tensors: Record<string, Tensor> = {}
  for (const name of f.tensors.keys()) tensors[name] = await f.read(name)
  const meta = { ...f.metadata }
  await f.close()
  change(meta)
  await writeSafetensors(path, tensors, meta)
}

const exists = async (path: string): Promise<boolean> => await stat(path).then(() => true, () => false)

function ofKind<K extends StoreEvent['kind']> (events: StoreEvent[], kind: K): Array<Extract<StoreEvent, { kind: K }>> {
  return events.filter((e): e is Extract<StoreEvent, { kind: K }> => e.kind === kind)
}

describe('every block carries the digest of its content', () => {
  it('content_sha256 is the documented SHA-256, recomputed here from the file alone', async () => {
    const [k] = await threeBlocks()
    const f = await SafetensorsFile.open(blockPath(dir, k))
    try {
      // docs/block-store.md: tag; metadata but created_at and the digest, sorted, as JSON pairs; tensors sorted by name.
      const h = createHash('sha256').update('pd-bridge-block-content/1\n')
      for (const key of Object.keys(f.metadata).sort()) {
        if (key !== 'created_at' && key !== 'content_sha256') h.update(JSON.stringify([key, f.metadata[key]]) + '\n')
      }
      for (const name of [...f.tensors.keys()].sort()) {
        const t = await f.read(name)
        h.update(JSON.stringify([name, t.dtype, t.shape, t.data.byteLength]) + '\n')
        h.update(t.data)
      }
      expect(f.metadata.content_sha256).toMatch(/^[0-9a-f]{64}$/)
      expect(f.metadata.content_sha256).toBe(h.digest('hex'))
    } finally {
      await f.close()
    }
  })

  it('is the same for the same block written twice at different times (created_at is left out)', async () => {
    const [k] = await threeBlocks()
    await new Promise((resolve) => setTimeout(resolve, 20))
    const other = join(dir, 'other')
    const { store } = await openStore(other)
    await store.put(k, blockPayload(0))
    const meta = async (root: string): Promise<Record<string, string>> => {
      const f = await SafetensorsFile.open(blockPath(root, k))
      await f.close()
      return f.metadata
    }
    const [a, b] = [await meta(dir), await meta(other)]
    expect(a.created_at).not.toBe(b.created_at)
    expect(a.content_sha256).toBe(b.content_sha256)
  })

  it('a good block loads, bit for bit, and each verified load is counted', async () => {
    const keys = await threeBlocks()
    const { store, events } = await openStore(dir)
    for (const [b, k] of keys.entries()) expect(payloadDiff((await store.load(k))!.payload, blockPayload(b))).toBeNull()
    expect(store.stats.verified).toBe(3)
    expect(store.stats.refused).toEqual({})
    expect(ofKind(events, 'quarantined')).toEqual([])
  })
})

describe('a flipped bit in a stored block\'s payload, on a real file', () => {
  it('is a miss with the reason, the block is moved into the quarantine (bytes kept) and counted', async () => {
    const keys = await threeBlocks()
    const { store, events } = await openStore(dir)
    expect(store.size).toBe(3)
    // Block 1's CSA main-pool rows: the header still parses, so only the data can tell.
    await flipBit(blockPath(dir, keys[1]), 'layer_1_sub_1_state_2', 3)
    const flipped = await readFile(blockPath(dir, keys[1]))
    // Presence is a header check; serving needs the bytes, and the bytes are what is checked.
    expect(await store.has(keys[1])).toBe(true)
    expect(await store.load(keys[1])).toBeNull()

    const refused = ofKind(events, 'refused')
    expect(refused).toHaveLength(1)
    expect(refused[0]).toMatchObject({ hash: keys[1], reason: 'integrity', during: 'load' })
    expect(refused[0].detail).toMatch(/^content hashes to [0-9a-f]{64}, but content_sha256 says [0-9a-f]{64}: the bytes changed after the block was written$/)
    const [q] = ofKind(events, 'quarantined')
    expect(q).toMatchObject({ hash: keys[1], from: blockPath(dir, keys[1]), why: expect.stringMatching(/^integrity: content hashes to/) })
    expect(q.to.startsWith(join(dir, QUARANTINE_DIR) + '/')).toBe(true)
    expect(q.to.endsWith(join(keys[1][0], `${keys[1]}.safetensors`))).toBe(true)
    expect((await readFile(q.to)).equals(flipped)).toBe(true)
    expect(await exists(blockPath(dir, keys[1]))).toBe(false)
    expect(store.stats).toMatchObject({ refused: { integrity: 1 }, quarantined: 1, verified: 0 })
    expect(store.size).toBe(2)
  })

  it('cuts a restore there: the prompt restores block 0 only, never the flipped block', async () => {
    const keys = await threeBlocks()
    await flipBit(blockPath(dir, keys[1]), 'layer_0_state_0', 7)
    const { store } = await openStore(dir)
    const r = await store.restore(tokens(3 * BLOCK))
    expect(r.ok).toBe(true)
    if (!r.ok) return
    expect(r.cache.tokenCount).toBe(BLOCK)
    expect(r.cache.hashes).toEqual([keys[0]])
    expect(store.stats.refused.integrity).toBe(1)
    // The next restore does not even see it (it is in the quarantine), and a rewrite serves again.
    expect(await store.has(keys[1])).toBe(false)
    expect((await store.put(keys[1], blockPayload(1))).written).toBe(true)
    const again = await store.restore(tokens(3 * BLOCK))
    expect(again.ok && again.cache.hashes).toEqual(keys)
  })

  it('a flipped bit in the first block is a miss of the whole prompt', async () => {
    const keys = await threeBlocks()
    await flipBit(blockPath(dir, keys[0]), 'layer_3_sub_2_state_2')
    const { store } = await openStore(dir)
    expect(await store.restore(tokens(3 * BLOCK))).toMatchObject({ ok: false, matchedBlocks: 0 })
    expect(store.stats.quarantined).toBe(1)
  })

  it('another store on the same directory that finds the block already quarantined misses quietly', async () => {
    const keys = await threeBlocks()
    const { store: first } = await openStore(dir)
    const { store: second, events } = await openStore(dir)
    await flipBit(blockPath(dir, keys[2]), 'layer_2_sub_1_state_2')
    expect(await first.load(keys[2])).toBeNull()
    expect(await second.load(keys[2])).toBeNull()
    expect(second.stats).toMatchObject({ unreadable: 0, quarantined: 0 })
    expect(ofKind(events, 'unreadable')).toEqual([])
  })
})

describe('metadata is covered too', () => {
  it('an edited meta state (a window offset) with the old digest is refused and quarantined', async () => {
    const keys = await threeBlocks()
    await rewriteMetadata(blockPath(dir, keys[0]), (m) => {
      const metas = JSON.parse(m.layer_meta_states) as unknown[][]
      metas[0][3] = '7' // layer 0's _idx
      m.layer_meta_states = JSON.stringify(metas)
    })
    const { store, events } = await openStore(dir)
    expect(await store.load(keys[0])).toBeNull()
    expect(ofKind(events, 'refused')[0]).toMatchObject({ reason: 'integrity', during: 'load' })
    expect(store.stats.quarantined).toBe(1)
  })

  it('created_at is not covered: a block re-stamped with another time still serves', async () => {
    const keys = await threeBlocks()
    await rewriteMetadata(blockPath(dir, keys[0]), (m) => { m.created_at = '1' })
    const { store } = await openStore(dir)
    expect(await store.load(keys[0])).not.toBeNull()
  })

  it('a digest that is not 64 hex digits is an integrity refusal at the scan, and quarantined', async () => {
    const keys = await threeBlocks()
    await rewriteMetadata(blockPath(dir, keys[0]), (m) => { m.content_sha256 = 'z' + m.content_sha256.slice(1) })
    const { store, events } = await openStore(dir)
    expect(ofKind(events, 'refused')[0]).toMatchObject({ hash: keys[0], reason: 'integrity', during: 'scan' })
    expect(store.size).toBe(2)
    expect(store.stats.quarantined).toBe(1)
  })
})

describe('blocks written before digests (no content_sha256) are refused as unverifiable, never served', () => {
  it('refused at the scan, quarantined, a miss; the next write puts a verified block in its place', async () => {
    const keys = await threeBlocks()
    const old = blockPath(dir, keys[0])
    await rewriteMetadata(old, (m) => { delete m.content_sha256 })
    const oldBytes = await readFile(old)
    const { store, events } = await openStore(dir)
    const [r] = ofKind(events, 'refused')
    expect(r).toMatchObject({ hash: keys[0], reason: 'unverified', during: 'scan' })
    expect(r.detail).toMatch(/no content_sha256 \(written before block digests\)/)
    const [q] = ofKind(events, 'quarantined')
    expect((await readFile(q.to)).equals(oldBytes)).toBe(true)
    expect(store.stats).toMatchObject({ refused: { unverified: 1 }, quarantined: 1 })
    expect(await store.has(keys[0])).toBe(false)
    expect(await store.restore(tokens(3 * BLOCK))).toMatchObject({ ok: false, matchedBlocks: 0 })
    expect((await store.put(keys[0], blockPayload(0))).written).toBe(true)
    expect(await store.load(keys[0])).not.toBeNull()
  })

  it('a block of another layout without a digest is refused for that and left where it is (the directory may be shared)', async () => {
    const { store: foreign } = await openStore(dir, { geometryFingerprint: GEOMETRY_B })
    const [k] = foreign.keysFor(tokens(BLOCK))
    await foreign.put(k, blockPayload(0))
    await rewriteMetadata(blockPath(dir, k), (m) => { delete m.content_sha256 })
    const { store, events } = await openStore(dir)
    expect(ofKind(events, 'refused').map((e) => e.reason)).toEqual(['geometry'])
    expect(store.stats.quarantined).toBe(0)
    expect(await exists(blockPath(dir, k))).toBe(true)
  })
})

describe('pd-bridge cache scan --verify', () => {
  it('reads every block and finds the flipped one and the one without a digest; exit 1', async () => {
    const keys = await threeBlocks()
    const clean = await cli('cache', 'scan', dir, '--verify')
    expect(clean.code).toBe(0)
    expect(clean.stdout).toContain('verify: 3/3 block(s) match their content digest; 0 corrupt, 0 without a digest, 0 unreadable')

    await flipBit(blockPath(dir, keys[1]), 'layer_1_sub_1_state_2')
    await rewriteMetadata(blockPath(dir, keys[2]), (m) => { delete m.content_sha256 })
    const r = await cli('cache', 'scan', dir, '--verify')
    expect(r.code).toBe(1)
    expect(r.stdout).toMatch(new RegExp(`\\n {2}CORRUPT ${keys[1]} \\S+: content hashes to [0-9a-f]{64}, but content_sha256 says [0-9a-f]{64}\\n`))
    expect(r.stdout).toMatch(new RegExp(`\\n {2}UNVERIFIED ${keys[2]} \\S+: no content_sha256`))
    expect(r.stdout).not.toContain(`CORRUPT ${keys[0]}`)
    expect(r.stdout.trim().split('\n').at(-1)).toBe('verify: 1/3 block(s) match their content digest; 1 corrupt, 1 without a digest, 0 unreadable')
    // It reports, it does not move: both files are where they were.
    for (const k of keys) expect(await exists(blockPath(dir, k))).toBe(true)
    // Without --verify the scan reads headers only, as before, and exits 0.
    const plain = await cli('cache', 'scan', dir)
    expect(plain.code).toBe(0)
    expect(plain.stdout).not.toContain('verify:')
  })
})

describe('pd-bridge cache scan --verify with a block key in its environment', () => {
  it('also checks keyed digests: a block tampered with (plain digest recomputed) is UNAUTHENTICATED; exit 1; the key is never printed', async () => {
    const key = deriveBlockKey('scan-test-key')
    const store = await BlockStore.open({ root: dir, layout: tinyLayout(), authKey: key.key, log: () => {} })
    const keys = store.keysFor(tokens(3 * BLOCK))
    for (const [b, k] of keys.entries()) await store.put(k, blockPayload(b))
    await tamperBlock(blockPath(dir, keys[1]), 'layer_1_sub_1_state_2', 4)
    const env = { ...process.env, PD_API_KEY: '', PD_BLOCK_KEY: 'scan-test-key' }
    const r = await cliWith(env, 'cache', 'scan', dir, '--verify')
    expect(r.code).toBe(1)
    expect(r.stdout).toMatch(new RegExp(`\\n {2}UNAUTHENTICATED ${keys[1]} \\S+: content_hmac_sha256 is not the content's HMAC under this key`))
    expect(r.stdout.trim().split('\n').at(-1)).toBe('verify: 2/3 block(s) match their content digest; 0 corrupt, 0 without a digest, 0 unreadable, 1 unauthenticated (keyed digests checked with the block key from the environment)')
    expect(r.stdout + r.stderr).not.toContain('scan-test-key')
    // Without a key the tamper passes: the plain digest was recomputed.
    const plain = await cliWith({ ...process.env, PD_API_KEY: '', PD_BLOCK_KEY: '' }, 'cache', 'scan', dir, '--verify')
    expect(plain.code).toBe(0)
    expect(plain.stdout.trim().split('\n').at(-1)).toBe('verify: 3/3 block(s) match their content digest; 0 corrupt, 0 without a digest, 0 unreadable')
  })
})

describe('verify-blocks checks each side against its own digest', () => {
  it('names the side whose content changed after it was written', async () => {
    const keys = await threeBlocks()
    const other = join(dir, 'other')
    const { store } = await openStore(other)
    for (const [b, k] of keys.entries()) await store.put(k, blockPayload(b))
    await flipBit(blockPath(other, keys[1]), 'layer_1_sub_1_state_2')
    const r = await cli('verify-blocks', dir, other)
    expect(r.code).toBe(1)
    expect(r.stdout).toMatch(/\n {2}B: content hashes to [0-9a-f]{64}, but content_sha256 says [0-9a-f]{64}: changed after it was written\n/)
    expect(r.stdout).not.toContain('metadata content_sha256')
    expect(r.stdout.trim().split('\n').at(-1)).toBe('2/3 identical')
  })
})
