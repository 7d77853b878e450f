// The capture directory format: what the writer helpers produce, and every rule a reader enforces.
import { createHash } from 'node:crypto'
import { readFileSync, readdirSync, writeFileSync, mkdirSync } from 'node:fs'
import { join } from 'node:path'
import { afterAll, describe, expect, it } from 'vitest'
import fc from 'fast-check'
import { SafetensorsError } from '../../src/errors.ts'
import { addLayerFile, finishManifest, startCapture } from '../../src/capture/manifest-updates.ts'
import {
  CAPTURE_FORMAT, CaptureManifestError, encodeManifest, layerFileName, parseManifest, readManifest, validateManifestForRequest, type CaptureManifest,
} from '../../src/wire/manifest.ts'
import { layerBytes, makeCapture, requestFor, tempDir } from './helpers.ts'

const tmp = tempDir('manifest')
afterAll(tmp.remove)
let serial = 0
const freshId = (): string => `req-${++serial}`

/** Run `f` and return the CaptureManifestError it throws (fails the test if it throws nothing else). */
async function manifestError (f: () => unknown): Promise<CaptureManifestError> {
  let thrown: unknown
  try {
    await f()
  }
  catch (e) {
    thrown = e
  }
  expect(thrown).toBeInstanceOf(CaptureManifestError)
  return thrown as CaptureManifestError
}

const sha = (b: Uint8Array): string => createHash('sha256').update(b).digest('hex')

/** A valid sealed manifest to mutate; nothing on disk. */
function doneManifest (numLayers = 3): CaptureManifest {
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
  }
}

describe('a capture written with the helpers reads back exactly', () => {
  it('lists every layer with its size and SHA-256, in order, and the files hold the given bytes', async () => {
    const start = { ...requestFor(freshId(), 4), memoryBudgetBytes: 1 << 30 }
    const { dir, layers } = await makeCapture(tmp.dir, start)
    const m = await readManifest(dir)
    expect(m.state).toBe('done')
    expect(m.sealedLength).toBe(4096)
    expect(m.memoryBudgetBytes).toBe(1 << 30)
    expect(m.timings).toEqual({ prefill: 12.5 })
    expect(m.layers.map((e) => e.index)).toEqual([0, 1, 2, 3])
    for (const [i, entry] of m.layers.entries()) {
      expect(entry.file).toBe(`layer-00${i}.safetensors`)
      expect(entry.bytes).toBe(layers[i].length)
      expect(entry.sha256).toBe(sha(layers[i]))
      expect(Buffer.compare(readFileSync(join(dir, entry.file)), Buffer.from(layers[i]))).toBe(0)
    }
    expect(m.payloadBytes).toBe(layers.reduce((s, b) => s + b.length, 0))
    // Only the manifest and the layer files remain: no temporary files left behind.
    expect(readdirSync(dir).sort()).toEqual(['layer-000.safetensors', 'layer-001.safetensors', 'layer-002.safetensors', 'layer-003.safetensors', 'manifest.json'])
  })

  it('accepts layers out of order and still lists them ascending', async () => {
    const dir = await startCapture(tmp.dir, requestFor(freshId(), 3))
    for (const i of [2, 0, 1]) await addLayerFile(dir, i, layerBytes(i))
    expect((await readManifest(dir)).layers.map((e) => e.index)).toEqual([0, 1, 2])
  })

  it('serialises concurrent addLayerFile calls without losing any', async () => {
    const dir = await startCapture(tmp.dir, requestFor(freshId(), 8))
    await Promise.all(Array.from({ length: 8 }, (_, i) => addLayerFile(dir, i, layerBytes(i))))
    expect((await readManifest(dir)).layers.map((e) => e.index)).toEqual([0, 1, 2, 3, 4, 5, 6, 7])
  })

  it('records partial with T\' < T and failed with its error', async () => {
    const partial = await makeCapture(tmp.dir, requestFor(freshId(), 2), { state: 'partial', sealedLength: 1024 })
    const p = await readManifest(partial.dir)
    expect([p.state, p.sealedLength, p.tokenCount]).toEqual(['partial', 1024, 4096])
    const failed = await makeCapture(tmp.dir, requestFor(freshId(), 2), { state: 'failed', error: 'CUDA out of memory' })
    const f = await readManifest(failed.dir)
    expect([f.state, f.error]).toEqual(['failed', 'CUDA out of memory'])
  })

  it('writes keys in a fixed order, so equal manifests are equal bytes', () => {
    const m = doneManifest()
    const shuffled = Object.fromEntries(Object.entries(m).reverse()) as unknown as CaptureManifest
    expect(encodeManifest(shuffled)).toBe(encodeManifest(m))
    expect(Object.keys(JSON.parse(encodeManifest(m)))[0]).toBe('format')
  })

  it('round-trips any valid sealed manifest through encode and parse', () => {
    fc.assert(fc.property(
      fc.integer({ min: 1, max: 40 }), fc.integer({ min: 1, max: 1_000_000 }), fc.boolean(), fc.integer({ min: 0, max: 999_999 }),
      (numLayers, tokenCount, partial, cut) => {
        const m = doneManifest(numLayers)
        m.tokenCount = tokenCount
        m.state = partial && tokenCount > 1 ? 'partial' : 'done'
        m.sealedLength = m.state === 'partial' ? cut % tokenCount : tokenCount
        expect(parseManifest(encodeManifest(m), 'mem')).toEqual(m)
      },
    ), { numRuns: 200 })
  })
})

