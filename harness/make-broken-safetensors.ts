// Regenerates suites/formats/corpus/: one small broken safetensors file per rule the reader enforces,
// plus expected.json (file -> the fragment its error message must contain). Deterministic: running
// it twice gives identical bytes. Run: npx tsx harness/make-broken-safetensors.ts
import { mkdir, readdir, rm, writeFile } from 'node:fs/promises'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'

const CORPUS = join(dirname(fileURLToPath(import.meta.url)), '..', 'suites', 'formats', 'corpus')

interface Case {
  file: string
  why: string
  expect: string
  bytes: Uint8Array
}

const utf8 = (s: string): Uint8Array => new TextEncoder().encode(s)

function concat (...parts: Uint8Array[]): Uint8Array {
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0))
  let at = 0
  for (const p of parts) { out.set(p, at); at += p.length }
  return out
}

function u64 (n: bigint): Uint8Array {
  const b = new Uint8Array(8)
  new DataView(b.buffer).setBigUint64(0, n, true)
  return b
}

/** A file: 8-byte length (the header's own unless overridden), header bytes, then data bytes 0,1,2,... */
function file (header: string | Uint8Array, dataBytes: number, lengthOverride?: bigint): Uint8Array {
  const h = typeof header === 'string' ? utf8(header) : header
  const data = Uint8Array.from({ length: dataBytes }, (_, i) => i & 0xff)
  return concat(u64(lengthOverride ?? BigInt(h.length)), h, data)
}

/** A one-tensor header around the given entry JSON. */
const one = (entry: string): string => `{"t":${entry}}`

