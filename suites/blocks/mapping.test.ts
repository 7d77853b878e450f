// The mapping itself, without a store where none is needed: the per-tensor BF16 rule, payloads
// round-tripping through restoreCache bit for bit, block sizes that leave pooling buffers open,
// a window from a writer that keeps 128 rows, and every refusal naming its layer and problem.
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { Tensor } from '../../src/formats/safetensors/index.ts'
import { getProfile } from '../../src/model/profiles/index.ts'
import { bf16ToF32 } from '../../src/numerics/bf16.ts'
import { bitsToF32 } from '../../src/numerics/bits.ts'
import { concatAlong, sliceAlong, type BlockPayload, type CacheListState, type PlainState } from '../../src/decode/store/index.ts'
import { cacheToBlockPayload, exactBf16Codes, restoreCache, storageRuleFor, storeF32 } from '../../src/decode/prefix-cache/index.ts'
import type { ModelCache } from '../../src/model/engine/index.ts'
import { BS, cacheDifferences, nativePrefill, openPrefixCache, prompt, tinyModel, type TinyModel } from './helpers.ts'

let model: TinyModel
beforeAll(async () => { model = await tinyModel() })
afterAll(async () => await model.cleanup())

const made = new Map<string, { at: ModelCache[], payloads: BlockPayload[] }>()

/** Native caches at 256 and 512 tokens of one prompt, and the two blocks' payloads (a fresh copy to mutate). */
function twoBlocks (profile: string): { at: ModelCache[], payloads: BlockPayload[] } {
  let m = made.get(profile)
  if (m === undefined) made.set(profile, m = makeTwoBlocks(profile))
  return { at: m.at, payloads: structuredClone(m.payloads) }
}

function makeTwoBlocks (profile: string): { at: ModelCache[], payloads: BlockPayload[] } {
  const engine = model.engine(profile)
  const tokens = prompt(2 * BS, 61)
  const cache = engine.newCache()
  engine.prefill(tokens.slice(0, BS), cache, { logits: 'none' })
  const first = cache.clone()
  engine.prefill(tokens.slice(BS), cache, { logits: 'none' })
  const storage = storageRuleFor(engine.profile)
  return { at: [first, cache], payloads: [cacheToBlockPayload(engine.config, first, 0, BS, { storage }), cacheToBlockPayload(engine.config, cache, 1, BS, { storage })] }
}

function state (p: BlockPayload, layer: number, sub?: number): PlainState {
  const l = p.layers[layer]
  return sub === undefined ? l as PlainState : (l as CacheListState).subs[sub]
}

describe('the BF16 storage rule', () => {
  it('keeps exactly the bf16 values: every non-NaN code and the canonical NaNs, never another NaN payload', () => {
    for (let code = 0; code < 0x10000; code++) {
      const codes = exactBf16Codes(Float32Array.of(bf16ToF32(code)))
      const nan = (code & 0x7f80) === 0x7f80 && (code & 0x7f) !== 0
      if (!nan || (code & 0x7fff) === 0x7fc0) expect(codes?.[0], `code ${code}`).toBe(code)
      else expect(codes, `code ${code}`).toBeNull()
    }
  })

  it('refuses every value with any of the low 16 bits set (all 65535 patterns under 1.0 and -0)', () => {
    for (let low = 1; low < 0x10000; low++) {
      expect(exactBf16Codes(Float32Array.of(bitsToF32(0x3f800000 | low)))).toBeNull()
      expect(exactBf16Codes(Float32Array.of(bitsToF32(0x80000000 | low)))).toBeNull()
    }
    expect(exactBf16Codes(Float32Array.of(-0))?.[0]).toBe(0x8000)
  })

  it('follows the profile: BF16 for bf16 activations, F32 otherwise, and one bad value makes the tensor F32', () => {
    expect(storageRuleFor(getProfile('f32'))).toBe('f32')
    for (const p of ['hf-bf16', 'decoder', 'prefill', 'decoder+refquant']) expect(storageRuleFor(getProfile(p))).toBe('bf16-if-exact')
    expect(storeF32(Float32Array.of(1, 2), [2], 'f32').dtype).toBe('F32')
    expect(storeF32(Float32Array.of(1, 2), [2], 'bf16-if-exact').dtype).toBe('BF16')
    expect(storeF32(Float32Array.of(1, Math.fround(1 + 2 ** -20)), [2], 'bf16-if-exact').dtype).toBe('F32')
  })
})

