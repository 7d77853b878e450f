// The strict JSON reader agrees with JSON.parse on valid JSON, and refuses what JSON.parse silently accepts.
import { describe, it, expect } from 'vitest'
import fc from 'fast-check'
import { JsonNumber, parseStrictJson, type JsonValue } from '../../src/formats/safetensors/strict-json.ts'
import { compareCodePoints, compareReferenceOrder, referenceOrder } from '../../src/formats/safetensors/index.ts'

/** Convert the strict reader's output to what JSON.parse would give. */
function plain (v: JsonValue): unknown {
  if (v instanceof JsonNumber) return v.value
  if (v instanceof Map) {
    const o: Record<string, unknown> = {}
    for (const [k, x] of v) Object.defineProperty(o, k, { value: plain(x), enumerable: true, writable: true, configurable: true })
    return o
  }
  if (Array.isArray(v)) return v.map(plain)
  return v
}

const attempt = (f: () => unknown): { ok: true, value: unknown } | { ok: false } => {
  try { return { ok: true, value: f() } } catch { return { ok: false } }
}

describe('on valid JSON without duplicate keys it equals JSON.parse', () => {
  it('holds for generated JSON values, compact and indented', () => {
    fc.assert(fc.property(fc.jsonValue({ maxDepth: 4 }), fc.boolean(), (value, indent) => {
      const text = JSON.stringify(value, null, indent ? 2 : undefined)
      expect(plain(parseStrictJson(text))).toEqual(JSON.parse(text))
    }), { numRuns: 300 })
  })
})

describe('it never accepts text JSON.parse rejects', () => {
  it('holds for random strings over JSON-ish characters', () => {
    const chars = fc.constantFrom('{', '}', '[', ']', '"', ':', ',', ' ', '\n', '\\', 'u', '0', '1', '-', '.', 'e', 'a', 't', 'r', 'n', 'l', 'f', 's', '\u0001', '\uD800')
    fc.assert(fc.property(fc.string({ unit: chars, maxLength: 24 }), text => {
      const strict = attempt(() => plain(parseStrictJson(text)))
      const loose = attempt(() => JSON.parse(text))
      if (strict.ok) {
        expect(loose.ok).toBe(true)
        expect(strict.value).toEqual((loose as { value: unknown }).value)
      }
    }), { numRuns: 3000 })
  })
  it('refuses the cases JSON.parse accepts but the format forbids', () => {
    expect(() => parseStrictJson('{"a":1,"a":2}')).toThrow('duplicate key "a" in the top-level object at character 7')
    expect(() => parseStrictJson('{"x":{"k":1,"\\u006b":2}}')).toThrow('duplicate key "k" in "x"')
    expect(() => parseStrictJson('["\\udc00"]')).toThrow('lone surrogate')
    expect(() => parseStrictJson('['.repeat(65) + ']'.repeat(65))).toThrow('nested deeper than 64 levels')
    expect(() => parseStrictJson('\u00a0{}')).toThrow('unexpected character')
  })
})

describe('numbers keep their source text', () => {
  it('tells plain indices from lookalikes', () => {
    const arr = parseStrictJson('[0, 7, 9007199254740991, 9007199254740992, 2.0, 2e0, -0, -1]') as JsonNumber[]
    expect(arr.map(n => n.raw)).toEqual(['0', '7', '9007199254740991', '9007199254740992', '2.0', '2e0', '-0', '-1'])
    expect(arr.map(n => n.isPlainIndex())).toEqual([true, true, true, false, false, false, false, false])
  })
})

describe('compareCodePoints orders strings as their UTF-8 bytes', () => {
  it('agrees with Buffer.compare on the UTF-8 encodings', () => {
    const s = fc.string({ unit: 'binary', maxLength: 6 })
    fc.assert(fc.property(s, s, (a, b) => {
      expect(Math.sign(compareCodePoints(a, b))).toBe(Buffer.compare(Buffer.from(a, 'utf8'), Buffer.from(b, 'utf8')))
    }), { numRuns: 2000 })
  })
  it('puts U+FB01 before U+1D4B3, unlike UTF-16 order', () => {
    expect(compareCodePoints('\uFB01', '\u{1D4B3}')).toBeLessThan(0)
    expect('\uFB01' < '\u{1D4B3}').toBe(false)
  })
})

describe('reference order: dtype enum position descending, then name', () => {
  it('sorts all 64-bit, then 32-bit ... with enum position breaking ties within a width', () => {
    const entries = [
      { name: 'a', dtype: 'BOOL' }, { name: 'a', dtype: 'F4' }, { name: 'b', dtype: 'U8' }, { name: 'a', dtype: 'U8' },
      { name: 'a', dtype: 'I32' }, { name: 'z', dtype: 'F32' }, { name: 'a', dtype: 'U32' }, { name: 'a', dtype: 'BF16' },
      { name: 'a', dtype: 'F16' }, { name: 'a', dtype: 'F64' }, { name: 'a', dtype: 'U64' }, { name: 'a', dtype: 'I64' },
      { name: 'a', dtype: 'F8_E4M3' }, { name: 'a', dtype: 'F8_E8M0' }, { name: 'a', dtype: 'C64' },
    ] as const
    expect(referenceOrder(entries).map(e => `${e.dtype}:${e.name}`)).toEqual([
      'U64:a', 'I64:a', 'F64:a', 'C64:a', 'F32:z', 'U32:a', 'I32:a', 'BF16:a', 'F16:a', 'F8_E8M0:a', 'F8_E4M3:a',
      'U8:a', 'U8:b', 'F4:a', 'BOOL:a',
    ])
    expect(compareReferenceOrder({ name: 'a', dtype: 'F32' }, { name: 'a', dtype: 'F32' })).toBe(0)
  })
})
