// Fuzzing the block metadata parser (readBlockInfo, then incompatibility against a layout): any
// metadata map either parses or is a BlockStoreError, never another exception or a hang; and a
// block file's header bytes, end to end through parseHeader, parse or are a PdBridgeError.
// Fixed seeds (helpers.ts).
import fc from 'fast-check'
import { afterAll, describe, expect, it } from 'vitest'
import { PdBridgeError } from '../../src/errors.ts'
import { parseHeader, serializeSafetensors, tensorFrom } from '../../src/formats/safetensors/index.ts'
import { BlockStoreError } from '../../src/decode/store/errors.ts'
import { META, blockMetadata, incompatibility, readBlockInfo, type StoreLayout } from '../../src/decode/store/metadata.ts'
import { SEED, Tally, applyByteEdits, byteEditArb, judge, mutateText, nastyKeyArb, runs } from './helpers.ts'

const tallies: Tally[] = []
afterAll(() => { for (const t of tallies) console.log(t.line()) })

const layout: StoreLayout = {
  modelName: '/models/tiny-dsv4',
  blockSize: 16,
  layerCacheTypes: ['RotatingKVCache', 'CacheList', 'CacheList', 'CacheList'],
  cachelistSubtypes: { 1: ['PoolingCache:4', 'PoolingCache:4'], 2: ['PoolingCache:8'] },
  geometryFingerprint: 'a'.repeat(64),
}
const HASH = '0123456789abcdef'.repeat(4)
const valid: Record<string, string> = {
  ...blockMetadata(layout, HASH, 16, '5', [{ offset: 16 }, [16, 4], [16, 8], null], 1760000000),
  [META.contentSha256]: 'c'.repeat(64),
}

function parseAndJudge (metadata: Record<string, string>): void {
  const info = readBlockInfo(metadata, 'fuzz/block.safetensors')
  incompatibility(info, layout, HASH)
}

/** A string edit: byte mutations, a whole new value, or a JSON-ish value. */
const valueArb = fc.oneof(
  fc.string({ maxLength: 20 }),
  fc.constantFrom('', '0', '00', '-1', '1e3', '16', '016', ' 16', '9007199254740993', '[]', '[1]', '{}', 'null', '["CacheList"]', '[' + '['.repeat(5000), '"x"', '3', '4', '5', '6'),
  fc.jsonValue({ maxDepth: 3 }).map((v) => JSON.stringify(v) ?? 'null'),
)
const metaEditArb = fc.oneof(
  fc.record({ op: fc.constant('bytes' as const), key: fc.constantFrom(...Object.keys(valid)), edits: fc.array(byteEditArb, { minLength: 1, maxLength: 3 }) }),
  fc.record({ op: fc.constant('set' as const), key: fc.oneof(fc.constantFrom(...Object.keys(valid)), nastyKeyArb), value: valueArb }),
  fc.record({ op: fc.constant('delete' as const), key: fc.constantFrom(...Object.keys(valid)) }),
)

function edited (edits: ReadonlyArray<{ op: string, key: string, edits?: any, value?: string }>): Record<string, string> {
  const m: Record<string, string> = { ...valid }
  for (const e of edits) {
    if (e.op === 'delete') delete m[e.key]
    else if (e.op === 'set') Object.defineProperty(m, e.key, { value: e.value, enumerable: true, writable: true, configurable: true })
    else m[e.key] = mutateText(m[e.key] ?? '', e.edits)
  }
  return m
}

describe('block metadata: readBlockInfo + incompatibility', () => {
  it('the valid metadata parses and is compatible (sanity)', () => {
    expect(incompatibility(readBlockInfo(valid, 'v'), layout, HASH)).toBeNull()
  })

  it('mutated metadata maps parse or are a BlockStoreError', () => {
    const t = new Tally('block metadata, mutated metadata maps'); tallies.push(t)
    fc.assert(fc.property(fc.array(metaEditArb, { minLength: 1, maxLength: 3 }), (edits) => {
      const m = edited(edits)
      judge(t, m, () => parseAndJudge(m), BlockStoreError)
    }), { seed: SEED, numRuns: runs(3000) })
    expect(t.parsed).toBeGreaterThan(0)
  })

  it('random string maps parse or are a BlockStoreError', () => {
    const t = new Tally('block metadata, random string maps'); tallies.push(t)
    fc.assert(fc.property(fc.dictionary(fc.oneof(fc.constantFrom(...Object.keys(valid)), nastyKeyArb), valueArb, { maxKeys: 14 }), (m) => {
      judge(t, m, () => parseAndJudge(m), BlockStoreError)
    }), { seed: SEED, numRuns: runs(1500) })
  })

  it('a block header, byte-mutated, goes through parseHeader and readBlockInfo or is a PdBridgeError', () => {
    const t = new Tally('block metadata, mutated block headers end to end'); tallies.push(t)
    const file = serializeSafetensors({ 'layers.0.keys': tensorFrom('F32', [1, 2], new Float32Array([1, 2])) }, valid)
    const n = Number(new DataView(file.buffer, file.byteOffset, 8).getBigUint64(0, true))
    const header = file.subarray(8, 8 + n)
    fc.assert(fc.property(fc.array(byteEditArb, { minLength: 1, maxLength: 3 }), (edits) => {
      const bytes = applyByteEdits(header, edits)
      judge(t, bytes, () => parseAndJudge(parseHeader(bytes, 'fuzz').metadata), PdBridgeError)
    }), { seed: SEED, numRuns: runs(2000) })
  })
})
