// Our blocks against blocks oMLX's own prefix-cache code wrote (BlockAwarePrefixCache.store_cache ->
// PagedSSDCacheManager, jundot/omlx 1e8a6074, on MLX's CPU backend: harness/mlx/make-prefix-cache-proof.sh),
// and the record of oMLX's prefix-cache path restoring ours. No MLX needed here.
//   - Metadata: every key identical but created_at; ours adds geometry_fingerprint and content_sha256.
//   - Tensors: same names, dtypes and shapes. Values: the mlx-cpu block (bf16 + quantized, computed from
//     MLX's own attention inputs) is bit-identical to oMLX's but for the window's oldest row, which we
//     write as zeros (our engine keeps window-1 rows; no query reads that slot, and oMLX's prefix cache
//     restores our block to 13/13 bit-identical logits). The f32 blocks are two engines' f32 arithmetic:
//     tolerance-based, every tensor's identical fraction and ulp histogram printed.
//   - `verify-blocks` (compareBlockDirs) of our store against oMLX's lists exactly those differences.
//   - A one-channel shift of a ratio-4 previous window, planted in our cache before the block is
//     written, is caught.
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { describe, expect, it } from 'vitest'
import { compareBlockDirs } from '../../src/decode/store/index.ts'
import {
  compareBlocks, describeComparisons, identical, isWindow, omlxBlocks, readBlock, readProof,
  writeF32Blocks, writeMlxCpuBlock, type Comparison,
} from '../../harness/mlx/compare-blocks.ts'
import { tinyModelForFile } from '../blocks/helpers.ts'

const FX = fileURLToPath(new URL('../../harness/fixtures/', import.meta.url))
const PROOF = readProof(FX)

const held = tinyModelForFile()