describe('payloads round-trip through restoreCache', () => {
  it('decoder profile: BF16 blocks restore the native cache bit for bit; a non-bf16 value is kept as F32 in its tensor alone', () => {
    const engine = model.engine('decoder')
    const { at, payloads } = twoBlocks('decoder')
    expect(cacheDifferences(restoreCache(engine, payloads, BS), at[1])).toEqual([])
    expect(cacheDifferences(restoreCache(engine, payloads.slice(0, 1), BS), at[0])).toEqual([])

    // Block 1 holds HCA rows [2, 4) (ratio 128): one value of row 3 that bf16 cannot hold makes that
    // block's HCA rows F32, while block 0's stay BF16; the chain still joins, exactly.
    const odd = at[1].clone()
    const row = odd.layers[2].compressor!.entries.row(3)
    row[5] = Math.fround(row[5] * (1 + 2 ** -20))
    const payload = cacheToBlockPayload(engine.config, odd, 1, BS, { storage: 'bf16-if-exact' })
    expect((state(payload, 2, 1).elements[2] as Tensor).dtype).toBe('F32')
    expect((state(payloads[0], 2, 1).elements[2] as Tensor).dtype).toBe('BF16')
    expect((state(payload, 1, 1).elements[2] as Tensor).dtype).toBe('BF16')
    expect((state(payload, 0).elements[0] as Tensor).dtype).toBe('BF16')
    const restored = restoreCache(engine, [payloads[0], payload], BS)
    expect(cacheDifferences(restored, odd)).toEqual([])
    expect(cacheDifferences(restored, at[1])).toEqual(['x.layers.2.compressor.compressed_kv bits differ'])
  })

  it('a window holds mlx-lm\'s 128 rows (the slot no query reads is zeros); more rows, as oMLX\'s scheduler can leave, restore the last 127 too', () => {
    const engine = model.engine('f32')
    const { at, payloads } = twoBlocks('f32')
    const window = state(payloads[1], 1, 0)
    const keys = window.elements[0] as Tensor
    expect(keys.shape).toEqual([1, 1, 128, 128])
    expect([...new Float32Array(keys.data.buffer, keys.data.byteOffset, 128)].every((v) => v === 0)).toBe(true)
    const older = sliceAlong(keys, 2, 0, 1, 'test')
    window.elements[0] = concatAlong([older, older, keys], 2, 'test')
    window.elements[1] = { dtype: 'F32', shape: [1, 1, 130, 0], data: new Uint8Array(0) }
    expect(cacheDifferences(restoreCache(engine, payloads, BS), at[1])).toEqual([])
  })
})

describe('block sizes that leave pooling buffers open', () => {
  it.each([
    { bs: 100, n: 300, boundary: 200, why: 'HCA keeps 72 buffered tokens at 200' },
    { bs: 130, n: 200, boundary: 130, why: 'CSA keeps 2 buffered tokens and a carry at 130' },
  ])('block size $bs: $why; restored == native', async ({ bs, n, boundary }) => {
    const engine = model.engine('f32')
    const tokens = prompt(n, 62)
    const { pc } = await openPrefixCache(model, model.scratch(`bs-${bs}`), 'f32', bs)
    await pc.prefillAndStore(engine, tokens)
    const hit = await pc.lookup(tokens)
    expect(hit.cachedTokens).toBe(boundary)
    const native = nativePrefill(engine, tokens.slice(0, boundary)).cache
    expect(cacheDifferences(hit.cache!, native)).toEqual([])
    const open = native.layers.flatMap((l) => [l.compressor, l.indexer]).filter((c) => c !== null && c.bufferLength > 0)
    expect(open.length).toBeGreaterThan(0)
  })
})