const cases: Case[] = [
  { file: 'empty.safetensors', why: 'zero-byte file', expect: 'shorter than the 8-byte header length', bytes: new Uint8Array(0) },
  { file: 'too-short.safetensors', why: 'five bytes: no room for the header length', expect: 'shorter than the 8-byte header length', bytes: Uint8Array.of(2, 0, 0, 0, 0) },
  { file: 'header-past-end.safetensors', why: 'header length 1000 in a 20-byte file', expect: 'header length 1000 runs past the end of the file (20 bytes)', bytes: file('{}', 10, 1000n) },
  { file: 'header-absurd.safetensors', why: 'header length just over the 100,000,000 limit', expect: 'header length 100000001 is absurd', bytes: file('{}', 0, 100_000_001n) },
  { file: 'header-u64-max.safetensors', why: 'header length 2^64-1', expect: 'header length 18446744073709551615 is absurd', bytes: file('{}', 0, 0xffffffffffffffffn) },
  { file: 'header-not-utf8.safetensors', why: 'a 0xFF byte inside a key', expect: 'header is not valid UTF-8', bytes: file(concat(utf8('{"a'), Uint8Array.of(0xff), utf8('":1}')), 0) },
  { file: 'header-not-json.safetensors', why: 'header cut off mid-object', expect: 'header is not valid JSON', bytes: file('{"t":{"dtype":"F32"', 0) },
  { file: 'header-nul-padding.safetensors', why: 'padded with NUL instead of spaces', expect: 'header is not valid JSON: unexpected text after the JSON value', bytes: file('{}\0\0\0\0\0\0', 0) },
  { file: 'header-leading-space.safetensors', why: 'a space before the opening brace', expect: "header must begin with '{' (0x7B) as a JSON object does, found byte 0x20", bytes: file(' {}     ', 0) },
  { file: 'header-bom.safetensors', why: 'a UTF-8 byte-order mark before the brace', expect: "header must begin with '{' (0x7B) as a JSON object does, found byte 0xef", bytes: file('\uFEFF{}   ', 0) },
  { file: 'header-empty.safetensors', why: 'header length 0', expect: 'header is empty (length 0)', bytes: file('', 0) },
  { file: 'header-array.safetensors', why: 'header is a JSON array, not an object', expect: "header must begin with '{' (0x7B) as a JSON object does, found byte 0x5b", bytes: file('[1,2]', 0) },
  { file: 'header-too-deep.safetensors', why: 'arrays nested 100 deep', expect: 'nested deeper than 64 levels', bytes: file(`{"t":${'['.repeat(100)}${']'.repeat(100)}}`, 0) },
  { file: 'entry-not-object.safetensors', why: 'tensor entry is a number', expect: 'tensor "t": entry must be an object, got the number 5', bytes: file(one('5'), 0) },
  { file: 'missing-dtype.safetensors', why: 'no dtype', expect: 'tensor "t": missing "dtype"', bytes: file(one('{"shape":[1],"data_offsets":[0,4]}'), 4) },
  { file: 'missing-shape.safetensors', why: 'no shape', expect: 'tensor "t": missing "shape"', bytes: file(one('{"dtype":"F32","data_offsets":[0,4]}'), 4) },
  { file: 'missing-offsets.safetensors', why: 'no data_offsets', expect: 'tensor "t": missing "data_offsets"', bytes: file(one('{"dtype":"F32","shape":[1]}'), 4) },
  { file: 'dtype-not-string.safetensors', why: 'dtype is a number', expect: 'tensor "t": "dtype" must be a string, got the number 32', bytes: file(one('{"dtype":32,"shape":[1],"data_offsets":[0,4]}'), 4) },
  { file: 'shape-not-array.safetensors', why: 'shape is a number', expect: 'tensor "t": "shape" must be an array, got the number 4', bytes: file(one('{"dtype":"F32","shape":4,"data_offsets":[0,16]}'), 16) },
  { file: 'shape-holds-string.safetensors', why: 'a dim is a string', expect: 'tensor "t": shape[0] must be a number, got the string "4"', bytes: file(one('{"dtype":"F32","shape":["4"],"data_offsets":[0,16]}'), 16) },
  { file: 'offsets-one-number.safetensors', why: 'data_offsets has one element', expect: 'tensor "t": "data_offsets" must hold exactly 2 numbers, got 1', bytes: file(one('{"dtype":"F32","shape":[1],"data_offsets":[4]}'), 4) },
  { file: 'unknown-field.safetensors', why: 'an extra field in a tensor entry', expect: 'tensor "t": unexpected field "offset"', bytes: file(one('{"dtype":"F32","shape":[1],"data_offsets":[0,4],"offset":0}'), 4) },
  { file: 'unknown-dtype.safetensors', why: 'dtype F128', expect: 'tensor "t": unknown dtype "F128"', bytes: file(one('{"dtype":"F128","shape":[1],"data_offsets":[0,16]}'), 16) },
  { file: 'lowercase-dtype.safetensors', why: 'dtype names are case-sensitive', expect: 'tensor "t": unknown dtype "f32"', bytes: file(one('{"dtype":"f32","shape":[1],"data_offsets":[0,4]}'), 4) },
  { file: 'negative-dim.safetensors', why: 'a dim of -1', expect: 'tensor "t": shape[0] is negative (-1)', bytes: file(one('{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}'), 4) },
  { file: 'fractional-dim.safetensors', why: 'a dim of 2.5', expect: 'tensor "t": shape[1] is fractional (2.5)', bytes: file(one('{"dtype":"U8","shape":[2,2.5],"data_offsets":[0,5]}'), 5) },
  { file: 'float-written-dim.safetensors', why: 'a dim written as 2.0 (JSON.parse would see 2)', expect: 'tensor "t": shape[0] must be a plain integer, got 2.0', bytes: file(one('{"dtype":"U8","shape":[2.0],"data_offsets":[0,2]}'), 2) },
  { file: 'exponent-dim.safetensors', why: 'a dim written as 2e0', expect: 'tensor "t": shape[0] must be a plain integer, got 2e0', bytes: file(one('{"dtype":"U8","shape":[2e0],"data_offsets":[0,2]}'), 2) },
  { file: 'unsafe-dim.safetensors', why: 'a dim of 2^53+1 (JSON.parse would round it to 2^53)', expect: 'tensor "t": shape[0] is too large (9007199254740993', bytes: file(one('{"dtype":"U8","shape":[9007199254740993,0],"data_offsets":[0,0]}'), 0) },
  { file: 'overflow-dim.safetensors', why: "upstream's overflow case: [2, 2^64-2]", expect: 'tensor "t": shape[1] is too large (18446744073709551614', bytes: file(one('{"dtype":"I32","shape":[2,18446744073709551614],"data_offsets":[0,16]}'), 16) },
  { file: 'negative-offset.safetensors', why: 'begin of -4', expect: 'tensor "t": data_offsets[0] is negative (-4)', bytes: file(one('{"dtype":"F32","shape":[1],"data_offsets":[-4,0]}'), 4) },
  { file: 'fractional-offset.safetensors', why: 'end of 4.5', expect: 'tensor "t": data_offsets[1] is fractional (4.5)', bytes: file(one('{"dtype":"F32","shape":[1],"data_offsets":[0,4.5]}'), 4) },
  { file: 'unsafe-offset.safetensors', why: 'end past 2^53', expect: 'tensor "t": data_offsets[1] is too large (9007199254740997', bytes: file(one('{"dtype":"F32","shape":[1],"data_offsets":[0,9007199254740997]}'), 4) },
  { file: 'offsets-reversed.safetensors', why: 'end before begin', expect: 'tensor "t": data_offsets [8,4] end before they begin', bytes: file(one('{"dtype":"F32","shape":[1],"data_offsets":[8,4]}'), 8) },
  { file: 'byte-count-mismatch.safetensors', why: "upstream's invalid-info case: I32 [2,2] in 4 bytes", expect: 'tensor "t": data_offsets [0,4] span 4 bytes but I32 [2,2] needs 16', bytes: file(one('{"dtype":"I32","shape":[2,2],"data_offsets":[0,4]}'), 4) },
  { file: 'sub-byte-misaligned.safetensors', why: 'three F4 values are 12 bits', expect: 'tensor "t": F4 shape [3] holds 12 bits, not a whole number of bytes', bytes: file(one('{"dtype":"F4","shape":[3],"data_offsets":[0,2]}'), 2) },
  { file: 'overlap.safetensors', why: 'b starts inside a', expect: 'tensor "b" at [4,12] overlaps tensor "a" ending at 8', bytes: file('{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}}', 12) },
  { file: 'same-span-twice.safetensors', why: 'two tensors on the same bytes (a polyglot)', expect: 'tensor "b" at [0,4] overlaps tensor "a" ending at 4', bytes: file('{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"b":{"dtype":"I32","shape":[1],"data_offsets":[0,4]}}', 4) },
  { file: 'hole.safetensors', why: 'four unclaimed bytes between a and b', expect: 'data bytes [4,8) belong to no tensor (a hole before tensor "b")', bytes: file('{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"b":{"dtype":"F32","shape":[1],"data_offsets":[8,12]}}', 12) },
  { file: 'not-from-zero.safetensors', why: 'the first tensor starts at 4', expect: 'data bytes [0,4) belong to no tensor (a hole before tensor "t")', bytes: file(one('{"dtype":"F32","shape":[1],"data_offsets":[4,8]}'), 8) },
  { file: 'truncated-data.safetensors', why: 'tensors need 16 bytes, 10 present', expect: 'data section is 10 bytes but the tensors need 16 (truncated file)', bytes: file(one('{"dtype":"F32","shape":[4],"data_offsets":[0,16]}'), 10) },
  { file: 'trailing-bytes.safetensors', why: '3 bytes after the last tensor', expect: '3 trailing bytes after the last tensor', bytes: file(one('{"dtype":"F32","shape":[1],"data_offsets":[0,4]}'), 7) },
  { file: 'duplicate-tensor.safetensors', why: 'the same tensor name twice (JSON.parse keeps the last)', expect: 'duplicate key "t" in the top-level object', bytes: file('{"t":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"t":{"dtype":"I32","shape":[1],"data_offsets":[0,4]}}', 4) },
  { file: 'duplicate-escaped-name.safetensors', why: 'the same name, once escaped as \\u0074', expect: 'duplicate key "t" in the top-level object', bytes: file('{"t":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"\\u0074":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}', 8) },
  { file: 'duplicate-field.safetensors', why: 'dtype given twice in one entry', expect: 'duplicate key "dtype" in "t"', bytes: file(one('{"dtype":"F32","dtype":"I32","shape":[1],"data_offsets":[0,4]}'), 4) },
  { file: 'duplicate-metadata-key.safetensors', why: 'a metadata key twice', expect: 'duplicate key "k" in "__metadata__"', bytes: file('{"__metadata__":{"k":"a","k":"b"}}', 0) },
  { file: 'lone-surrogate-name.safetensors', why: 'a name escaping half a surrogate pair', expect: 'string holds a lone surrogate', bytes: file('{"\\ud800":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}', 4) },
  { file: 'metadata-string.safetensors', why: '__metadata__ is a string', expect: '"__metadata__" must be an object of strings, got the string "pt"', bytes: file('{"__metadata__":"pt"}', 0) },
  { file: 'metadata-null.safetensors', why: '__metadata__ is null', expect: '"__metadata__" must be an object of strings, got null', bytes: file('{"__metadata__":null}', 0) },
  { file: 'metadata-number-value.safetensors', why: 'a metadata value is a number', expect: '"__metadata__" entry "step" must be a string, got the number 1', bytes: file('{"__metadata__":{"step":1}}', 0) },
  { file: 'metadata-nested.safetensors', why: 'a metadata value is an object', expect: '"__metadata__" entry "cfg" must be a string, got an object', bytes: file('{"__metadata__":{"cfg":{"a":"b"}}}', 0) },
]

await mkdir(CORPUS, { recursive: true })
for (const f of await readdir(CORPUS)) {
  if (f.endsWith('.safetensors')) await rm(join(CORPUS, f))
}
const expected: Record<string, { expect: string, why: string }> = {}
for (const c of cases) {
  await writeFile(join(CORPUS, c.file), c.bytes)
  expected[c.file] = { expect: c.expect, why: c.why }
}
await writeFile(join(CORPUS, 'expected.json'), JSON.stringify(expected, null, 2) + '\n')
console.log(`wrote ${cases.length} broken files and expected.json to ${CORPUS}`)
