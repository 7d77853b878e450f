// DeepSeek-V4's cache classes per layer, the PoolingCache delta form, and the geometry fingerprint.
import { describe, expect, it } from 'vitest'
import { deepseekV4FlashConfigJson, parseDeepseekV4Config } from '../../src/model/config.ts'
import {
  POOLING_DESCRIPTOR, deepseekV4BlockPayload, deepseekV4CacheLayout, deepseekV4GeometryFingerprint, deepseekV4StoreLayout,
  geometryFingerprint, layoutCachelistSubtypes, poolingDeltaRange, poolingDeltaState, readInt64Vector, rotatingState, sliceAlong,
  type CacheListState, type PlainState,
} from '../../src/decode/store/index.ts'
import type { Tensor } from '../../src/formats/safetensors/index.ts'
import { BLOCK, SPECS, payloadDiff, snapshotAt } from './helpers.ts'

const flash = parseDeepseekV4Config(deepseekV4FlashConfigJson())

describe('the per-layer cache structure of DeepSeek-V4 (oMLX make_cache)', () => {
  it('gives RotatingKVCache to sliding layers and CacheList(Rotating, Pooling x2 | x1) to CSA | HCA layers', () => {
    const specs = deepseekV4CacheLayout(flash)
    expect(specs).toHaveLength(43)
    const subtypes = layoutCachelistSubtypes(specs)
    flash.layerTypes.forEach((type, i) => {
      if (type === 'sliding_attention') {
        expect(specs[i]).toMatchObject({ cacheType: 'RotatingKVCache', poolRatios: [], window: 128 })
        expect(subtypes[String(i)]).toBeUndefined()
      } else if (type === 'compressed_sparse_attention') {
        expect(specs[i]).toMatchObject({ cacheType: 'CacheList', poolRatios: [4, 4] })
        expect(subtypes[String(i)]).toEqual(['RotatingKVCache', 'PoolingCache:5', 'PoolingCache:5'])
      } else {
        expect(specs[i]).toMatchObject({ cacheType: 'CacheList', poolRatios: [128] })
        expect(subtypes[String(i)]).toEqual(['RotatingKVCache', 'PoolingCache:5'])
      }
    })
    // Flash: two sliding layers, then CSA and HCA alternating.
    expect(specs.slice(0, 4).map((s) => s.cacheType)).toEqual(['RotatingKVCache', 'RotatingKVCache', 'CacheList', 'CacheList'])
    expect(POOLING_DESCRIPTOR).toBe('PoolingCache:5')
  })

  it('makes a store layout with oMLX\'s DeepSeek-V4 block size, 2048, by default', () => {
    const layout = deepseekV4StoreLayout(flash, { modelName: '/m', geometryFingerprint: 'g' })
    expect(layout).toMatchObject({ blockSize: 2048, payloadLayout: 'embedded', modelName: '/m', geometryFingerprint: 'g' })
    expect(layout.layerCacheTypes).toHaveLength(43)
  })

  it('refuses a compressed layer without a positive ratio', () => {
    expect(() => deepseekV4CacheLayout({ layerTypes: ['heavily_compressed_attention'], compressRatios: [0], slidingWindow: 128 })).toThrow(/layer 0: heavily_compressed_attention needs a positive compress ratio/)
  })
})

describe('the pooled rows a block adds: [previous boundary / ratio, token count / ratio)', () => {
  it('follows oMLX\'s compaction formula', () => {
    expect(poolingDeltaRange(2048, 2048, 4)).toEqual({ start: 0, end: 512 })
    expect(poolingDeltaRange(4096, 2048, 4)).toEqual({ start: 512, end: 1024 })
    expect(poolingDeltaRange(4096, 2048, 128)).toEqual({ start: 16, end: 32 })
    // A tail snapshot mid-block starts at the last full boundary.
    expect(poolingDeltaRange(3 * 2048 + 100, 2048, 128)).toEqual({ start: 48, end: 48 })
    expect(() => poolingDeltaRange(0, 2048, 4)).toThrow(/must be positive integers/)
  })
})