describe('our blocks against the blocks oMLX\'s own prefix cache wrote', () => {
  it('mlx-cpu (bf16 + quantized): metadata identical but created_at; every tensor bit-identical but the unread window row', async () => {
    const c = PROOF.cases['tiny-t301-mxq']
    expect(c.checkpoint, 're-run harness/mlx/make-prefix-cache-proof.sh').toBe(held.digest)
    const ours = await writeMlxCpuBlock(FX, held.model.ckpt.config, held.model.scratch('mlx-cpu'), c)
    const theirs = await omlxBlocks(FX, 'tiny-t301-mxq')
    expect([...theirs.keys()]).toEqual([ours.hash])
    const cmp = compareBlocks(await readBlock(ours.path), theirs.get(ours.hash)!)
    console.log(describeComparisons('mlx-cpu block vs oMLX', [cmp]).join('\n'))
    expect(cmp.metadata).toEqual([])
    expect(cmp.structure).toEqual([])
    expect(cmp.exact.filter((e) => !e.identical)).toEqual([])
    expect(identical(cmp, true), 'every bit every query reads').toBe(true)
    // The only bits that differ: the windows' oldest row (zeros in ours, the row oMLX still holds).
    for (const t of cmp.tensors) if (!isWindow(t.name)) expect(t.all.identical, t.name).toBe(t.all.elements)
  })

  it('verify-blocks against oMLX\'s store names exactly those differences: its missing digest, our fingerprint, each window\'s oldest row', async () => {
    const c = PROOF.cases['tiny-t301-mxq']
    const root = held.model.scratch('mlx-cpu-verify')
    await writeMlxCpuBlock(FX, held.model.ckpt.config, root, c)
    const report = await compareBlockDirs(root, join(FX, 'mlx/omlx-blocks/tiny-t301-mxq'))
    expect(report.total).toBe(1)
    const diffs = report.blocks[0].differences
    console.log(`verify-blocks ours vs oMLX's: ${report.identical}/${report.total} identical\n  ${diffs.join('\n  ')}`)
    const d = held.model.ckpt.config.headDim
    const expected = [
      /^B: no content_sha256 \(a block oMLX wrote/,
      /^metadata geometry_fingerprint: only in A /,
      ...['layer_0_state_0', 'layer_1_sub_0_state_0', 'layer_2_sub_0_state_0', 'layer_3_sub_0_state_0'].map((n) => new RegExp(`^tensor ${n}: ${d} of ${128 * d} values differ; first at element 0: A 0, B `)),
    ]
    expect(diffs).toHaveLength(expected.length)
    for (const [i, re] of expected.entries()) expect(diffs[i]).toMatch(re)
  })

  it('f32: metadata identical but created_at; tensors within 1e-5 of oMLX\'s (two engines\' f32, histograms printed)', async () => {
    const c = PROOF.cases['tiny-t777-f32']
    expect(c.checkpoint).toBe(held.digest)
    const ours = await writeF32Blocks(FX, held.model.engine('f32'), held.model.scratch('f32'), c)
    const theirs = await omlxBlocks(FX, 'tiny-t777-f32')
    expect(ours.map((b) => b.hash).sort()).toEqual([...theirs.keys()].sort())
    const cmps: Comparison[] = []
    for (const b of ours) cmps.push(compareBlocks(await readBlock(b.path), theirs.get(b.hash)!))
    console.log(describeComparisons('f32 blocks vs oMLX', cmps).join('\n'))
    for (const cmp of cmps) {
      expect(cmp.metadata).toEqual([])
      expect(cmp.structure).toEqual([])
      expect(cmp.exact.filter((e) => !e.identical)).toEqual([])
      for (const t of cmp.tensors) expect(t.readRows.relError, t.name).toBeLessThanOrEqual(1e-5)
    }
  })

  it('a one-channel shift of a ratio-4 previous window in our cache is caught', async () => {
    const c = PROOF.cases['tiny-t301-mxq']
    const ours = await writeMlxCpuBlock(FX, held.model.ckpt.config, held.model.scratch('mlx-cpu-shifted'), c, (cache) => {
      const state = cache.layers[1].compressor!
      const w = state.prevWindowKv!
      const width = state.width
      for (let r = 0; r < w.length / width; r++) {
        const row = w.slice(r * width, (r + 1) * width)
        for (let j = 0; j < width; j++) w[r * width + j] = row[(j + width - 1) % width]
      }
    })
    const cmp = compareBlocks(await readBlock(ours.path), (await omlxBlocks(FX, 'tiny-t301-mxq')).get(ours.hash)!)
    const hit = cmp.tensors.find((x) => x.name === 'layer_1_sub_1_state_3')!
    expect(hit.readRows.identical).toBeLessThan(hit.readRows.elements)
    expect(identical(cmp, true)).toBe(false)
  })
})

describe('oMLX\'s prefix-cache path restores our blocks (record of harness/mlx/make-prefix-cache-proof.sh)', () => {
  it('its own blocks round-trip, mlx-cpu blocks decode bit for bit, f32 blocks within 1e-5 with equal greedy tokens', () => {
    const mxq = PROOF.cases['tiny-t301-mxq']
    const f32 = PROOF.cases['tiny-t777-f32']
    for (const c of [mxq, f32]) {
      expect(c.checkpoint).toBe(held.digest)
      expect(c.stores.omlx).toMatchObject({ restored: true, blocks: c.boundary / c.block_size, tokens_restored: c.boundary, logits_bit_identical_steps: c.stores.omlx.logits_steps, greedy_equal: true })
    }
    expect(mxq.stores['mlx-cpu']).toMatchObject({ restored: true, blocks: 1, tokens_restored: 256, logits_steps: 13, logits_bit_identical_steps: 13, logits_max_abs: 0, greedy_equal: true })
    expect(f32.stores.f32).toMatchObject({ restored: true, blocks: 3, tokens_restored: 768, logits_steps: 13, greedy_equal: true })
    expect(f32.stores.f32.logits_rel_error_max).toBeLessThanOrEqual(1e-5)
    console.log(`oMLX prefix cache: mlx-cpu ${mxq.stores['mlx-cpu'].logits_bit_identical_steps}/${mxq.stores['mlx-cpu'].logits_steps} logits steps bit-identical; ` +
      `f32 ${f32.stores.f32.blocks} blocks, logits within ${f32.stores.f32.logits_rel_error_max.toExponential(2)} (max |d| ${f32.stores.f32.logits_max_abs.toExponential(2)}), greedy equal`)
  })
})