describe('the writer helpers refuse what would break the format', () => {
  it('startCapture refuses an existing directory, a bad id, a missing root and T = 0', async () => {
    const start = requestFor(freshId())
    await startCapture(tmp.dir, start)
    expect((await manifestError(() => startCapture(tmp.dir, start))).message).toContain('already exists')
    expect((await manifestError(() => startCapture(tmp.dir, requestFor('../escape')))).field).toBe('requestId')
    expect((await manifestError(() => startCapture(tmp.dir, requestFor('a..b')))).field).toBe('requestId')
    expect((await manifestError(() => startCapture(join(tmp.dir, 'absent'), requestFor(freshId())))).message).toContain('does not exist')
    const zero = await manifestError(() => startCapture(tmp.dir, { ...requestFor(freshId()), tokenCount: 0 }))
    expect(zero.field).toBe('tokenCount')
  })

  it('addLayerFile refuses a duplicate, an index out of range, non-safetensors bytes and a sealed capture', async () => {
    const dir = await startCapture(tmp.dir, requestFor(freshId(), 2))
    await addLayerFile(dir, 0, layerBytes(0))
    expect((await manifestError(() => addLayerFile(dir, 0, layerBytes(0)))).message).toContain('already listed')
    expect((await manifestError(() => addLayerFile(dir, 2, layerBytes(2)))).message).toContain('not an integer in 0..1')
    expect((await manifestError(() => addLayerFile(dir, 1.5, layerBytes(1)))).field).toBe('layers')
    const truncated = layerBytes(1).subarray(0, 100)
    await expect(addLayerFile(dir, 1, truncated)).rejects.toThrow(SafetensorsError)
    await expect(addLayerFile(dir, 1, new Uint8Array(3))).rejects.toThrow(/layer-001\.safetensors.*shorter than the 8-byte/)
    // A refused layer leaves no file and no entry.
    expect(readdirSync(dir).sort()).toEqual(['layer-000.safetensors', 'manifest.json'])
    await addLayerFile(dir, 1, layerBytes(1))
    await finishManifest(dir, 'done')
    expect((await manifestError(() => addLayerFile(dir, 1, layerBytes(1)))).message).toContain('takes no more layers')
  })

  it('finishManifest refuses done with missing layers, bad partials, failed without error, and resealing', async () => {
    const dir = await startCapture(tmp.dir, requestFor(freshId(), 3))
    await addLayerFile(dir, 0, layerBytes(0))
    await addLayerFile(dir, 2, layerBytes(2))
    const missing = await manifestError(() => finishManifest(dir, 'done'))
    expect(missing.field).toBe('layers')
    expect(missing.message).toContain('missing 1')
    expect((await manifestError(() => finishManifest(dir, 'partial'))).field).toBe('sealedLength')
    expect((await manifestError(() => finishManifest(dir, 'failed'))).field).toBe('error')
    await addLayerFile(dir, 1, layerBytes(1))
    expect((await manifestError(() => finishManifest(dir, 'partial', { sealedLength: 4096 }))).message).toContain('that is done')
    expect((await manifestError(() => finishManifest(dir, 'partial', { sealedLength: 5000 }))).message).toContain('exceeds tokenCount')
    // Every refusal above left the manifest as it was: running, three layers.
    const before = await readManifest(dir)
    expect([before.state, before.layers.length]).toEqual(['running', 3])
    await finishManifest(dir, 'partial', { sealedLength: 2048 })
    expect((await manifestError(() => finishManifest(dir, 'done'))).message).toContain('already partial')
  })
})

