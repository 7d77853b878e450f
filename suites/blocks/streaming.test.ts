// prefillAndStore streams: each block is built at its boundary, written, and released before the
// prefill goes on, so at most one boundary snapshot is held, whatever the prompt length; and each
// block holds only its own pooled rows, so block sizes do not grow along the chain.
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { blockPath } from '../../src/decode/store/index.ts'
import { DecoderPrefixCache } from '../../src/decode/prefix-cache/index.ts'
import { BS, blockTensors, prompt, tinyModel, type TinyModel } from './helpers.ts'

let model: TinyModel
beforeAll(async () => { model = await tinyModel() })
afterAll(async () => await model.cleanup())

/** Store a prompt, recording how many snapshots were held when each block was written. */
async function storeRecording (n: number): Promise<{ pc: DecoderPrefixCache, heldAtWrite: number[], hashes: string[] }> {
  const heldAtWrite: number[] = []
  const sink: { pc?: DecoderPrefixCache } = {}
  const pc = await DecoderPrefixCache.open({
    storeRoot: model.scratch(`stream-${n}`),
    modelName: model.dir,
    cfg: model.ckpt.config,
    profile: 'f32',
    blockSize: BS,
    log: (e) => { if (e.kind === 'written') heldAtWrite.push(sink.pc!.stats.heldSnapshots) },
  })
  sink.pc = pc
  const { storedBlocks } = await pc.prefillAndStore(model.engine('f32'), prompt(n, 51))
  return { pc, heldAtWrite, hashes: storedBlocks.map((b) => b.hash) }
}

describe('streaming block writes', () => {
  it('hold at most one boundary snapshot at a time, for a short and a four-times-longer prompt', async () => {
    for (const [n, blocks] of [[300, 1], [1100, 4]]) {
      const { pc, heldAtWrite } = await storeRecording(n)
      expect(heldAtWrite).toEqual(Array.from({ length: blocks }, () => 1))
      expect(pc.stats).toMatchObject({ heldSnapshots: 0, peakHeldSnapshots: 1, writtenBlocks: blocks })
    }
  })

  it('every block holds only its own pooled rows, so the blocks of a chain are the same size', async () => {
    const { pc, hashes } = await storeRecording(1100)
    const blocks = await Promise.all(hashes.map(async (h) => await blockTensors(blockPath(pc.store.root, h))))
    expect(new Set(blocks.map((b) => b.dataBytes)).size).toBe(1)
    blocks.forEach((b, k) => {
      // CSA (layer 1): main and indexer pools, ratio 4: 64 rows per block; HCA (layer 2), ratio 128: 2.
      expect(b.tensors.get('layer_1_sub_1_state_2')?.shape).toEqual([1, BS / 4, 128])
      expect(b.tensors.get('layer_1_sub_2_state_2')?.shape).toEqual([1, BS / 4, 128])
      expect(b.tensors.get('layer_2_sub_1_state_2')?.shape).toEqual([1, BS / 128, 128])
      expect(b.metadata.layer_1_sub_1_state_class_name).toBe('PoolingCacheDelta')
      expect(b.tensors.get('layer_1_sub_1_state_5')).toEqual({ dtype: 'I64', shape: [2] })
      // The window of the boundary: mlx-lm's 128 rows, values zero-width (K = V).
      expect(b.tensors.get('layer_0_state_0')?.shape).toEqual([1, 1, 128, 128])
      expect(b.metadata.layer_0_state_1_zero_dim).toBe('1,1,128,0')
      expect(JSON.parse(b.metadata.layer_meta_states)[0]).toEqual(['0', '128', String((k + 1) * BS), '128'])
      // oMLX's five-part pool carries the raw previous window, both halves: [1, 1, ratio, 2 dim].
      expect(b.tensors.get('layer_1_sub_1_state_3')?.shape).toEqual([1, 1, 4, 256])
      expect(b.tensors.get('layer_1_sub_1_state_4')?.shape).toEqual([1, 1, 4, 256])
    })
  })
})
