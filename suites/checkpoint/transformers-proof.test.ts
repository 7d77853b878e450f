// The committed proof that transformers 5.17 loads our tiny checkpoint cleanly must describe the
// checkpoint make-checkpoint writes today; otherwise it proves nothing and must be re-made
// (harness/make-reference-fixtures.sh on a CUDA machine).
import { readFileSync } from 'node:fs'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { checkpointDigest, makeCheckpoint, presetConfig } from '../../src/model/checkpoint/index.ts'
import { ropeInvFreq } from '../../src/model/rope.ts'
import { removeDir, tempDir } from './helpers.ts'

const proofPath = new URL('../../harness/fixtures/checkpoint-proof.json', import.meta.url)
const proof = JSON.parse(readFileSync(proofPath, 'utf8'))
let dir: string

beforeAll(async () => {
  dir = tempDir('proof')
  await makeCheckpoint({ preset: 'tiny', seed: 1, out: dir, force: true })
})
afterAll(() => removeDir(dir))

describe('the transformers load proof of the tiny seed-1 checkpoint', () => {
  it('was made from the checkpoint make-checkpoint writes now', async () => {
    expect(await checkpointDigest(dir)).toBe(proof.checkpoint_sha256)
  })

  it('records a clean load: no missing, unexpected or mismatched keys; transformers re-saves our names and values unchanged', () => {
    expect(proof.transformers).toBe('5.17.0')
    expect(proof.loading_info).toEqual({ missing_keys: [], unexpected_keys: [], mismatched_keys: [], error_msgs: [] })
    // Our file holds DeepSeek's names, one tensor per expert (210); transformers' modules hold 122
    // (stacked experts); its own save_pretrained of what it loaded writes back exactly our 210.
    expect(proof.file_tensor_count).toBe(210)
    expect(proof.model_state_count).toBe(122)
    expect(proof.resaved_tensor_count).toBe(proof.file_tensor_count)
    expect(proof.in_file_not_resaved).toEqual([])
    expect(proof.resaved_not_in_file).toEqual([])
    expect(proof.values_differ_from_file).toEqual([])
    expect(proof.forward_finite).toBe(true)
    expect(proof.ok).toBe(true)
  })

  it('records that Python safetensors re-serialises our weight file to the same bytes', () => {
    expect(Object.values(proof.python_resave_identical)).toEqual([true])
  })

  it('records that the Hugging Face tokenizer agrees with ours on every case', () => {
    expect(proof.tokenizer.checks).toBeGreaterThan(100)
    expect(proof.tokenizer.mismatches).toBe(0)
  })

  it('has transformers inv_freq tables equal to ours bit for bit, for both rope kinds', () => {
    const cfg = presetConfig('tiny')
    for (const kind of ['main', 'compress'] as const) {
      const ours = Array.from(new Int32Array(ropeInvFreq(cfg.rope[kind]).buffer))
      expect(ours, kind).toEqual(proof.inv_freq_bits[kind])
      expect(proof.attention_scaling[kind]).toBe(1)
    }
  })
})
