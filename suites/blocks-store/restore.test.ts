// Restore rules: pooling deltas join without gaps (a gap is rejected), a full-form pool resets the
// chain, the walk-back skips trailing blocks with placeholders, and a chain in which no block holds
// the rotating state is rejected.
import { unlink } from 'node:fs/promises'
import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import {
  PLACEHOLDER, RestoreRejected, blockPath, plainState, poolingDeltaState, poolingFullState, restoreChain, restorePoolingChain,
  type BlockPayload, type ChainBlock, type PlainState,
} from '../../src/decode/store/index.ts'
import type { Tensor } from '../../src/formats/safetensors/index.ts'
import { BLOCK, blockPayload, expectedCacheAt, openStore, payloadDiff, snapshotAt, tempDir, tokens } from './helpers.ts'

let dir: string
let cleanup: () => Promise<void>
beforeEach(async () => ({ dir, cleanup } = await tempDir()))
afterEach(async () => await cleanup())

const chainOf = (payloads: BlockPayload[]): ChainBlock[] => payloads.map((payload, i) => ({ hash: String(i).repeat(64).slice(0, 64), payload }))

/** Block b's payload with every layer a placeholder (a non-last block stored without a snapshot). */
function placeholders (b: number): BlockPayload {
  const p = blockPayload(b)
  return { ...p, layers: p.layers.map(() => PLACEHOLDER), layerMetaStates: p.layers.map(() => []) }
}

describe('a chain of delta blocks restores the exact cumulative cache', () => {
  it('rebuilds every layer bit for bit, through the store, for the whole prompt and for a prefix', async () => {
    const { store } = await openStore(dir)
    const ids = tokens(4 * BLOCK + 5)
    const keys = store.keysFor(ids)
    expect(keys).toHaveLength(4)
    for (const [b, k] of keys.entries()) await store.put(k, blockPayload(b))
    const full = await store.restore(ids)
    if (!full.ok) throw new Error(full.reason)
    expect(full.cache.tokenCount).toBe(4 * BLOCK)
    expect(full.cache.hashes).toEqual(keys)
    expect(payloadDiff(full.cache, expectedCacheAt(4 * BLOCK))).toBeNull()
    expect(full.cache.layerMetaStates).toEqual(expectedCacheAt(4 * BLOCK).layerMetaStates)

    const prefix = await store.restore(ids.slice(0, 2 * BLOCK + 3))
    if (!prefix.ok) throw new Error(prefix.reason)
    expect(prefix.cache.tokenCount).toBe(2 * BLOCK)
    expect(payloadDiff(prefix.cache, expectedCacheAt(2 * BLOCK))).toBeNull()
  })

  it('stops at the first missing block of the chain', async () => {
    const { store } = await openStore(dir)
    const ids = tokens(3 * BLOCK)
    const keys = store.keysFor(ids)
    for (const [b, k] of keys.entries()) await store.put(k, blockPayload(b))
    await unlink(blockPath(dir, keys[1]))
    await store.rescan()
    const r = await store.restore(ids)
    if (!r.ok) throw new Error(r.reason)
    expect(r.cache.tokenCount).toBe(BLOCK)
  })
})

describe('a gap in a pooling delta chain is rejected', () => {
  it('rejects blocks 0 and 2 without block 1', () => {
    // Give block 2's windows the offset a second block would have, so the pool gap is the only fault.
    const third = blockPayload(2)
    third.layerMetaStates = blockPayload(1).layerMetaStates
    expect(() => restoreChain(chainOf([blockPayload(0), third]), BLOCK)).toThrow(/layer 1 \(CacheList\), sub-cache 1, block 1: delta rows start at 8 but 4 rows precede them/)
  })

  it('rejects a delta after a block with no state for the layer', () => {
    expect(() => restoreChain(chainOf([blockPayload(0), placeholders(1), blockPayload(2)]), BLOCK)).toThrow(/follow a block with no pooling state/)
  })

  it('accepts the same chain when the block after the hole holds the full pool (it resets the base)', () => {
    const restored = restoreChain(chainOf([blockPayload(0), placeholders(1), blockPayload(2, 'full'), blockPayload(3)]), BLOCK)
    expect(restored.tokenCount).toBe(4 * BLOCK)
    expect(payloadDiff(restored, expectedCacheAt(4 * BLOCK))).toBeNull()
  })
})

