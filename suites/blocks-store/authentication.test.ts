// Authentic blocks (issue 38): the plain content digest catches damage, not tampering; whoever can
// write the store can change a tensor and recompute content_sha256. With a block key every block
// also carries content_hmac_sha256, HMAC-SHA-256 under the key over what content_sha256 covers,
// and a store with the key serves only blocks whose keyed digest is right: a tampered block (its
// plain digest recomputed), a block written without the key and one written under another key are
// misses, refused and quarantined. Without a key the store behaves as before (and serves the
// tampered block: today's limit, shown here). The key is derived from PD_BLOCK_KEY or PD_API_KEY.
import { createHash, createHmac } from 'node:crypto'
import { readdir, readFile } from 'node:fs/promises'
import { join } from 'node:path'
import { inspect } from 'node:util'
import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import { SafetensorsFile } from '../../src/formats/safetensors/index.ts'
import {
  BlockStore, QUARANTINE_DIR, blockPath, encodeBlockFile, macMatches, verifyBlockDir, writeBlockFile, type StoreEvent,
} from '../../src/decode/store/index.ts'
import { blockKeyFromEnv, deriveBlockKey, type BlockKey } from '../../src/config/block-key.ts'
import { tamperBlock } from '../support/tamper-block.ts'
import { BLOCK, blockPayload, payloadDiff, tempDir, tinyLayout, tokens } from './helpers.ts'

let dir: string
let cleanup: () => Promise<void>
beforeEach(async () => ({ dir, cleanup } = await tempDir()))
afterEach(async () => await cleanup())

const KEY = deriveBlockKey('correct horse battery staple')
const OTHER = deriveBlockKey('another deployment')

/** A store on `root` with the block key `key` (null: none), collecting its events. */
async function open (root: string, key: BlockKey | null = KEY): Promise<{ store: BlockStore, events: StoreEvent[] }> {
  const events: StoreEvent[] = []
  const store = await BlockStore.open({ root, layout: tinyLayout(), authKey: key?.key, log: (e) => events.push(e) })
  return { store, events }
}

const openPlain = async (root: string): Promise<{ store: BlockStore, events: StoreEvent[] }> => await open(root, null)

/** Two blocks of one prompt written by a store with `key` (null: no key); their keys. */
async function twoBlocks (root: string, key: BlockKey | null): Promise<string[]> {
  const { store } = await open(root, key)
  const keys = store.keysFor(tokens(2 * BLOCK))
  for (const [b, k] of keys.entries()) await store.put(k, blockPayload(b), { parentHash: b > 0 ? keys[b - 1] : null })
  return keys
}

async function metadataOf (path: string): Promise<Record<string, string>> {
  const f = await SafetensorsFile.open(path)
  await f.close()
  return f.metadata
}

async function quarantined (root: string): Promise<string[]> {
  const out: string[] = []
  const q = join(root, QUARANTINE_DIR)
  for (const run of await readdir(q).catch(() => [])) {
    for (const sub of await readdir(join(q, run))) for (const name of await readdir(join(q, run, sub))) out.push(name.replace('.safetensors', ''))
  }
  return out
}

describe('the block key', () => {
  it('is HKDF-SHA-256 of PD_BLOCK_KEY, else of PD_API_KEY, with the documented salt and label (checked by hand, RFC 5869)', () => {
    const hkdf = (secret: string): Buffer => {
      const prk = createHmac('sha256', 'pd-bridge').update(secret).digest()
      return createHmac('sha256', prk).update('pd-bridge block authentication key/1').update(Buffer.from([1])).digest()
    }
    const tagWith = (k: Buffer | BlockKey['key']): string => createHmac('sha256', k).update('probe').digest('hex')
    const fromApi = blockKeyFromEnv({ PD_API_KEY: 'the-api-key' })
    const fromOwn = blockKeyFromEnv({ PD_API_KEY: 'the-api-key', PD_BLOCK_KEY: 'the-block-key' })
    expect(fromApi?.source).toBe('PD_API_KEY')
    expect(fromOwn?.source).toBe('PD_BLOCK_KEY')
    expect(tagWith(fromApi!.key)).toBe(tagWith(hkdf('the-api-key')))
    expect(tagWith(fromOwn!.key)).toBe(tagWith(hkdf('the-block-key')))
    // Derived, never the bearer token itself.
    expect(tagWith(fromApi!.key)).not.toBe(tagWith(Buffer.from('the-api-key')))
    expect(fromApi!.id).toBe(createHmac('sha256', hkdf('the-api-key')).update('pd-bridge block key id/1').digest('hex').slice(0, 16))
  })

  it('is absent without either variable; an empty one counts as unset', () => {
    expect(blockKeyFromEnv({})).toBeUndefined()
    expect(blockKeyFromEnv({ PD_BLOCK_KEY: '', PD_API_KEY: '' })).toBeUndefined()
    expect(blockKeyFromEnv({ PD_BLOCK_KEY: '', PD_API_KEY: 'k' })?.source).toBe('PD_API_KEY')
    expect(() => deriveBlockKey('')).toThrow(/non-empty secret/)
  })

  it('shows no secret when logged or serialised', () => {
    const k = deriveBlockKey('s3cret-value')
    const raw = createHmac('sha256', 'pd-bridge').update('s3cret-value').digest('hex')
    for (const text of [JSON.stringify(k), inspect(k, { depth: 5 }), String(k.key)]) {
      expect(text).not.toContain('s3cret-value')
      expect(text).not.toContain(raw.slice(0, 16))
    }
  })

  it('keyed digests compare in constant time and refuse malformed ones', () => {
    const a = 'a'.repeat(64)
    expect(macMatches(a, a)).toBe(true)
    expect(macMatches('b'.repeat(64), a)).toBe(false)
    expect(macMatches(undefined, a)).toBe(false)
    expect(macMatches('A'.repeat(64), 'A'.repeat(64))).toBe(false)
    expect(macMatches('a'.repeat(63), 'a'.repeat(63))).toBe(false)
  })
})

