// Every payload form survives write -> read bit for bit, under oMLX's tensor names and metadata keys.
import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import { SafetensorsFile, writeSafetensors, type Tensor } from '../../src/formats/safetensors/index.ts'
import {
  PLACEHOLDER, blockPath, cacheList, plainState, readBlockFile, writeBlockFile, blockKeyChain,
  type BlockPayload, type CacheListState, type LayerPayload,
} from '../../src/decode/store/index.ts'
import { BLOCK, GEOMETRY_A, MODEL, blockPayload, openStore, payloadDiff, tempDir, tinyLayout, tokens } from './helpers.ts'

let dir: string
let cleanup: () => Promise<void>
beforeEach(async () => ({ dir, cleanup } = await tempDir()))
afterEach(async () => await cleanup())

const f32 = (shape: number[], values: number[]): Tensor => ({ dtype: 'F32', shape, data: new Uint8Array(Float32Array.from(values).buffer) })
const i64 = (values: number[]): Tensor => ({ dtype: 'I64', shape: [values.length], data: new Uint8Array(BigInt64Array.from(values.map(BigInt)).buffer) })
const bf16 = (shape: number[], codes: number[]): Tensor => ({ dtype: 'BF16', shape, data: new Uint8Array(Uint16Array.from(codes).buffer) })
const HASH = 'c'.repeat(64)

/** A four-layer payload using every form: plain with and without class, CacheList with None, zero-dim and nested elements, placeholder. */
function everyForm (): BlockPayload {
  const layers: LayerPayload[] = [
    plainState([bf16([1, 1, 2, 2], [0x3f80, 0xbf80, 0x7fc1, 0x0001]), { dtype: 'BF16', shape: [1, 1, 2, 0], data: new Uint8Array(0) }], 'RotatingKVCache'),
    cacheList([
      plainState([f32([1, 2], [1.5, -0])], 'RotatingKVCache'),
      plainState([null, null, f32([1, 1, 2], [3, 4]), null, null, i64([0, 1])], 'PoolingCacheDelta'),
      plainState([f32([2], [5, 6]), { kind: 'tuple', elements: [f32([1], [7]), null, { kind: 'nstate', className: 'Inner', elements: [i64([9])] }] }]),
    ]),
    PLACEHOLDER,
    plainState([f32([3], [1, 2, 3]), { dtype: 'F32', shape: [0], data: new Uint8Array(0) }, null]),
  ]
  return { layers, layerCacheTypes: ['RotatingKVCache', 'CacheList', 'CacheList', 'CacheList'], layerMetaStates: [['0', '8', '16', '2'], [['RotatingKVCache', 'PoolingCache'], [['0', '8', '16', '1'], 4]], [], ['x']] }
}

const layoutForEveryForm = () => tinyLayout({ layerCacheTypes: ['RotatingKVCache', 'CacheList', 'CacheList', 'CacheList'], cachelistSubtypes: {} })

