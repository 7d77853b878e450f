// The reference-quant switch: with '+refquant' the cached window rows and main-pool entries carry
// the fp8 round trip on their nope dims, and indexer-pool entries the Hadamard + fp4 round trip,
// exactly as src/model/profiles defines them; without it, they do not.
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { DeepseekV4Engine, type ModelCache } from '../../src/model/engine/index.ts'
import { bf16Fp4RoundTrip, fp8NopeRoundTrip } from '../../src/model/profiles/index.ts'
import { firstBitDifference, readFixture, tinyCheckpoint } from './helpers.ts'

let dispose = () => {}
let plain: ModelCache
let quant: ModelCache
let cfg: DeepseekV4Engine['config']

beforeAll(async () => {
  const made = await tinyCheckpoint()
  dispose = made.dispose
  const ids = (await readFixture('ref-tiny-t301-f32')).ids.slice(0, 200)
  const a = DeepseekV4Engine.fromCheckpoint(made.ckpt, 'f32')
  const b = DeepseekV4Engine.fromCheckpoint(made.ckpt, 'f32+refquant')
  cfg = a.config
  plain = a.newCache()
  a.prefill(ids, plain, { logits: 'none' })
  quant = b.newCache()
  b.prefill(ids, quant, { logits: 'none' })
})
afterAll(() => dispose())

// Rows of a [rows, d] array for which f(row) changes some bit.
function rowsChangedBy (rows: Float32Array, d: number, f: (row: Float32Array) => Float32Array): number {
  let changed = 0
  for (let r = 0; r < rows.length / d; r++) {
    const row = rows.slice(r * d, (r + 1) * d)
    if (firstBitDifference(f(row.slice()), row) >= 0) changed++
  }
  return changed
}

describe('f32+refquant caches hold round-tripped values; f32 caches do not', () => {
  const nope = () => cfg.headDim - cfg.qkRopeHeadDim

  it('window rows of every layer: fixed points of the fp8 nope round trip only with the switch', () => {
    for (let l = 0; l < cfg.numHiddenLayers; l++) {
      const d = cfg.headDim
      expect(rowsChangedBy(quant.layers[l].windowRows(), d, (r) => fp8NopeRoundTrip(r, nope())), `layer ${l}`).toBe(0)
      expect(rowsChangedBy(plain.layers[l].windowRows(), d, (r) => fp8NopeRoundTrip(r, nope())), `layer ${l}`).toBeGreaterThan(100)
    }
  })

  it('main-pool entries (CSA and HCA): fixed points of the fp8 nope round trip only with the switch', () => {
    for (const l of [1, 2, 3]) {
      const q = quant.layers[l].compressor!.entries.view()
      const p = plain.layers[l].compressor!.entries.view()
      expect(rowsChangedBy(q, cfg.headDim, (r) => fp8NopeRoundTrip(r, nope())), `layer ${l}`).toBe(0)
      expect(rowsChangedBy(p, cfg.headDim, (r) => fp8NopeRoundTrip(r, nope())), `layer ${l}`).toBe(p.length / cfg.headDim)
    }
  })

  it('indexer-pool entries: fixed points of the bf16 + fp4 quantisation only with the switch', () => {
    for (const l of [1, 3]) {
      const q = quant.layers[l].indexer!.entries.view()
      const p = plain.layers[l].indexer!.entries.view()
      expect(rowsChangedBy(q, cfg.indexHeadDim, (r) => bf16Fp4RoundTrip(r)), `layer ${l}`).toBe(0)
      expect(rowsChangedBy(p, cfg.indexHeadDim, (r) => bf16Fp4RoundTrip(r)), `layer ${l}`).toBe(p.length / cfg.indexHeadDim)
    }
  })
})