describe('refusals name the layer and the problem', () => {
  it('a cache that is not at the block boundary', () => {
    const engine = model.engine('f32')
    const cache = nativePrefill(engine, prompt(300, 63)).cache
    expect(() => cacheToBlockPayload(engine.config, cache, 1, BS)).toThrow(/block 1 of size 256 ends at token 512, but the cache holds 300 tokens/)
    expect(() => cacheToBlockPayload(engine.config, cache, -1, BS)).toThrow(/block index must be a non-negative integer, got -1/)
    expect(() => cacheToBlockPayload(engine.config, {} as ModelCache, 0, BS)).toThrow(/expected a ModelCache, got object/)
  })

  it('too few window rows, values that are not K, a missing carry, and a tensor of another dtype', () => {
    const engine = model.engine('f32')
    const cases: [string, (p: BlockPayload) => void, RegExp][] = [
      ['short window', (p) => {
        const s = state(p, 0)
        s.elements[0] = sliceAlong(s.elements[0] as Tensor, 2, 1, 127, 'test')
        s.elements[1] = { dtype: 'F32', shape: [1, 1, 126, 0], data: new Uint8Array(0) }
      }, /layer 0 \(sliding_attention\) keys: 126 window rows, but 512 tokens need the last 127/],
      ['values', (p) => { state(p, 0).elements[1] = storeF32(new Float32Array(127 * 128), [1, 1, 127, 128], 'f32') }, /layer 0 \(sliding_attention\) values: DeepSeek-V4 shares one K=V row/],
      ['carry', (p) => { state(p, 3, 2).elements[3] = null }, /layer 3 \(compressed_sparse_attention\) indexer: 128 complete windows need the overlap carry, but prev_win_kv or prev_win_gate is None/],
      ['dtype', (p) => {
        const s = state(p, 0)
        s.elements[0] = { ...(s.elements[0] as Tensor), dtype: 'I32' }
      }, /layer 0 \(sliding_attention\) keys: expected an F32 or BF16 tensor, found I32/],
      ['pool dtype', (p) => {
        const s = state(p, 2, 1)
        s.elements[2] = { ...(s.elements[2] as Tensor), dtype: 'I32' }
      }, /layer 2 \(CacheList\), sub-cache 1: part 1 is I32 \[1,2,128\], which does not join part 0, F32 \[1,2,128\]/],
    ]
    for (const [name, mutate, message] of cases) {
      const { payloads } = twoBlocks('f32')
      mutate(payloads[1])
      expect(() => restoreCache(engine, payloads, BS), name).toThrow(message)
    }
  })
})

describe('a lookup over malformed blocks', () => {
  it('is a miss with the reason and a restore-rejected event, never a throw', async () => {
    const engine = model.engine('f32')
    const tokens = prompt(2 * BS + 10, 64)
    for (const [what, mutate, reason] of [
      ['window dtype', (p: BlockPayload) => { const s = state(p, 0); s.elements[0] = { ...(s.elements[0] as Tensor), dtype: 'I32' } }, /restore rejected: layer 0 \(sliding_attention\) keys: expected an F32 or BF16 tensor, found I32/],
      ['pool dtype', (p: BlockPayload) => { const s = state(p, 2, 1); s.elements[2] = { ...(s.elements[2] as Tensor), dtype: 'I32' } }, /restore rejected: layer 2 \(CacheList\), sub-cache 1: part 1 is I32/],
    ] as const) {
      const { pc, events } = await openPrefixCache(model, model.scratch(`malformed-${what}`), 'f32')
      const cache = engine.newCache()
      const keys = pc.store.keysFor(tokens)
      for (const k of [0, 1]) {
        engine.prefill(tokens.slice(k * BS, (k + 1) * BS), cache, { logits: 'none' })
        const payload = cacheToBlockPayload(engine.config, cache, k, BS)
        if (k === 1) mutate(payload)
        await pc.store.put(keys[k], payload)
      }
      const miss = await pc.lookup(tokens)
      expect(miss.cache, what).toBeNull()
      expect(miss.reason, what).toMatch(reason)
      expect(events.some((e) => e.kind === 'restore-rejected'), what).toBe(true)
    }
  })
})