describe('parseManifest refuses each malformed manifest, naming the field', () => {
  const base = (): Record<string, unknown> => JSON.parse(encodeManifest(doneManifest())) as Record<string, unknown>
  const layersOf = (m: Record<string, unknown>): Array<Record<string, unknown>> => m.layers as Array<Record<string, unknown>>
  const cases: Array<[string, (m: Record<string, unknown>) => unknown, string, string]> = [
    ['another format version', (m) => { m.format = 'pd-bridge-capture/2' }, 'format', 'pd-bridge-capture/2'],
    ['no format', (m) => { delete m.format }, 'format', 'missing'],
    ['an unknown key', (m) => { m.extra = 1 }, '(root)', 'extra'],
    ['T as a string', (m) => { m.tokenCount = '4096' }, 'tokenCount', 'number'],
    ['T of 0', (m) => { m.tokenCount = 0; m.sealedLength = 0 }, 'tokenCount', ''],
    ['a fractional T', (m) => { m.tokenCount = 4096.5 }, 'tokenCount', ''],
    ['an unknown state', (m) => { m.state = 'sealed' }, 'state', ''],
    ['an empty fingerprint', (m) => { m.sidecarFingerprint = '' }, 'sidecarFingerprint', ''],
    ['a request id with a slash', (m) => { m.requestId = 'a/b' }, 'requestId', ''],
    ['a request id with ..', (m) => { m.requestId = 'a..b' }, 'requestId', 'without'],
    ['numLayers above 1000', (m) => { m.numLayers = 1001 }, 'numLayers', ''],
    ['negative layer bytes', (m) => { layersOf(m)[0].bytes = -1 }, 'layers.0.bytes', ''],
    ['an uppercase checksum', (m) => { layersOf(m)[1].sha256 = String(layersOf(m)[1].sha256).toUpperCase() }, 'layers.1.sha256', 'lowercase hex'],
    ['a layer file outside the pattern', (m) => { layersOf(m)[0].file = '../x.safetensors' }, 'layers.0.file', ''],
    ['a layer named for another index', (m) => { layersOf(m)[0].file = 'layer-005.safetensors' }, 'layers', 'expected layer-000.safetensors'],
    ['layers out of order', (m) => { layersOf(m).reverse() }, 'layers', 'ascending'],
    ['a duplicate layer', (m) => { layersOf(m)[1] = { ...layersOf(m)[0] } }, 'layers', 'duplicate layer index 0'],
    ['a layer index not below numLayers', (m) => { m.numLayers = 2 }, 'layers', 'not below numLayers 2'],
    ['payloadBytes not the sum', (m) => { m.payloadBytes = 1 }, 'payloadBytes', 'hold 303 bytes'],
    ['sealedLength above T', (m) => { m.sealedLength = 5000 }, 'sealedLength', 'exceeds tokenCount'],
    ['done with T\' != T', (m) => { m.sealedLength = 10 }, 'sealedLength', 'done capture seals all of T'],
    ['partial with T\' == T', (m) => { m.state = 'partial' }, 'sealedLength', 'that is done'],
    ['done with a layer missing', (m) => { layersOf(m).splice(1, 1); m.payloadBytes = 202 }, 'layers', 'missing 1'],
    ['partial with a layer missing', (m) => { m.state = 'partial'; m.sealedLength = 7; layersOf(m).pop(); m.payloadBytes = 201 }, 'layers', 'missing 2'],
    ['an error on a done capture', (m) => { m.error = 'x' }, 'error', 'only a failed capture'],
    ['failed without an error', (m) => { m.state = 'failed' }, 'error', 'must record its error'],
    ['a bad timestamp', (m) => { m.createdAt = 'yesterday' }, 'createdAt', ''],
    ['updatedAt before createdAt', (m) => { m.updatedAt = '2025-01-01T00:00:00.000Z' }, 'updatedAt', 'before createdAt'],
    ['a negative timing', (m) => { m.timings = { prefill: -1 } }, 'timings.prefill', ''],
    ['a zero memory budget', (m) => { m.memoryBudgetBytes = 0 }, 'memoryBudgetBytes', ''],
  ]
  it.each(cases)('%s', (_, mutate, field, fragment) => {
    const m = base()
    mutate(m)
    let thrown: unknown
    try {
      parseManifest(JSON.stringify(m), 'caps/req-a/manifest.json')
    }
    catch (e) {
      thrown = e
    }
    expect(thrown).toBeInstanceOf(CaptureManifestError)
    const e = thrown as CaptureManifestError
    expect(e.field).toBe(field)
    expect(e.message.startsWith('caps/req-a/manifest.json: manifest ')).toBe(true)
    expect(e.message).toContain(fragment)
  })

  it('refuses text that is not JSON, and JSON that is not an object', () => {
    expect(() => parseManifest('{"format":', 'm.json')).toThrow(/m\.json: manifest \(json\): not valid JSON/)
    expect(() => parseManifest('[1]', 'm.json')).toThrow(/must be a JSON object/)
    expect(() => parseManifest('null', 'm.json')).toThrow(/must be a JSON object/)
  })

  it('the unmutated base manifest passes (so each case above fails for its own reason)', () => {
    expect(parseManifest(JSON.stringify(base()), 'm.json')).toEqual(doneManifest())
  })

  it('readManifest names a missing or unreadable manifest', async () => {
    const empty = join(tmp.dir, 'no-manifest')
    mkdirSync(empty)
    expect((await manifestError(() => readManifest(empty))).message).toContain('no manifest.json here')
    writeFileSync(join(empty, 'manifest.json'), 'not json')
    expect((await manifestError(() => readManifest(empty))).message).toContain(join(empty, 'manifest.json'))
  })
})