describe('a DeepSeek-V4 block payload', () => {
  it('stores each pool as a 6-element PoolingCacheDelta with its int64 row range, carries as given', () => {
    const t = 2 * BLOCK
    const p = deepseekV4BlockPayload(SPECS, snapshotAt(t), { tokenCount: t, blockSize: BLOCK })
    const csa = p.layers[1] as CacheListState
    expect(csa.subs.map((s) => s.className)).toEqual([undefined, 'PoolingCacheDelta', 'PoolingCacheDelta'])
    for (const sub of csa.subs.slice(1)) {
      expect(sub.elements).toHaveLength(6)
      expect(readInt64Vector(sub.elements[5] as Tensor, 'range')).toEqual([4, 8])
      expect((sub.elements[2] as Tensor).shape).toEqual([1, 4, 4])
      // At a boundary that is a multiple of the ratio the open buffer is empty: None, as mlx-lm stores it.
      expect(sub.elements[0]).toBeNull()
      expect((sub.elements[3] as Tensor).shape).toEqual([1, 1, 4, 8])
    }
    const hca = p.layers[2] as CacheListState
    expect(readInt64Vector(hca.subs[1].elements[5] as Tensor, 'range')).toEqual([2, 4])
    expect(hca.subs[1].elements[3]).toBeNull()
    expect(p.layerMetaStates[2]).toEqual([['RotatingKVCache', 'PoolingCache'], [['0', '8', '32', '8'], 8]])
    expect(p.layerCacheTypes).toEqual(['RotatingKVCache', 'CacheList', 'CacheList', 'CacheList'])
  })

  it('gives the same bytes from a pool holding only the new rows (a streaming writer) as from the whole pool', () => {
    const t = 3 * BLOCK
    const whole = snapshotAt(t)
    const recent = whole.map((layer, i) => ({
      ...layer,
      pools: layer.pools.map((pool, j) => {
        const from = (2 * BLOCK) / SPECS[i].poolRatios[j]
        return { ...pool, pooled: sliceAlong(pool.pooled, 1, from, pool.pooled.shape[1], 'test'), pooledStart: from }
      }),
    }))
    const a = deepseekV4BlockPayload(SPECS, whole, { tokenCount: t, blockSize: BLOCK })
    const b = deepseekV4BlockPayload(SPECS, recent, { tokenCount: t, blockSize: BLOCK })
    expect(payloadDiff(a, b)).toBeNull()
    expect(recent[1].pools[0].pooled.shape[1]).toBe(4)
  })

  it('keeps the full form when the pool does not end at token count / ratio, as oMLX does', () => {
    const p = deepseekV4BlockPayload(SPECS, snapshotAt(BLOCK), { tokenCount: 2 * BLOCK, blockSize: BLOCK })
    expect((p.layers[1] as CacheListState).subs[1].className).toBe('PoolingCache')
    expect((p.layers[1] as CacheListState).subs[1].elements).toHaveLength(5)
  })

  it('refuses delta rows the given pool does not hold', () => {
    const pool = snapshotAt(BLOCK)[1].pools[0]
    expect(() => poolingDeltaState(pool, 2, 6)).toThrow(/rows \[2, 6\) are not all within the 4 pooled rows held from row 0/)
  })

  it('writes the rotating meta as strings [keep, max_size, offset, _idx], _idx clamped to the window', () => {
    const keys: Tensor = { dtype: 'F32', shape: [1, 1, 10, 1], data: new Uint8Array(40) }
    const { state, meta } = rotatingState({ keys, values: keys, offset: 4096, maxSize: 8 })
    expect(meta).toEqual(['0', '8', '4096', '8'])
    // a (keys, values) state carries no class name, as oMLX writes it
    expect((state as PlainState).className).toBeUndefined()
  })
})

describe('the geometry fingerprint changes with the rope tables, the window, the layer pattern and the profile', () => {
  const profile = { name: 'decoder', version: 1 }
  const base = deepseekV4GeometryFingerprint(flash, profile)

  it('is stable for the same inputs and a 64-hex digest', () => {
    expect(deepseekV4GeometryFingerprint(parseDeepseekV4Config(deepseekV4FlashConfigJson()), { version: 1, name: 'decoder' })).toBe(base)
    expect(base).toMatch(/^[0-9a-f]{64}$/)
  })

  it('differs for another YaRN factor (the damage the seed README describes)', () => {
    const json = deepseekV4FlashConfigJson()
    const rope = { ...(json.rope_scaling as Record<string, unknown> ?? {}) }
    const changed = parseDeepseekV4Config({ ...json, rope_scaling: { ...rope, factor: 32 } })
    expect(changed.rope.compress.factor).not.toBe(flash.rope.compress.factor)
    expect(deepseekV4GeometryFingerprint(changed, profile)).not.toBe(base)
  })

  it('differs for another window, layer ratios, table length or profile', () => {
    const g = { rope: flash.rope, maxPositionEmbeddings: flash.maxPositionEmbeddings, slidingWindow: flash.slidingWindow, compressRatios: flash.compressRatios, profile }
    expect(geometryFingerprint(g)).toBe(base)
    expect(geometryFingerprint({ ...g, slidingWindow: 256 })).not.toBe(base)
    const swapped = flash.compressRatios.map((r) => (r === 4 ? 128 : r === 128 ? 4 : r))
    expect(geometryFingerprint({ ...g, compressRatios: swapped })).not.toBe(base)
    expect(geometryFingerprint({ ...g, maxPositionEmbeddings: 65536 })).not.toBe(base)
    expect(geometryFingerprint({ ...g, profile: { name: 'decoder', version: 2 } })).not.toBe(base)
  })
})