describe('a store with a block key', () => {
  it('stamps content_hmac_sha256: the documented HMAC, recomputed here from the file alone; content_sha256 is what it is without a key', async () => {
    const [k] = await twoBlocks(dir, KEY)
    const plainRoot = join(dir, 'plain')
    await twoBlocks(plainRoot, null)
    const path = blockPath(dir, k)
    const f = await SafetensorsFile.open(path)
    try {
      const h = createHmac('sha256', KEY.key).update('pd-bridge-block-content/1\n')
      const s = createHash('sha256').update('pd-bridge-block-content/1\n')
      for (const key of Object.keys(f.metadata).sort()) {
        if (key === 'created_at' || key === 'content_sha256' || key === 'content_hmac_sha256') continue
        for (const x of [h, s]) x.update(JSON.stringify([key, f.metadata[key]]) + '\n')
      }
      for (const name of [...f.tensors.keys()].sort()) {
        const t = await f.read(name)
        for (const x of [h, s]) x.update(JSON.stringify([name, t.dtype, t.shape, t.data.byteLength]) + '\n').update(t.data)
      }
      expect(f.metadata.content_hmac_sha256).toBe(h.digest('hex'))
      expect(f.metadata.content_sha256).toBe(s.digest('hex'))
    } finally {
      await f.close()
    }
    const plain = await metadataOf(blockPath(plainRoot, k))
    expect(plain.content_hmac_sha256).toBeUndefined()
    expect(plain.content_sha256).toBe((await metadataOf(path)).content_sha256)
  })

  it('serves its own blocks, bit for bit, and says it authenticates', async () => {
    const keys = await twoBlocks(dir, KEY)
    const { store, events } = await open(dir)
    expect(store.authenticated).toBe(true)
    for (const [b, k] of keys.entries()) expect(payloadDiff((await store.load(k))!.payload, blockPayload(b))).toBeNull()
    expect((await store.loadChain(keys)).length).toBe(2)
    expect(store.stats).toMatchObject({ verified: 4, refused: {}, quarantined: 0 })
    expect(events.filter((e) => e.kind === 'refused')).toEqual([])
  })

  it('encodes in memory (builder threads) the very bytes it writes', async () => {
    const layout = tinyLayout()
    const [k0, k1] = (await openPlain(join(dir, 'x'))).store.keysFor(tokens(2 * BLOCK))
    await writeBlockFile(dir, layout, k1, blockPayload(1), 1234.5, k0, KEY.key)
    expect(Buffer.from(encodeBlockFile(layout, k1, blockPayload(1), 1234.5, k0, KEY.key).bytes).equals(await readFile(blockPath(dir, k1)))).toBe(true)
    expect((await metadataOf(blockPath(dir, k1))).content_hmac_sha256).toMatch(/^[0-9a-f]{64}$/)
  })
})

