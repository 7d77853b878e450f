// Fuzzing the safetensors header parser and SafetensorsFile.open: any input either parses or is a
// SafetensorsError, never another exception or a hang. Fixed seeds (helpers.ts).
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import fc from 'fast-check'
import { afterAll, describe, expect, it } from 'vitest'
import { SafetensorsError } from '../../src/errors.ts'
import { DTYPES, SafetensorsFile, parseHeader, serializeSafetensors, tensorFrom } from '../../src/formats/safetensors/index.ts'
import { SEED, Tally, applyByteEdits, byteEditArb, edgeValueArb, judge, judgeAsync, nastyKeyArb, runs } from './helpers.ts'

const dir = mkdtempSync(join(tmpdir(), 'pd-bridge-fuzz-st-'))
const tallies: Tally[] = []
afterAll(() => {
  for (const t of tallies) console.log(t.line())
  rmSync(dir, { recursive: true, force: true })
})

/** A valid small file: three tensors of different dtypes, and metadata. */
const valid = serializeSafetensors({
  a: tensorFrom('F32', [2, 3], new Float32Array([1, 2, 3, 4, 5, 6])),
  b: tensorFrom('BF16', [4], new Uint16Array([1, 2, 3, 4])),
  c: tensorFrom('U8', [0], new Uint8Array(0)),
}, { format: 'pt', note: 'fuzz' })
const headerLength = Number(new DataView(valid.buffer, valid.byteOffset, 8).getBigUint64(0, true))
const validHeader = valid.subarray(8, 8 + headerLength)

/** Random headers: mostly right-shaped entries with wrong dtypes, shapes and offsets mixed in. */
const dtypeArb = fc.oneof(fc.constantFrom(...DTYPES), fc.constantFrom('f32', 'F8', 'F4', 'C64', 'F6_E2M3', '', 'BOOL '), edgeValueArb)
const dimArb = fc.oneof(fc.integer({ min: 0, max: 5 }), fc.constantFrom(-1, 1.5, 2 ** 53, 2 ** 53 - 1, 2 ** 31, 1e308, '3', null))
const entryArb = fc.record({
  dtype: dtypeArb,
  shape: fc.oneof(fc.array(dimArb, { maxLength: 4 }), edgeValueArb),
  offsets: fc.oneof(
    fc.constant('auto' as const),
    fc.tuple(fc.oneof(fc.nat({ max: 64 }), edgeValueArb), fc.oneof(fc.nat({ max: 64 }), edgeValueArb)),
    fc.array(edgeValueArb, { maxLength: 3 }),
    edgeValueArb,
  ),
  extra: fc.option(fc.tuple(nastyKeyArb, edgeValueArb), { freq: 5 }),
})
const BITS: Record<string, number> = { BOOL: 8, U8: 8, I8: 8, U16: 16, I16: 16, F16: 16, BF16: 16, U32: 32, I32: 32, F32: 32, U64: 64, I64: 64, F64: 64 }
const headerArb = fc.record({
  entries: fc.array(fc.tuple(nastyKeyArb, entryArb), { maxLength: 5 }),
  metadata: fc.option(fc.oneof(fc.dictionary(nastyKeyArb, fc.string({ maxLength: 8 }), { maxKeys: 3 }), edgeValueArb), { freq: 2 }),
}).map(({ entries, metadata }) => {
  const obj: Record<string, unknown> = {}
  const put = (k: string, v: unknown): void => { Object.defineProperty(obj, k, { value: v, enumerable: true, writable: true, configurable: true }) }
  if (metadata !== null) put('__metadata__', metadata)
  let at = 0
  for (const [name, e] of entries) {
    let offsets: unknown = e.offsets
    if (e.offsets === 'auto') {
      // Offsets that fit the dtype and shape when they can be computed: these headers may parse.
      const bits = typeof e.dtype === 'string' ? BITS[e.dtype] : undefined
      const n = Array.isArray(e.shape) && e.shape.every((d) => typeof d === 'number') ? (e.shape as number[]).reduce((p, d) => p * d, 1) : 1
      const len = bits === undefined ? 4 : n * bits / 8
      offsets = [at, at + len]
      at += len
    }
    const entry: Record<string, unknown> = { dtype: e.dtype, shape: e.shape, data_offsets: offsets }
    if (e.extra !== null) entry[e.extra[0]] = e.extra[1]
    put(name, entry)
  }
  return { text: JSON.stringify(obj), dataLength: at }
})