describe('validateManifestForRequest trusts only a sealed manifest that matches the request', () => {
  const request = { requestId: 'req-a', tokenCount: 4096, sidecarFingerprint: 'geom-7f3a' }
  const check = (m: CaptureManifest, req = request): CaptureManifestError | undefined => {
    try {
      validateManifestForRequest(m, req, 'share')
      return undefined
    }
    catch (e) {
      expect(e).toBeInstanceOf(CaptureManifestError)
      return e as CaptureManifestError
    }
  }

  it('accepts a matching done manifest and a matching partial one', () => {
    expect(check(doneManifest())).toBeUndefined()
    expect(check({ ...doneManifest(), state: 'partial', sealedLength: 2048 })).toBeUndefined()
  })

  const mismatches: Array<[string, (m: CaptureManifest) => void, Partial<typeof request>, string, string]> = [
    ['T differs', () => undefined, { tokenCount: 8192 }, 'tokenCount', 'T is 4096 in the manifest but the request has 8192'],
    ['fingerprint differs', () => undefined, { sidecarFingerprint: 'geom-other' }, 'sidecarFingerprint', 'geom-other'],
    ['request id differs', () => undefined, { requestId: 'req-b' }, 'requestId', 'req-b'],
    ['format version differs', (m) => { (m as { format: string }).format = 'pd-bridge-capture/0' }, {}, 'format', 'pd-bridge-capture/0'],
    ['still running', (m) => { m.state = 'running' }, {}, 'state', 'is running'],
    ['failed', (m) => { m.state = 'failed'; m.error = 'OOM at layer 7' }, {}, 'state', 'OOM at layer 7'],
    ['duplicate layer', (m) => { m.layers[2] = { ...m.layers[1] }; m.payloadBytes = 303 - 102 + 101 }, {}, 'layers', 'duplicate layer index 1'],
    ['missing layer', (m) => { m.layers.pop(); m.payloadBytes = 201 }, {}, 'layers', 'missing 2'],
    ['sealedLength above T', (m) => { m.sealedLength = 4097 }, {}, 'sealedLength', 'exceeds'],
    ['partial with T\' == T', (m) => { m.state = 'partial' }, {}, 'sealedLength', 'that is done'],
  ]
  it.each(mismatches)('refuses: %s', (_, mutate, req, field, fragment) => {
    const m = doneManifest()
    mutate(m)
    const e = check(m, { ...request, ...req })
    expect(e?.field).toBe(field)
    expect(e?.message).toContain(fragment)
    expect(e?.message.startsWith('share: manifest ')).toBe(true)
  })
})
