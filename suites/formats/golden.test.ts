// The exact bytes the writer produces, spelled out. The first three vectors are the expected
// outputs asserted by huggingface/safetensors' own Rust tests (tensor.rs, snapshot 24b0b28); the
// last one is hand-written here to pin the ordering rule across dtypes and non-ASCII names.
import { describe, it, expect } from 'vitest'
import { serializeSafetensors, tensorFrom, encodeHeader } from '../../src/formats/safetensors/index.ts'
import { sameBytes } from './helpers.ts'

const sixFloats = new Float32Array([0, 1, 2, 3, 4, 5])
const sixFloatBytes = [0, 0, 0, 0, 0, 0, 128, 63, 0, 0, 0, 64, 0, 0, 64, 64, 0, 0, 128, 64, 0, 0, 160, 64]

describe('upstream vector test_serialization: one F32 [1,2,3] tensor "attn.0"', () => {
  it('header length 64, no padding needed, data right after', () => {
    const want = Uint8Array.from([
      64, 0, 0, 0, 0, 0, 0, 0, 123, 34, 97, 116, 116, 110, 46, 48, 34, 58, 123, 34, 100,
      116, 121, 112, 101, 34, 58, 34, 70, 51, 50, 34, 44, 34, 115, 104, 97, 112, 101, 34,
      58, 91, 49, 44, 50, 44, 51, 93, 44, 34, 100, 97, 116, 97, 95, 111, 102, 102, 115,
      101, 116, 115, 34, 58, 91, 48, 44, 50, 52, 93, 125, 125, ...sixFloatBytes,
    ])
    expect(sameBytes(serializeSafetensors({ 'attn.0': tensorFrom('F32', [1, 2, 3], sixFloats) }), want)).toBe(true)
  })
})

describe('upstream vector test_serialization_forced_alignement: "attn0" F32 [1,1,2,3]', () => {
  it('pads the 65-byte header with 7 spaces to 72', () => {
    const want = Uint8Array.from([
      72, 0, 0, 0, 0, 0, 0, 0, 123, 34, 97, 116, 116, 110, 48, 34, 58, 123, 34, 100, 116,
      121, 112, 101, 34, 58, 34, 70, 51, 50, 34, 44, 34, 115, 104, 97, 112, 101, 34, 58,
      91, 49, 44, 49, 44, 50, 44, 51, 93, 44, 34, 100, 97, 116, 97, 95, 111, 102, 102,
      115, 101, 116, 115, 34, 58, 91, 48, 44, 50, 52, 93, 125, 125, 32, 32, 32, 32, 32,
      32, 32, ...sixFloatBytes,
    ])
    expect(sameBytes(serializeSafetensors({ attn0: tensorFrom('F32', [1, 1, 2, 3], sixFloats) }), want)).toBe(true)
  })
})

describe('upstream vector test_empty: no tensors, with and without metadata', () => {
  it('writes {} padded to 8', () => {
    expect(sameBytes(serializeSafetensors({}), Uint8Array.from([8, 0, 0, 0, 0, 0, 0, 0, 123, 125, 32, 32, 32, 32, 32, 32]))).toBe(true)
  })
  it('writes __metadata__ first', () => {
    const want = Uint8Array.from([
      40, 0, 0, 0, 0, 0, 0, 0, 123, 34, 95, 95, 109, 101, 116, 97, 100, 97, 116, 97, 95,
      95, 34, 58, 123, 34, 102, 114, 97, 109, 101, 119, 111, 114, 107, 34, 58, 34, 112,
      116, 34, 125, 125, 32, 32, 32, 32, 32,
    ])
    expect(sameBytes(serializeSafetensors({}, { framework: 'pt' }), want)).toBe(true)
  })
})

describe('hand-written golden: dtype rank descending, then names by code point', () => {
  // Given in scrambled order; the reference puts I64 before F32 before BF16 before U8, and sorts
  // names by UTF-8 bytes: "ﬁ" (U+FB01) before "𝒳" (U+1D4B3), which UTF-16 order would reverse.
  const tensors = {
    '\u{1D4B3}': tensorFrom('U8', [1], Uint8Array.of(0xee)),
    c: tensorFrom('U8', [3], Uint8Array.of(1, 2, 3)),
    a: tensorFrom('BF16', [2], Uint16Array.of(0x3f80, 0xc000)),
    m: tensorFrom('U8', [0], new Uint8Array(0)),
    '\uFB01': tensorFrom('U8', [1], Uint8Array.of(0xdd)),
    b: tensorFrom('F32', [2], Float32Array.of(1, -2)),
    z: tensorFrom('I64', [], BigInt64Array.of(7n)),
  }
  const header =
    '{"__metadata__":{"format":"pt"},' +
    '"z":{"dtype":"I64","shape":[],"data_offsets":[0,8]},' +
    '"b":{"dtype":"F32","shape":[2],"data_offsets":[8,16]},' +
    '"a":{"dtype":"BF16","shape":[2],"data_offsets":[16,20]},' +
    '"c":{"dtype":"U8","shape":[3],"data_offsets":[20,23]},' +
    '"m":{"dtype":"U8","shape":[0],"data_offsets":[23,23]},' +
    '"\uFB01":{"dtype":"U8","shape":[1],"data_offsets":[23,24]},' +
    '"\u{1D4B3}":{"dtype":"U8","shape":[1],"data_offsets":[24,25]}}'
  const want = Uint8Array.from([
    0xa0, 0x01, 0, 0, 0, 0, 0, 0, // 416 = 415 header bytes + 1 space
    ...new TextEncoder().encode(header), 0x20,
    7, 0, 0, 0, 0, 0, 0, 0, // z
    0x00, 0x00, 0x80, 0x3f, 0x00, 0x00, 0x00, 0xc0, // b = [1, -2]
    0x80, 0x3f, 0x00, 0xc0, // a = bf16 [1, -2]
    1, 2, 3, // c
    0xdd, // ﬁ
    0xee, // 𝒳
  ])

  it('matches byte for byte', () => {
    const got = serializeSafetensors(tensors, { format: 'pt' })
    expect(got.length).toBe(want.length)
    expect(sameBytes(got, want)).toBe(true)
  })

  it('is the same whatever order the tensors are given in', () => {
    const reversed = Object.fromEntries(Object.entries(tensors).reverse())
    expect(sameBytes(serializeSafetensors(reversed, { format: 'pt' }), want)).toBe(true)
  })
})

describe('metadata keys are written in code-point order, and an empty map is omitted', () => {
  it('sorts keys (the reference uses a HashMap, so any order is valid; ours is deterministic)', () => {
    const bytes = encodeHeader([], { b: '2', a: '1', '\u{1F600}': '3', '\uFFFD': '4' })
    expect(new TextDecoder().decode(bytes).trimEnd()).toBe('{"__metadata__":{"a":"1","b":"2","\uFFFD":"4","\u{1F600}":"3"}}')
  })
  it('writes no __metadata__ for {}', () => {
    expect(sameBytes(serializeSafetensors({}, {}), serializeSafetensors({}))).toBe(true)
  })
  it('escapes strings as serde_json does: control characters, quotes, backslashes; not / or non-ASCII', () => {
    const text = new TextDecoder().decode(encodeHeader([], { k: '"\\/\n\t\u0001\u007f\u00e9\u2028' })).trimEnd()
    expect(text).toBe('{"__metadata__":{"k":"\\"\\\\/\\n\\t\\u0001\u007f\u00e9\u2028"}}')
  })
})
