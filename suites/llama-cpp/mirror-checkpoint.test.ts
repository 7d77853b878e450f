// make-checkpoint's opt-in mirrorIndexerHeads: only the CSA layers' indexer q_b_proj change, head
// 2j+1 becoming head 2j with its sign flipped (exact in bf16), so every indexer score pair
// relu(a) + relu(-a) = |a| and no score is exactly zero (ties.test.ts counts none). Off, the
// checkpoint is byte for byte the one the transformers fixtures were made from.
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { viewAs } from '../../src/formats/safetensors/index.ts'
import { checkpointDigest, loadCheckpoint, makeCheckpoint, type LoadedCheckpoint } from '../../src/model/checkpoint/index.ts'
import { mirrorIndexerHeads } from '../../src/model/checkpoint/init.ts'
import { readReference } from './helpers.ts'

let scratch: string
let plain: LoadedCheckpoint
let mirrored: LoadedCheckpoint
beforeAll(async () => {
  scratch = mkdtempSync(join(tmpdir(), 'pd-bridge-mirror-'))
  await makeCheckpoint({ preset: 'tiny', seed: 1, out: join(scratch, 'plain') })
  await makeCheckpoint({ preset: 'tiny', seed: 1, out: join(scratch, 'mirror'), mirrorIndexerHeads: true })
  plain = await loadCheckpoint(join(scratch, 'plain'))
  mirrored = await loadCheckpoint(join(scratch, 'mirror'))
})
afterAll(() => rmSync(scratch, { recursive: true, force: true }))

describe('mirrorIndexerHeads', () => {
  it('off (the default): the checkpoint the transformers fixtures record', async () => {
    expect(await checkpointDigest(join(scratch, 'plain'))).toBe((await readReference('harness/fixtures/ref-tiny-t301-f32.safetensors')).digest)
  })

  it('on: every tensor identical but the indexer q_b_proj of the two CSA layers', () => {
    const changed = plain.weights.names().filter((n) => Buffer.compare(Buffer.from(plain.weights.get(n).data), Buffer.from(mirrored.weights.get(n).data)) !== 0)
    expect(changed).toEqual([1, 3].map((n) => `model.layers.${n}.self_attn.compressor.indexer.q_b_proj.weight`))
  })

  it('heads 0 and 2 unchanged; heads 1 and 3 are heads 0 and 2 with the sign bit flipped', () => {
    const { indexNHeads, indexHeadDim, qLoraRank } = plain.config
    const per = indexHeadDim * qLoraRank
    for (const n of [1, 3]) {
      const name = `model.layers.${n}.self_attn.compressor.indexer.q_b_proj.weight`
      const a = viewAs(plain.weights.get(name), 'BF16')
      const b = viewAs(mirrored.weights.get(name), 'BF16')
      for (let h = 0; h < indexNHeads; h += 2) {
        for (let i = 0; i < per; i++) {
          if (b[h * per + i] !== a[h * per + i] || b[(h + 1) * per + i] !== (a[h * per + i] ^ 0x8000)) throw new Error(`${name} head ${h} value ${i}`)
        }
      }
    }
  })

  it('an odd number of indexer heads cannot be paired: refused', () => {
    expect(() => mirrorIndexerHeads({ indexNHeads: 3, indexHeadDim: 2, qLoraRank: 2, layerTypes: ['compressed_sparse_attention'] }, new Map()))
      .toThrow('mirrorIndexerHeads: index_n_heads is 3, it needs an even number of heads to pair them')
  })
})