describe('a payload with every form round-trips bit for bit', () => {
  it('reads back the same layers, class names, None elements, zero-size dims (dtype kept) and nesting', async () => {
    const payload = everyForm()
    await writeBlockFile(dir, layoutForEveryForm(), HASH, payload, 1.5)
    const back = await readBlockFile(blockPath(dir, HASH))
    expect(payloadDiff(back.payload, payload)).toBeNull()
    expect(back.payload.layerMetaStates).toEqual(payload.layerMetaStates)
    // payloadDiff compares bits; spot-check that -0 stayed -0.
    const list = back.payload.layers[1] as CacheListState
    const window = list.subs[0].elements[0] as Tensor
    expect(Object.is(new Float32Array(window.data.slice().buffer)[1], -0)).toBe(true)
  })

  it('names tensors and metadata keys as oMLX does', async () => {
    await writeBlockFile(dir, layoutForEveryForm(), HASH, everyForm(), 1.5)
    const file = await SafetensorsFile.open(blockPath(dir, HASH))
    try {
      expect([...file.tensors.keys()].sort()).toEqual([
        'layer_0_state_0', 'layer_0_state_1',
        'layer_1_sub_0_state_0',
        'layer_1_sub_1_state_0', 'layer_1_sub_1_state_1', 'layer_1_sub_1_state_2', 'layer_1_sub_1_state_3', 'layer_1_sub_1_state_4', 'layer_1_sub_1_state_5',
        'layer_1_sub_2_state_0', 'layer_1_sub_2_state_1_state_0', 'layer_1_sub_2_state_1_state_1', 'layer_1_sub_2_state_1_state_2_state_0',
        'layer_2_state_0', 'layer_2_state_1',
        'layer_3_state_0', 'layer_3_state_1', 'layer_3_state_2',
      ].sort())
      const m = file.metadata
      const layerKeys = Object.fromEntries(Object.entries(m).filter(([k]) => k.startsWith('layer_') && k !== 'layer_cache_types' && k !== 'layer_meta_states'))
      expect(layerKeys).toEqual({
        layer_0_state_count: '2', layer_0_state_class_name: 'RotatingKVCache', layer_0_state_1_zero_dim: '1,1,2,0',
        layer_1_sub_count: '3',
        layer_1_sub_0_state_count: '1', layer_1_sub_0_state_class_name: 'RotatingKVCache',
        layer_1_sub_1_state_count: '6', layer_1_sub_1_state_class_name: 'PoolingCacheDelta',
        layer_1_sub_1_state_0_none: '1', layer_1_sub_1_state_1_none: '1', layer_1_sub_1_state_3_none: '1', layer_1_sub_1_state_4_none: '1',
        layer_1_sub_2_state_count: '2', layer_1_sub_2_state_1_nested: 'tuple', layer_1_sub_2_state_1_state_count: '3',
        layer_1_sub_2_state_1_state_1_none: '1', layer_1_sub_2_state_1_state_2_nested: 'nstate',
        layer_1_sub_2_state_1_state_2_state_class_name: 'Inner', layer_1_sub_2_state_1_state_2_state_count: '1',
        layer_2_state_count: '2',
        layer_3_state_count: '3', layer_3_state_1_zero_dim: '0', layer_3_state_2_none: '1',
      })
      // Stand-ins: None and the placeholder are float32 (1,) zeros; a zero-dim stand-in keeps its dtype.
      expect(file.info('layer_1_sub_1_state_0')).toMatchObject({ dtype: 'F32', shape: [1] })
      expect(file.info('layer_2_state_0')).toMatchObject({ dtype: 'F32', shape: [1] })
      expect(file.info('layer_0_state_1')).toMatchObject({ dtype: 'BF16', shape: [1] })
      expect([...(await file.read('layer_2_state_1')).data]).toEqual([0, 0, 0, 0])
    } finally {
      await file.close()
    }
  })
})

describe('block metadata carries oMLX\'s fields plus the geometry fingerprint', () => {
  it('stamps every field; format "4" for a block holding PoolingCache deltas, "3" otherwise', async () => {
    const { store } = await openStore(dir)
    const [k0, k1] = store.keysFor(tokens(2 * BLOCK))
    const before = Date.now() / 1000
    await store.put(k0, blockPayload(0))
    await store.put(k1, blockPayload(1, 'full'))
    const m0 = (await SafetensorsFile.open(blockPath(dir, k0)))
    const m1 = (await SafetensorsFile.open(blockPath(dir, k1)))
    try {
      const meta = m0.metadata
      expect(meta.omlx_cache_format_version).toBe('4')
      expect(m1.metadata.omlx_cache_format_version).toBe('3')
      expect(meta.block_hash).toBe(k0)
      expect(meta.token_count).toBe(String(BLOCK))
      expect(meta.num_layers).toBe('4')
      expect(meta.model_name).toBe(MODEL)
      expect(meta.block_size).toBe(String(BLOCK))
      expect(meta.payload_layout).toBe('embedded')
      expect(meta.geometry_fingerprint).toBe(GEOMETRY_A)
      expect(meta.layer_cache_types).toBe('["RotatingKVCache", "CacheList", "CacheList", "CacheList"]')
      expect(meta.cache_signature).toBe(
        '{"block_size":16,"cachelist_subtypes":{"1":["RotatingKVCache","PoolingCache:5","PoolingCache:5"],"2":["RotatingKVCache","PoolingCache:5"],' +
        '"3":["RotatingKVCache","PoolingCache:5","PoolingCache:5"]},"layer_cache_types":["RotatingKVCache","CacheList","CacheList","CacheList"],' +
        '"model_name":"/models/tiny-dsv4","num_layers":4,"payload_layout":"embedded"}')
      expect(JSON.parse(meta.layer_meta_states)).toEqual([
        ['0', '8', '16', '8'],
        [['RotatingKVCache', 'PoolingCache', 'PoolingCache'], [['0', '8', '16', '8'], 4, 4]],
        [['RotatingKVCache', 'PoolingCache'], [['0', '8', '16', '8'], 8]],
        [['RotatingKVCache', 'PoolingCache', 'PoolingCache'], [['0', '8', '16', '8'], 4, 4]],
      ])
      const created = Number(meta.created_at)
      expect(created).toBeGreaterThanOrEqual(before - 1)
      expect(created).toBeLessThanOrEqual(Date.now() / 1000 + 1)
    } finally {
      await m0.close()
      await m1.close()
    }
  })
})

