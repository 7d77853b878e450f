// Fuzzing sidecar.json parsing (parseSidecarJson) and what loadSidecar computes from a parsed one
// (rope tables, weight specs, fingerprint): any text either parses or is a ConfigError, never another
// exception or a hang. Fixed seeds (helpers.ts).
import fc from 'fast-check'
import { afterAll, describe, expect, it } from 'vitest'
import { sidecarWeightSpecs } from '../../src/capture/index.ts'
import { ConfigError } from '../../src/errors.ts'
import { getProfile } from '../../src/model/profiles/index.ts'
import { SIDECAR_FORMAT, SIDECAR_WEIGHTS, parseSidecarJson, sidecarFingerprint, sidecarRope, type SidecarJson } from '../../src/wire/sidecar-format.ts'
import { SEED, Tally, applyJsonEdits, byteEditArb, edgeValueArb, jsonEditArb, judge, mutateText, nastyKeyArb, runs } from './helpers.ts'

const tallies: Tally[] = []
afterAll(() => { for (const t of tallies) console.log(t.line()) })

const hex = (c: string): string => c.repeat(64)
const rope = (ropeType: 'default' | 'yarn', theta: number) => ({
  ropeType, theta, factor: ropeType === 'yarn' ? 16 : 1, originalMaxPositionEmbeddings: ropeType === 'yarn' ? 65536 : null,
  betaFast: 32, betaSlow: 1, attentionFactor: 1, partialRotaryFactor: 0.5, ropeDim: 8, truncate: true,
})

/** A valid sidecar.json of a tiny model: sliding, CSA (4), HCA (8), CSA. */
const valid: SidecarJson = {
  format: SIDECAR_FORMAT,
  profile: JSON.parse(JSON.stringify(getProfile('decoder'))),
  profileFingerprint: hex('a'),
  hiddenSize: 32,
  headDim: 16,
  ropeDim: 8,
  indexHeadDim: 16,
  rmsNormEps: 1e-6,
  slidingWindow: 8,
  maxPositionEmbeddings: 1024,
  blockSize: 16,
  compressRates: { csa: 4, hca: 8 },
  layers: [
    { index: 0, layerType: 'sliding_attention', compressRatio: 0 },
    { index: 1, layerType: 'compressed_sparse_attention', compressRatio: 4 },
    { index: 2, layerType: 'heavily_compressed_attention', compressRatio: 8 },
    { index: 3, layerType: 'compressed_sparse_attention', compressRatio: 4 },
  ],
  ropeParameters: { sliding_attention: rope('default', 10000), compressed_sparse_attention: rope('yarn', 160000), heavily_compressed_attention: rope('yarn', 160000) },
  ropeFingerprints: { sliding_attention: hex('b'), compressed_sparse_attention: hex('c'), heavily_compressed_attention: hex('d') },
  weights: { file: SIDECAR_WEIGHTS, bytes: 1234, sha256: hex('e'), tensors: ['layers.0.attn.wkv', 'layers.1.attn.compressor.wkv'] },
  fingerprint: hex('f'),
} as unknown as SidecarJson
const validText = JSON.stringify(valid, null, 2)

/** Parse, then compute what loadSidecar computes from the parsed json. */
function parseAndUse (text: string): void {
  const json = parseSidecarJson(text, 'fuzz/sidecar.json')
  sidecarRope(json)
  sidecarWeightSpecs(json)
  sidecarFingerprint(json, json.weights.sha256)
}

describe('sidecar.json: parseSidecarJson', () => {
  it('the valid sidecar parses (sanity)', () => {
    expect(parseSidecarJson(validText, 'v').layers).toHaveLength(4)
    parseAndUse(validText)
  })

  it('structurally mutated sidecars parse or are a ConfigError', () => {
    const t = new Tally('sidecar.json, structural mutations'); tallies.push(t)
    fc.assert(fc.property(fc.array(jsonEditArb, { minLength: 1, maxLength: 3 }), (edits) => {
      const text = JSON.stringify(applyJsonEdits(valid, edits)) ?? 'undefined'
      judge(t, text, () => parseAndUse(text), ConfigError)
    }), { seed: SEED, numRuns: runs(3000) })
    expect(t.parsed).toBeGreaterThan(0)
  })

  it('byte-mutated sidecar text parses or is a ConfigError', () => {
    const t = new Tally('sidecar.json, byte mutations of the text'); tallies.push(t)
    fc.assert(fc.property(fc.array(byteEditArb, { minLength: 1, maxLength: 4 }), (edits) => {
      const text = mutateText(validText, edits)
      judge(t, text, () => parseAndUse(text), ConfigError)
    }), { seed: SEED, numRuns: runs(2000) })
  })

  it('random JSON is a ConfigError or parses', () => {
    const t = new Tally('sidecar.json, random JSON'); tallies.push(t)
    fc.assert(fc.property(fc.oneof(
      fc.jsonValue().map((v) => JSON.stringify(v)),
      fc.dictionary(nastyKeyArb, edgeValueArb, { maxKeys: 8 }).map((o) => JSON.stringify({ ...o, format: SIDECAR_FORMAT })),
      fc.string({ maxLength: 40 }),
    ), (text) => {
      judge(t, text, () => parseAndUse(text), ConfigError)
    }), { seed: SEED, numRuns: runs(1500) })
  })
})
