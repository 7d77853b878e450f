// Effective rope tables compared bit for bit: the first differing (position, pair) against an
// independent scan of ropeTable's full output, table identity, the angle error against angles
// recovered from the tables themselves, and the rule that only tables count (raw keys that differ
// with identical tables pass; identical keys with different tables fail).
import { mkdtemp, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import fc from 'fast-check'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { presetConfig, presetConfigJson } from '../../src/model/checkpoint/index.ts'
import type { RopeParams } from '../../src/model/config.ts'
import { ropeInvFreq, ropeTable } from '../../src/model/rope.ts'
import {
  angleErrorAt, checkRopeTables, firstPositionExceeding, firstTableDifference, readConfigPlace, tableIdentity, type Place,
} from '../../verify/gate/index.ts'

const compress = presetConfig('tiny').rope.compress
const main = presetConfig('tiny').rope.main
const with_ = (p: RopeParams, change: Partial<RopeParams>): RopeParams => ({ ...p, ...change })

function bits (x: Float32Array): Uint32Array {
  return new Uint32Array(x.buffer, x.byteOffset, x.length)
}

// Independent of the code under test: whole tables, then the first entry whose bits differ.
function scanFirstDifference (a: RopeParams, b: RopeParams, positions: number): { position: number, pair: number } | null {
  const ta = ropeTable(a, positions)
  const tb = ropeTable(b, positions)
  const half = a.ropeDim / 2
  const [ca, cb, sa, sb] = [bits(ta.cos), bits(tb.cos), bits(ta.sin), bits(tb.sin)]
  for (let i = 0; i < ca.length; i++) {
    if (ca[i] !== cb[i] || sa[i] !== sb[i]) return { position: Math.floor(i / half), pair: i % half }
  }
  return null
}

describe('the first differing (position, pair) of two tables', () => {
  const cases: Array<[string, RopeParams, RopeParams]> = [
    ['YaRN factor 16 vs 32', with_(compress, { factor: 16 }), compress],
    ['compress theta 150000 vs 160000', with_(compress, { theta: 150000 }), compress],
    ['beta_fast 16 vs 32', with_(compress, { betaFast: 16 }), compress],
    ['attention factor 1.3466 vs 1', with_(compress, { attentionFactor: 0.1 * Math.log(32) + 1 }), compress],
    ['plain theta 10001 vs 10000', with_(main, { theta: 10001 }), main],
  ]
  it.each(cases)('%s: the same entry an independent full-table scan finds', (_, a, b) => {
    const expected = scanFirstDifference(a, b, 4096)
    expect(expected).not.toBeNull()
    const found = firstTableDifference({ params: a, extent: 32768 }, { params: b, extent: 32768 })
    expect(found === null ? null : { position: found.position, pair: found.pair }).toEqual(expected)
    expect(tableIdentity({ params: a, extent: 32768 })).not.toBe(tableIdentity({ params: b, extent: 32768 }))
  })

  it('identical tables: none, and only the extent differs: the first position one table lacks', () => {
    expect(firstTableDifference({ params: compress, extent: 32768 }, { params: { ...compress }, extent: 32768 })).toBeNull()
    const d = firstTableDifference({ params: compress, extent: 16384 }, { params: compress, extent: 32768 }, ['sidecar', 'decoder'])
    expect(d).toEqual({ position: 16384, pair: 0, what: 'position 16,384 is in decoder\'s table only (extent 16,384 vs 32,768)' })
  })

  it('property: for random parameter pairs, the reported entry differs in bits and every earlier entry is identical', () => {
    const factors = [1, 2, 4, 8, 16, 32, 40]
    const originals = [512, 1000, 1024, 4096]
    const params = fc.record({
      factor: fc.constantFrom(...factors),
      originalMaxPositionEmbeddings: fc.constantFrom(...originals),
      theta: fc.constantFrom(10000, 160000, 500000),
      betaFast: fc.constantFrom(16, 32),
    }).map((c) => with_(compress, c))
    fc.assert(fc.property(params, params, (a, b) => {
      const ta = { params: a, extent: 3000 }
      const tb = { params: b, extent: 3000 }
      const d = firstTableDifference(ta, tb)
      const scan = scanFirstDifference(a, b, 3000)
      if (tableIdentity(ta) === tableIdentity(tb)) return d === null && scan === null
      // Within 3000 positions the scan must agree exactly; a difference past them is allowed only when the scan saw none.
      if (scan !== null) return d !== null && d.position === scan.position && d.pair === scan.pair
      return d === null || d.position >= 3000
    }), { numRuns: 60, seed: 20261130 })
  })
})

describe('angle error by position', () => {
  const a = with_(compress, { factor: 16 })
  const [ia, ib] = [ropeInvFreq(a), ropeInvFreq(compress)]

  it('equals the wrapped difference of the angles recovered from the two tables (atan2 of their sin and cos)', () => {
    for (const p of [1, 7, 100, 1024, 5000, 32767]) {
      const ta = ropeTable(a, { start: p, count: 1 })
      const tb = ropeTable(compress, { start: p, count: 1 })
      let recovered = 0
      for (let k = 0; k < ia.length; k++) {
        let d = Math.atan2(ta.sin[k], ta.cos[k]) - Math.atan2(tb.sin[k], tb.cos[k])
        d -= 2 * Math.PI * Math.round(d / (2 * Math.PI))
        recovered = Math.max(recovered, Math.abs(d))
      }
      // Tolerance: cos and sin are rounded to fp32, so atan2 recovers each angle to about 1e-7.
      expect(Math.abs(angleErrorAt(ia, ib, p).error - recovered)).toBeLessThan(1e-6)
    }
  })

  it('reports the first position past the threshold: over it there, at or under it everywhere before', () => {
    const x = firstPositionExceeding(ia, ib, 0.1, 32768)!
    expect(x.error).toBeGreaterThan(0.1)
    for (let p = 0; p < x.position; p++) expect(angleErrorAt(ia, ib, p).error).toBeLessThanOrEqual(0.1)
    expect(firstPositionExceeding(ia, ia, 0.1, 32768)).toBeNull()
  })
})

describe('only tables count, not raw keys', () => {
  let dir: string
  beforeAll(async () => { dir = await mkdtemp(join(tmpdir(), 'pd-bridge-gate-tables-')) })
  afterAll(async () => await rm(dir, { recursive: true, force: true }))

  async function place (name: 'prefill' | 'decoder', json: Record<string, unknown>): Promise<Place> {
    const file = join(dir, `${name}-${Math.random().toString(36).slice(2)}.json`)
    await writeFile(file, JSON.stringify(json))
    return await readConfigPlace(name, file)
  }

  it('a different original_max_position_embeddings that gives bit-identical tables is a note, not a failure', async () => {
    const other = presetConfigJson('tiny') as any
    other.rope_parameters.compress.original_max_position_embeddings = 1000
    const prefill = await place('prefill', other)
    const decoder = await place('decoder', presetConfigJson('tiny'))
    // Independently: the whole tables are bit-identical over the window.
    expect(scanFirstDifference(prefill.rope.compressed_sparse_attention.params, decoder.rope.compressed_sparse_attention.params, 32768)).toBeNull()
    const verdicts = checkRopeTables([prefill, decoder])
    expect(verdicts.flatMap((v) => v.outliers)).toEqual([])
    expect(verdicts[1].notes).toEqual([
      'prefill rope_parameters.compress.original_max_position_embeddings is 1000, decoder\'s is 1024, but the compressed_sparse_attention tables are bit-identical: not an error',
    ])
  })

  it('the legacy flat style and the nested style with the same values give the same tables: nothing to say', async () => {
    const legacy = presetConfigJson('tiny') as any
    delete legacy.rope_parameters
    legacy.rope_scaling = { type: 'yarn', factor: 32, original_max_position_embeddings: 1024, beta_fast: 32, beta_slow: 1 }
    const verdicts = checkRopeTables([await place('prefill', legacy), await place('decoder', presetConfigJson('tiny'))])
    expect(verdicts.map((v) => [v.outliers.length, v.notes.length])).toEqual([[0, 0], [0, 0], [0, 0]])
  })

  it('the same raw keys giving another table fail: a nested dict without attention_factor gets transformers\' mscale', async () => {
    const legacy = presetConfigJson('tiny') as any
    delete legacy.rope_parameters
    legacy.rope_scaling = { type: 'yarn', factor: 32, original_max_position_embeddings: 1024, beta_fast: 32, beta_slow: 1 }
    const nested = presetConfigJson('tiny') as any
    delete nested.rope_parameters.compress.attention_factor
    const verdicts = checkRopeTables([await place('prefill', legacy), await place('decoder', nested)])
    const csa = verdicts[1]
    // Two places, a tie: the decoder's table is the reference, the prefill node's is named.
    expect(csa.consensus).toEqual(['decoder'])
    expect(csa.outliers).toHaveLength(1)
    const [o] = csa.outliers
    expect(o.place).toBe('prefill')
    expect(o.fields.map((f) => [f.param, f.source.field, f.value, f.consensusValue])).toEqual([
      ['attentionFactor', 'rope_scaling.attention_factor', 1, 0.1 * Math.log(32) + 1],
    ])
    expect(o.first).toMatchObject({ position: 0, pair: 0 })
    expect(o.angle).toBeUndefined()
  })
})