describe('the DeepSeek-V4 payload of the tiny model round-trips through a store', () => {
  it('loads back every block bit for bit', async () => {
    const { store } = await openStore(dir)
    const keys = store.keysFor(tokens(3 * BLOCK))
    for (const [b, k] of keys.entries()) expect((await store.put(k, blockPayload(b))).written).toBe(true)
    for (const [b, k] of keys.entries()) {
      const loaded = await store.load(k)
      expect(loaded).not.toBeNull()
      expect(payloadDiff(loaded!.payload, blockPayload(b))).toBeNull()
    }
  })
})

describe('payloads the format cannot hold are refused before anything is written', () => {
  it('refuses a class-less state of two (1,) tensors, which would read back as a placeholder', async () => {
    const payload = everyForm()
    payload.layers[3] = plainState([f32([1], [1]), f32([1], [2])])
    await expect(writeBlockFile(dir, layoutForEveryForm(), HASH, payload, 0)).rejects.toThrow(/layer_3: .*reads back as a placeholder/)
  })

  it('refuses a payload whose layers do not match the store layout', async () => {
    const { store } = await openStore(dir)
    const [k] = store.keysFor(tokens(BLOCK))
    const bad = blockPayload(0)
    await expect(store.put(k, { ...bad, layers: bad.layers.slice(1) })).rejects.toThrow(/payload has 3 layers, the store's layout has 4/)
    await expect(store.put(k, { ...bad, layers: [bad.layers[1], ...bad.layers.slice(1)] })).rejects.toThrow(/layer 0 is a cache-list but its cache type is RotatingKVCache/)
    expect(blockKeyChain(MODEL, tokens(BLOCK), BLOCK)).toEqual([k])
  })
})

describe('reading refuses block files whose metadata does not account for their tensors', () => {
  async function craft (tensors: Record<string, Tensor>, extra: Record<string, string>): Promise<string> {
    await writeBlockFile(dir, layoutForEveryForm(), HASH, everyForm(), 0)
    const good = await SafetensorsFile.open(blockPath(dir, HASH))
    const metadata = { ...good.metadata, ...extra }
    const all: Record<string, Tensor> = {}
    for (const name of good.tensors.keys()) all[name] = await good.read(name)
    await good.close()
    await writeSafetensors(blockPath(dir, HASH), { ...all, ...tensors }, metadata)
    return blockPath(dir, HASH)
  }

  it('names a stray tensor', async () => {
    await expect(readBlockFile(await craft({ layer_9_state_0: f32([1], [0]) }, {}))).rejects.toThrow(/tensor layer_9_state_0 belongs to no layer state/)
  })

  it('names a per-layer key no reader knows (e.g. TurboQuant)', async () => {
    await expect(readBlockFile(await craft({}, { layer_0_turboquant_v2: '1' }))).rejects.toThrow(/metadata layer_0_turboquant_v2 is not part of any layer state/)
  })

  it('names a malformed count', async () => {
    await expect(readBlockFile(await craft({}, { layer_3_state_count: '3x' }))).rejects.toThrow(/layer_3_state_count must be a count, got "3x"/)
  })
})