describe('walk-back over trailing placeholders', () => {
  it('drops trailing blocks without state and restores up to the last block that has it', async () => {
    const { store } = await openStore(dir)
    const ids = tokens(4 * BLOCK)
    const keys = store.keysFor(ids)
    const payloads = [blockPayload(0), blockPayload(1), blockPayload(2), placeholders(3)]
    for (const [b, k] of keys.entries()) await store.put(k, payloads[b])
    const r = await store.restore(ids)
    if (!r.ok) throw new Error(r.reason)
    expect(r.cache).toMatchObject({ tokenCount: 3 * BLOCK, walkedBack: 1, hashes: keys.slice(0, 3) })
    expect(payloadDiff(r.cache, expectedCacheAt(3 * BLOCK))).toBeNull()
  })

  it('walks back past a block where only one layer is a placeholder', () => {
    const last = blockPayload(2)
    last.layers[0] = PLACEHOLDER
    const r = restoreChain(chainOf([blockPayload(0), blockPayload(1), last]), BLOCK)
    expect(r).toMatchObject({ tokenCount: 2 * BLOCK, walkedBack: 1 })
  })
})

describe('a chain in which no block holds the rotating state is rejected', () => {
  it('rejects, logs and returns the reason through the store', async () => {
    const { store, events } = await openStore(dir)
    const ids = tokens(2 * BLOCK)
    const keys = store.keysFor(ids)
    for (const [b, k] of keys.entries()) await store.put(k, placeholders(b))
    const r = await store.restore(ids)
    expect(r).toMatchObject({ ok: false, matchedBlocks: 2 })
    expect((r as { reason: string }).reason).toMatch(/no block of the 2-block chain holds the state of every non-sliceable layer \(layer 0, RotatingKVCache/)
    expect(events.some((e) => e.kind === 'restore-rejected')).toBe(true)
  })
})

describe('states that disagree with the chain length are rejected', () => {
  it('rejects a rotating state whose offset is not the chain\'s end', () => {
    const last = blockPayload(1)
    last.layerMetaStates[0] = ['0', '8', String(3 * BLOCK), '8']
    expect(() => restoreChain(chainOf([blockPayload(0), last]), BLOCK)).toThrow(/layer 0 \(RotatingKVCache\): rotating state is at offset 48, the chain ends at token 32/)
  })

  it('rejects a pool whose rows do not make tokens / ratio', () => {
    // A full-form pool from a later boundary holds too many rows.
    const wrong = blockPayload(1)
    const later = blockPayload(2, 'full')
    if (wrong.layers[2].kind !== 'cache-list' || later.layers[2].kind !== 'cache-list') throw new Error('layer 2 is HCA')
    wrong.layers[2].subs[1] = later.layers[2].subs[1]
    expect(() => restoreChain(chainOf([blockPayload(0), wrong]), BLOCK)).toThrow(/6 pooled rows, but 32 tokens at ratio 8 make 4/)
  })
})

describe('KVCache layers join their per-block rows', () => {
  it('concatenates keys and values along the token axis', () => {
    const kv = (b: number): BlockPayload => {
      const t = (from: number): Tensor => ({ dtype: 'F32', shape: [1, 1, 2, 1], data: new Uint8Array(Float32Array.of(from, from + 1).buffer) })
      return { layers: [plainState([t(10 * b), t(10 * b + 5)], 'KVCache')], layerCacheTypes: ['KVCache'], layerMetaStates: [[]] }
    }
    const r = restoreChain(chainOf([kv(0), kv(1), kv(2)]), 2)
    const keys = (r.layers[0] as PlainState).elements[0] as Tensor
    expect(keys.shape).toEqual([1, 1, 6, 1])
    expect([...new Float32Array(keys.data.slice().buffer)]).toEqual([0, 1, 10, 11, 20, 21])
  })
})

describe('restorePoolingChain', () => {
  const pool = (t: number): ReturnType<typeof snapshotAt>[number]['pools'][number] => snapshotAt(t)[1].pools[0]
  const delta = (b: number): PlainState => poolingDeltaState(pool((b + 1) * BLOCK), b * 4, (b + 1) * 4)

  it('joins deltas into the full five-element state with the last block\'s carries', () => {
    const r = restorePoolingChain([delta(0), delta(1), delta(2)])
    expect(payloadDiff({ layers: [r] }, { layers: [poolingFullState(pool(3 * BLOCK))] })).toBeNull()
  })

  it('rejects an overlap as well as a gap', () => {
    expect(() => restorePoolingChain([delta(0), delta(1), delta(1)])).toThrow(/delta rows start at 4 but 8 rows precede them/)
    expect(() => restorePoolingChain([delta(1)])).toThrow(/delta rows start at 4 but 0 rows precede them/)
  })

  it('rejects a range that disagrees with its rows', () => {
    const bad = delta(1)
    bad.elements[5] = { dtype: 'I64', shape: [2], data: new Uint8Array(BigInt64Array.of(4n, 9n).buffer) }
    expect(() => restorePoolingChain([delta(0), bad])).toThrow(/range \[4, 9\) does not match its 4 rows/)
  })

  it('rejects a last block without pooling state', () => {
    expect(() => restorePoolingChain([delta(0), null])).toThrow(RestoreRejected)
  })
})