describe('a tampered block: a tensor changed and content_sha256 recomputed', () => {
  it('without a key is served (the plain digest matches again): the limit the key closes', async () => {
    const keys = await twoBlocks(dir, null)
    await tamperBlock(blockPath(dir, keys[1]), 'layer_1_sub_1_state_2', 5)
    const { store } = await openPlain(dir)
    expect(store.authenticated).toBe(false)
    const loaded = await store.load(keys[1])
    expect(loaded).not.toBeNull()
    expect(payloadDiff(loaded!.payload, blockPayload(1))).not.toBeNull()
    expect(store.stats).toMatchObject({ verified: 1, refused: {}, quarantined: 0 })
  })

  it('with the key is a miss, refused (authentication), quarantined with its bytes, and cuts a chain there', async () => {
    const keys = await twoBlocks(dir, KEY)
    const path = blockPath(dir, keys[1])
    await tamperBlock(path, 'layer_1_sub_1_state_2', 5)
    const tampered = await readFile(path)
    const { store, events } = await open(dir)
    // The header passes (the keyed digest is there and well formed); the bytes are what is checked.
    expect(await store.has(keys[1])).toBe(true)
    expect((await store.loadChain(keys)).map((b) => b.hash)).toEqual([keys[0]])
    expect(store.stats).toMatchObject({ refused: { authentication: 1 }, quarantined: 1, verified: 1 })
    expect(store.refusalOf(keys[1])?.detail).toMatch(/^content_hmac_sha256 is not the content's HMAC under this deployment's block key: the block was changed by someone without the key \(its content_sha256 recomputed\), or written under another key$/)
    expect(events.find((e) => e.kind === 'refused')).toMatchObject({ hash: keys[1], reason: 'authentication', during: 'load' })
    expect(await quarantined(dir)).toEqual([keys[1]])
    const runs = await readdir(join(dir, QUARANTINE_DIR))
    expect((await readFile(join(dir, QUARANTINE_DIR, runs[0], keys[1][0], `${keys[1]}.safetensors`))).equals(tampered)).toBe(true)
    // A fresh write of the key puts an authentic block back.
    await store.put(keys[1], blockPayload(1), { parentHash: keys[0] })
    expect(payloadDiff((await store.load(keys[1]))!.payload, blockPayload(1))).toBeNull()
  })

  it('cache scan --verify\'s check finds it with the key, and not without', async () => {
    const keys = await twoBlocks(dir, KEY)
    await tamperBlock(blockPath(dir, keys[0]), 'layer_0_state_0', 2)
    const keyed = await verifyBlockDir(dir, KEY.key)
    expect(keyed).toMatchObject({ ok: 1, corrupt: 0, unauthenticated: 1, authenticated: true })
    expect(keyed.blocks.find((b) => b.hash === keys[0])).toMatchObject({ status: 'unauthenticated', problem: expect.stringMatching(/not the content's HMAC under this key/) })
    expect(await verifyBlockDir(dir)).toMatchObject({ ok: 2, unauthenticated: 0, authenticated: false })
  })
})

describe('blocks a store with the key did not write', () => {
  it('written without a key: refused at the scan (unauthenticated) and quarantined: turning the key on starts cold', async () => {
    const keys = await twoBlocks(dir, null)
    const { store, events } = await open(dir)
    expect(store.size).toBe(0)
    expect(store.stats).toMatchObject({ refused: { unauthenticated: 2 }, quarantined: 2 })
    expect(events.find((e) => e.kind === 'refused')).toMatchObject({ reason: 'unauthenticated', during: 'scan', detail: expect.stringMatching(/^no content_hmac_sha256 \(written without the block key\)/) })
    expect((await quarantined(dir)).sort()).toEqual([...keys].sort())
    expect(await store.load(keys[0])).toBeNull()
  })

  it('written under another key: a miss at load (authentication), quarantined', async () => {
    const keys = await twoBlocks(dir, OTHER)
    const { store } = await open(dir)
    expect(await store.load(keys[0])).toBeNull()
    expect(store.stats).toMatchObject({ refused: { authentication: 1 }, quarantined: 1 })
  })

  it('a keyed block read by a store without a key is served as before (the keyed digest is one more metadata key)', async () => {
    const keys = await twoBlocks(dir, KEY)
    const { store } = await openPlain(dir)
    expect(payloadDiff((await store.load(keys[1]))!.payload, blockPayload(1))).toBeNull()
    expect(store.stats).toMatchObject({ verified: 1, refused: {} })
  })

  it('bytes encoded without the key are refused by putEncoded, quarantined, never indexed', async () => {
    const { store } = await open(dir)
    const [k] = store.keysFor(tokens(BLOCK))
    const unkeyed = encodeBlockFile(tinyLayout(), k, blockPayload(0), 1, null)
    await expect(store.putEncoded(k, unkeyed)).rejects.toThrow(/is not one this store serves under .* \(unauthenticated: no content_hmac_sha256/)
    expect(store.size).toBe(0)
    expect(await quarantined(dir)).toEqual([k])
  })
})

describe('bad input', () => {
  it('a key that is not a secret KeyObject is refused before the store opens', async () => {
    await expect(BlockStore.open({ root: dir, layout: tinyLayout(), authKey: 'k' as never })).rejects.toThrow(/authKey must be a secret KeyObject/)
  })
})
