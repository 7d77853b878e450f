// Our blocks against what oMLX's DeepSeek-V4 cache objects hold, and the records of oMLX's model
// restoring them (harness/mlx/omlx_restore.py, omlx_exact_restore.py on MLX's CPU; made by
// harness/mlx/make-fixtures.sh). No MLX needed here.
//   - Format rules, checked on every block the decoder writes for a 1,100-token prompt: oMLX's
//     metadata keys (parent_hash on every block but the first) and signature, per-layer cache types and meta states, the tensor names, the
//     RotatingKVCache window of mlx-lm's 128 rows with zero-width values, and each PoolingCache's
//     five parts (plus the delta's row range) with the previous window both halves, [1,1,4,2*dim].
//   - Records: blocks computed with the mlx-cpu arithmetic restored into oMLX's model continue bit
//     for bit (13/13 logits steps); our f32 blocks continue within 1e-5 with equal greedy tokens;
//     noise in the window slot no query reads changes no logit.
import { readFileSync } from 'node:fs'
import { describe, expect, it } from 'vitest'
import { blockPath } from '../../src/decode/store/index.ts'
import { SafetensorsFile } from '../../src/formats/safetensors/index.ts'
import { BS, openPrefixCache, prompt, tinyModelForFile } from '../blocks/helpers.ts'

const held = tinyModelForFile()

function record (name: string): Record<string, unknown> {
  return JSON.parse(readFileSync(new URL(`../../harness/fixtures/mlx/${name}`, import.meta.url), 'utf8')) as Record<string, unknown>
}

describe('every block we write follows oMLX\'s DeepSeek-V4 layout', () => {
  it('metadata, signature, cache types, meta states and tensor shapes, block by block', async () => {
    const { pc } = await openPrefixCache(held.model, held.model.scratch('omlx-layout'), 'f32')
    const tokens = prompt(1100, 81)
    const stored = await pc.prefillAndStore(held.model.engine('f32'), tokens)
    expect(stored.storedBlocks).toHaveLength(4)
    const cfg = held.model.ckpt.config
    for (const [k, b] of stored.storedBlocks.entries()) {
      const f = await SafetensorsFile.open(blockPath(pc.store.root, b.hash))
      const m = f.metadata
      const tensors = f.tensors
      await f.close()
      const boundary = (k + 1) * BS
      for (const key of ['omlx_cache_format_version', 'block_hash', 'token_count', 'num_layers', 'model_name', 'block_size', 'payload_layout', 'created_at', 'layer_cache_types', 'layer_meta_states', 'cache_signature']) {
        expect(m[key], `block ${k} metadata ${key}`).toBeDefined()
      }
      expect(m.omlx_cache_format_version).toBe('4')
      expect(m.block_hash).toBe(b.hash)
      expect(m.num_layers).toBe(String(cfg.numHiddenLayers))
      const sig = JSON.parse(m.cache_signature) as Record<string, unknown>
      expect(sig.cachelist_subtypes).toEqual({ 1: ['RotatingKVCache', 'PoolingCache:5', 'PoolingCache:5'], 2: ['RotatingKVCache', 'PoolingCache:5'], 3: ['RotatingKVCache', 'PoolingCache:5', 'PoolingCache:5'] })
      expect(JSON.parse(m.layer_cache_types)).toEqual(['RotatingKVCache', 'CacheList', 'CacheList', 'CacheList'])
      const metas = JSON.parse(m.layer_meta_states) as unknown[]
      const rot = ['0', String(cfg.slidingWindow), String(boundary), String(cfg.slidingWindow)]
      expect(metas[0]).toEqual(rot)
      expect(metas[1]).toEqual([['RotatingKVCache', 'PoolingCache', 'PoolingCache'], [rot, 4, 4]])
      expect(metas[2]).toEqual([['RotatingKVCache', 'PoolingCache'], [rot, 128]])
      const shape = (name: string) => tensors.get(name)?.shape
      // The window: mlx-lm's 128 rows, values zero-width because K = V.
      expect(shape('layer_0_state_0')).toEqual([1, 1, 128, cfg.headDim])
      expect(m.layer_0_state_1_zero_dim).toBe('1,1,128,0')
      // oMLX stamps no class name on a (keys, values) state, only on N-tuple ones.
      expect(m.layer_0_state_class_name).toBeUndefined()
      expect(m.parent_hash, `block ${k} parent_hash`).toBe(k === 0 ? undefined : stored.storedBlocks[k - 1].hash)
      for (const layer of [1, 2, 3]) {
        expect(m[`layer_${layer}_sub_count`]).toBe(layer === 2 ? '2' : '3')
        expect(shape(`layer_${layer}_sub_0_state_0`)).toEqual([1, 1, 128, cfg.headDim])
        expect(m[`layer_${layer}_sub_0_state_class_name`]).toBeUndefined()
        const ratio = layer === 2 ? 128 : 4
        for (const sub of layer === 2 ? [1] : [1, 2]) {
          const at = `layer_${layer}_sub_${sub}`
          const dim = layer !== 2 && sub === 2 ? cfg.indexHeadDim : cfg.headDim
          expect(m[`${at}_state_class_name`], at).toBe('PoolingCacheDelta')
          expect(m[`${at}_state_count`], at).toBe('6')
          expect(shape(`${at}_state_2`), `${at} pooled`).toEqual([1, BS / ratio, dim])
          expect(shape(`${at}_state_5`), `${at} row range`).toEqual([2])
          if (ratio === 4) {
            // oMLX's previous window: both halves, [1, 1, ratio, 2*dim].
            expect(shape(`${at}_state_3`), `${at} prev_win_kv`).toEqual([1, 1, 4, 2 * dim])
            expect(shape(`${at}_state_4`), `${at} prev_win_gate`).toEqual([1, 1, 4, 2 * dim])
          } else {
            expect(m[`${at}_state_3_none`]).toBe('1')
            expect(m[`${at}_state_4_none`]).toBe('1')
          }
        }
      }
    }
  })
})

describe('oMLX\'s model restores our blocks (records of harness/mlx on MLX 0.32.2)', () => {
  it('mlx-cpu blocks: 13/13 logits steps bit-identical to the model\'s own state, greedy equal', () => {
    const r = record('exact-restore-proof.json')
    expect(r.checkpoint_sha256, 're-run harness/mlx/make-fixtures.sh').toBe(held.digest)
    expect(r).toMatchObject({ logits_steps: 13, logits_steps_bit_identical: 13, logits_max_abs_diff: 0, greedy_equal: true, dtype: 'bfloat16', quantized: true })
    console.log(`exact restore: ${r.logits_steps_bit_identical}/${r.logits_steps} logits steps bit-identical, ${r.cache_arrays_compared} cache arrays compared`)
  })

  it('our f32 blocks (4 of 256): greedy 12/12 equal, logits within 1e-5; noise in the unread window slot changes no bit', () => {
    const r = record('restore-proof.json')
    const noisy = record('restore-proof-noisy-first-row.json')
    expect(r.checkpoint_sha256).toBe(held.digest)
    expect(r).toMatchObject({ restored_blocks: 4, greedy_equal: true, first_window_row: 'as-written' })
    expect(r.logits_rel_error_max as number).toBeLessThanOrEqual(1e-5)
    expect(noisy).toMatchObject({ first_window_row: 'random', greedy_equal: true })
    expect(noisy.restored_logits_sha256).toBe(r.restored_logits_sha256)
    console.log(`f32 restore: greedy equal, logits within ${(r.logits_rel_error_max as number).toExponential(2)}; a noisy first window row gives the same logits bit for bit`)
  })
})
