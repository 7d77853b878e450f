// Fuzzing the capture manifest parser (parseManifest, readManifest): any text either parses or is a
// CaptureManifestError, never another exception or a hang. Fixed seeds (helpers.ts).
import { createHash } from 'node:crypto'
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import fc from 'fast-check'
import { afterAll, describe, expect, it } from 'vitest'
import {
  CAPTURE_FORMAT, CaptureManifestError, encodeManifest, layerFileName, parseManifest, readManifest, tokenIdsSha256,
  validateManifestForRequest, checkManifestTokens, type CaptureManifest,
} from '../../src/wire/manifest.ts'
import { SEED, Tally, applyJsonEdits, byteEditArb, edgeValueArb, jsonEditArb, judge, judgeAsync, mutateText, nastyKeyArb, runs } from './helpers.ts'

const dir = mkdtempSync(join(tmpdir(), 'pd-bridge-fuzz-manifest-'))
const tallies: Tally[] = []
afterAll(() => {
  for (const t of tallies) console.log(t.line())
  rmSync(dir, { recursive: true, force: true })
})

const sha = (b: Uint8Array): string => createHash('sha256').update(b).digest('hex')
const TOKENS = [1, 2, 3, 4]

/** Valid manifests to mutate (as suites/share/manifest.test.ts builds them). */
function manifest (numLayers: number, extra: Partial<CaptureManifest> = {}): CaptureManifest {
  const layers = Array.from({ length: numLayers }, (_, i) => ({ index: i, file: layerFileName(i), bytes: 100 + i, sha256: sha(new Uint8Array([i])) }))
  return {
    format: CAPTURE_FORMAT,
    requestId: 'req-a',
    state: 'done',
    tokenCount: 4096,
    sealedLength: 4096,
    sidecarFingerprint: 'geom-7f3a',
    profile: 'decoder',
    numLayers,
    layers,
    createdAt: '2026-01-01T00:00:00.000Z',
    updatedAt: '2026-01-01T00:00:01.000Z',
    timings: { prefill: 10 },
    payloadBytes: layers.reduce((s, e) => s + e.bytes, 0),
    ...extra,
  }
}
const BASES = [manifest(3), manifest(1, { tokensSha256: tokenIdsSha256(TOKENS), memoryBudgetBytes: 1 << 30 })]
const baseArb = fc.constantFrom(...BASES)
const request = { requestId: 'req-a', tokenCount: 4096, sidecarFingerprint: 'geom-7f3a', profile: 'decoder', numLayers: 3 }

/** Parse, then run the consumer-side checks a reader runs next (they must refuse the same way). */
function parseAndCheck (text: string): void {
  const m = parseManifest(text, 'fuzz/manifest.json')
  validateManifestForRequest(m, request, 'fuzz')
  if (m.tokensSha256 !== undefined) checkManifestTokens(m, TOKENS, 'fuzz')
}

describe('capture manifest: parseManifest', () => {
  it('the valid manifests parse (sanity)', () => {
    for (const m of BASES) expect(parseManifest(encodeManifest(m), 'v')).toEqual(m)
  })

  it('structurally mutated valid manifests parse or are a CaptureManifestError', () => {
    const t = new Tally('capture manifest, structural mutations'); tallies.push(t)
    fc.assert(fc.property(baseArb, fc.array(jsonEditArb, { minLength: 1, maxLength: 3 }), (base, edits) => {
      const text = JSON.stringify(applyJsonEdits(base, edits)) ?? 'undefined'
      judge(t, text, () => parseAndCheck(text), CaptureManifestError)
    }), { seed: SEED, numRuns: runs(3000) })
  })

  it('byte-mutated manifest text parses or is a CaptureManifestError', () => {
    const t = new Tally('capture manifest, byte mutations of the text'); tallies.push(t)
    fc.assert(fc.property(baseArb, fc.array(byteEditArb, { minLength: 1, maxLength: 4 }), (base, edits) => {
      const text = mutateText(encodeManifest(base), edits)
      judge(t, text, () => parseAndCheck(text), CaptureManifestError)
    }), { seed: SEED, numRuns: runs(2000) })
  })

  it('random JSON (and JSON with the right format tag) is a CaptureManifestError or parses', () => {
    const t = new Tally('capture manifest, random JSON'); tallies.push(t)
    fc.assert(fc.property(fc.oneof(
      fc.jsonValue().map((v) => JSON.stringify(v)),
      fc.dictionary(nastyKeyArb, edgeValueArb, { maxKeys: 8 }).map((o) => JSON.stringify({ ...o, format: CAPTURE_FORMAT })),
      fc.string({ maxLength: 40 }),
      fc.integer({ min: 1, max: 20000 }).map((n) => `{"format":"${CAPTURE_FORMAT}","layers":${'['.repeat(n)}${']'.repeat(n)}}`),
    ), (text) => {
      judge(t, text, () => parseAndCheck(text), CaptureManifestError)
    }), { seed: SEED, numRuns: runs(2000) })
  })
})

describe('capture manifest: readManifest on disk', () => {
  it('mutated manifest files read or are a CaptureManifestError', async () => {
    const t = new Tally('capture manifest, readManifest on mutated files'); tallies.push(t)
    let n = 0
    await fc.assert(fc.asyncProperty(baseArb, fc.array(jsonEditArb, { maxLength: 2 }), fc.array(byteEditArb, { maxLength: 2 }), async (base, edits, byteEdits) => {
      const text = mutateText(JSON.stringify(applyJsonEdits(base, edits)) ?? '', byteEdits)
      const d = join(dir, `c${n++}`)
      mkdirSync(d, { recursive: true })
      writeFileSync(join(d, 'manifest.json'), text)
      await judgeAsync(t, text, () => readManifest(d), CaptureManifestError)
      rmSync(d, { recursive: true, force: true })
    }), { seed: SEED, numRuns: runs(300) })
  })
})