function fileWith (header: Uint8Array, data: Uint8Array, declared = BigInt(header.length)): Uint8Array {
  const out = new Uint8Array(8 + header.length + data.length)
  new DataView(out.buffer).setBigUint64(0, declared, true)
  out.set(header, 8)
  out.set(data, 8 + header.length)
  return out
}

let fileNo = 0
async function openBytes (bytes: Uint8Array): Promise<void> {
  const path = join(dir, `f${fileNo++}.safetensors`)
  writeFileSync(path, bytes)
  try {
    const f = await SafetensorsFile.open(path)
    try {
      for (const name of f.tensors.keys()) await f.read(name)
    } finally {
      await f.close()
    }
  } finally {
    rmSync(path, { force: true })
  }
}

describe('safetensors: parseHeader', () => {
  it('the valid header parses (sanity)', () => {
    expect(parseHeader(validHeader, 'v').tensors.map((t) => t.name).sort()).toEqual(['a', 'b', 'c'])
  })

  it('mutated bytes of a valid header parse or are a SafetensorsError', () => {
    const t = new Tally('safetensors parseHeader, mutated valid header'); tallies.push(t)
    fc.assert(fc.property(fc.array(byteEditArb, { minLength: 1, maxLength: 4 }), (edits) => {
      const bytes = applyByteEdits(validHeader, edits)
      judge(t, bytes, () => parseHeader(bytes, 'fuzz'), SafetensorsError)
    }), { seed: SEED, numRuns: runs(3000) })
    expect(t.runs).toBe(runs(3000))
  })

  it('random JSON headers (wrong offsets, dtypes, shapes) parse or are a SafetensorsError', () => {
    const t = new Tally('safetensors parseHeader, random JSON headers'); tallies.push(t)
    fc.assert(fc.property(headerArb, ({ text }) => {
      const bytes = new TextEncoder().encode(text)
      judge(t, text, () => parseHeader(bytes, 'fuzz'), SafetensorsError)
    }), { seed: SEED, numRuns: runs(3000) })
    expect(t.parsed).toBeGreaterThan(0)
  })

  it('random bytes and deep nesting are a SafetensorsError', () => {
    const t = new Tally('safetensors parseHeader, random bytes / nesting'); tallies.push(t)
    fc.assert(fc.property(fc.oneof(
      fc.uint8Array({ maxLength: 64 }),
      fc.integer({ min: 1, max: 20000 }).map((n) => new TextEncoder().encode('{"a":' + '['.repeat(n))),
      fc.integer({ min: 1, max: 5000 }).map((n) => new TextEncoder().encode('{"a":' + '{"b":'.repeat(n) + '1' + '}'.repeat(n + 1))),
    ), (bytes) => {
      judge(t, bytes, () => parseHeader(bytes, 'fuzz'), SafetensorsError)
    }), { seed: SEED, numRuns: runs(1000) })
  })
})

describe('safetensors: SafetensorsFile.open on disk', () => {
  it('the valid file opens and reads (sanity)', async () => {
    await openBytes(valid)
  })

  it('mutated, truncated and mis-declared files open or are a SafetensorsError', async () => {
    const t = new Tally('safetensors SafetensorsFile.open, mutated / truncated files'); tallies.push(t)
    await fc.assert(fc.asyncProperty(fc.oneof(
      fc.array(byteEditArb, { minLength: 1, maxLength: 3 }).map((edits) => applyByteEdits(valid, edits)),
      fc.nat({ max: valid.length }).map((n) => valid.slice(0, n)),
      fc.oneof(fc.bigInt({ min: 0n, max: 2n ** 64n - 1n }), fc.constantFrom(0n, 1n, 2n ** 63n, 2n ** 64n - 1n, 100_000_000n, 100_000_001n, BigInt(headerLength - 1), BigInt(headerLength + 1)))
        .map((declared) => fileWith(validHeader, valid.subarray(8 + headerLength), declared)),
    ), async (bytes) => {
      await judgeAsync(t, bytes, () => openBytes(bytes), SafetensorsError)
    }), { seed: SEED, numRuns: runs(400) })
  })

  it('random JSON headers with data sections of random length open or are a SafetensorsError', async () => {
    const t = new Tally('safetensors SafetensorsFile.open, random headers'); tallies.push(t)
    await fc.assert(fc.asyncProperty(headerArb, fc.integer({ min: -2, max: 2 }), async ({ text, dataLength }, skew) => {
      const bytes = fileWith(new TextEncoder().encode(text), new Uint8Array(Math.max(0, Math.min(dataLength, 4096) + skew)))
      await judgeAsync(t, text, () => openBytes(bytes), SafetensorsError)
    }), { seed: SEED, numRuns: runs(300) })
  })
})
