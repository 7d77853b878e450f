// The reference system's two headline checks, on V4-Flash's real 43-layer schedule (the
// flash-schedule preset: 20 CSA and 23 HCA layers at small widths):
//   "cache arrays rebuilt on the decoder vs a full native forward: 313/313 bit-exact" — here the
//   rebuild is our mlx-cpu cache path fed MLX's own attention inputs, and the native forward is
//   oMLX's model on MLX 0.32.2's CPU (harness/fixtures/mlx/flash-t301-mxq, no MLX needed here).
//   Our count is every array MLX stores after a 301-token one-shot prefill: per CSA layer the
//   window and two PoolingCaches' buf_kv, buf_gate, pooled, prev_win_kv, prev_win_gate (11), per HCA
//   layer the window and buf_kv, buf_gate, pooled (its prev_win parts are None, not counted): 20 x 11
//   + 23 x 4 = 312. The seed's 313 is its own count of V4-Flash's arrays, which also has an MTP block
//   (num_nextn_predict_layers 1; the preset has none) and does not say how it counts them.
//   "blocks written by the bridge vs blocks oMLX writes itself: 11/11 identical" — no block written
//   by oMLX itself is in the fixtures (its block-store code was not gathered), so this compares the
//   bridge's blocks with our decoder's own native blocks for an 11-block prompt (decoder profile,
//   block size 128, the smallest the writer takes: a multiple of the ratio 128): a self-comparison,
//   labelled as one. What oMLX's model does with our blocks is checked in suites/mlx/blocks (13/13
//   logits steps bit-identical after restoring mlx-cpu blocks).
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { compareBlockDirs } from '../../src/decode/store/index.ts'
import { streamBlocks } from '../../src/decode/writer/index.ts'
import { loadCase, runAll, showComparisons, tableLine } from '../mlx/capture-mlx-cpu-compare.ts'
import { bench, capture, openStore, prompt, type Bench } from '../blocks-bridge/helpers.ts'

const SLOW = 600_000
const BLOCK = 128

describe('the seed\'s table on V4-Flash\'s 43-layer schedule', () => {
  it('cache arrays, capture (mlx-cpu) vs MLX-computed native: 312/312 bit-exact', async () => {
    const c = await loadCase('flash-t301-mxq', 'flash-mxq-cache-weights', 'flash-schedule')
    const cs = runAll(c)
    console.log(`flash-t301-mxq (MLX ${c.fx.metadata.mlx_version} CPU, 43 layers, T = ${c.T}):\n${showComparisons(cs.filter((x) => !x.bitIdentical))}\n  ${tableLine(cs)}`)
    expect(cs.length).toBe(20 * 11 + 23 * 4)
    expect(cs.filter((x) => !x.bitIdentical).map((x) => x.name)).toEqual([])
  }, SLOW)

  describe('blocks for an 11-block prompt, bridge vs our decoder\'s native blocks (self-comparison)', () => {
    let b: Bench
    beforeAll(async () => { b = await bench('seed-table', { preset: 'flash-schedule', blockSize: BLOCK }) }, SLOW)
    afterAll(async () => await b.cleanup())

    it('11/11 identical (created_at aside)', async () => {
      const tokens = prompt(11 * BLOCK + 37, 313)
      const native = await openStore(b, 'native', BLOCK)
      await native.prefillAndStore(b.engine('decoder'), tokens)
      const captured = await capture(b, tokens, { requestId: 'seed-table' })
      const bridged = await openStore(b, 'bridged', BLOCK)
      const report = await streamBlocks({ dir: captured.dir, target: bridged, sidecar: b.sidecar, requestId: 'seed-table', tokens })
      expect(report).toMatchObject({ state: 'done', blocks: 11, written: 11, verified: 11 })
      const verdict = await compareBlockDirs(native.store.root, bridged.store.root)
      console.log(`blocks written by the bridge vs the decoder's own (43 layers, ${tokens.length} tokens, block ${BLOCK}): ${verdict.identical}/${verdict.total} identical`)
      expect(verdict.blocks.flatMap((x) => x.differences)).toEqual([])
      expect(`${verdict.identical}/${verdict.total}`).toBe('11/11')
    }, SLOW)
  })
})
