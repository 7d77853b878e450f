// The JSON header: strict validation on read, the reference writer's exact bytes on write.
import { SafetensorsError } from '../../errors.ts'
import { compareCodePoints } from './order.ts'
import { isDtype, tensorByteLength, type Dtype } from './dtype.ts'
import { JsonNumber, StrictJsonError, isJsonObject, jsonTypeName, parseStrictJson, type JsonValue } from './strict-json.ts'

/** Where one tensor lives; `begin`/`end` are byte offsets relative to the data section (end exclusive). */
export interface TensorInfo {
  name: string
  dtype: Dtype
  shape: number[]
  begin: number
  end: number
}

/** The reference reader's limit on the header length (`MAX_HEADER_SIZE`). */
export const MAX_HEADER_BYTES = 100_000_000

/** The reserved top-level key for the string->string metadata map. */
export const METADATA_KEY = '__metadata__'

const TENSOR_FIELDS = new Set(['dtype', 'shape', 'data_offsets'])

/** What a header says: its metadata, its tensors in data order, and how long the data section must be. */
export interface ParsedHeader {
  metadata: Record<string, string>
  tensors: TensorInfo[]
  dataLength: number
}

/** Set a key as an own property, so a key like `__proto__` is kept rather than swallowed. */
export function setOwn<T> (obj: Record<string, T>, key: string, value: T): void {
  Object.defineProperty(obj, key, { value, enumerable: true, writable: true, configurable: true })
}

/** Why a parsed number is not a valid dim or offset, or null when it is. */
function indexProblem (v: JsonValue | undefined): string | null {
  if (!(v instanceof JsonNumber)) return `must be a number, got ${jsonTypeName(v)}`
  if (v.isPlainIndex()) return null
  if (v.value < 0) return `is negative (${v.raw})`
  if (!Number.isFinite(v.value) || (Number.isInteger(v.value) && !Number.isSafeInteger(v.value))) {
    return `is too large (${v.raw} > 2^53 - 1, not exactly representable)`
  }
  if (!Number.isInteger(v.value)) return `is fractional (${v.raw})`
  return `must be a plain integer, got ${v.raw} (written with a sign, fraction or exponent)`
}

function readIndexList (file: string, name: string, field: string, v: JsonValue | undefined, length?: number): number[] {
  const where = `tensor ${JSON.stringify(name)}`
  if (v === undefined) throw new SafetensorsError(file, `${where}: missing "${field}"`)
  if (!Array.isArray(v)) throw new SafetensorsError(file, `${where}: "${field}" must be an array, got ${jsonTypeName(v)}`)
  if (length !== undefined && v.length !== length) {
    throw new SafetensorsError(file, `${where}: "${field}" must hold exactly ${length} numbers, got ${v.length}`)
  }
  return v.map((x, k) => {
    const problem = indexProblem(x)
    if (problem !== null) throw new SafetensorsError(file, `${where}: ${field}[${k}] ${problem}`)
    return (x as JsonNumber).value
  })
}

function readTensorEntry (file: string, name: string, entry: JsonValue): TensorInfo {
  const where = `tensor ${JSON.stringify(name)}`
  if (!isJsonObject(entry)) throw new SafetensorsError(file, `${where}: entry must be an object, got ${jsonTypeName(entry)}`)
  for (const key of entry.keys()) {
    // The reference ignores unknown fields; we refuse them so nothing in a header goes unread.
    if (!TENSOR_FIELDS.has(key)) throw new SafetensorsError(file, `${where}: unexpected field ${JSON.stringify(key)}`)
  }
  const dtype = entry.get('dtype')
  if (dtype === undefined) throw new SafetensorsError(file, `${where}: missing "dtype"`)
  if (typeof dtype !== 'string') throw new SafetensorsError(file, `${where}: "dtype" must be a string, got ${jsonTypeName(dtype)}`)
  if (!isDtype(dtype)) throw new SafetensorsError(file, `${where}: unknown dtype ${JSON.stringify(dtype)}`)
  const shape = readIndexList(file, name, 'shape', entry.get('shape'))
  const [begin, end] = readIndexList(file, name, 'data_offsets', entry.get('data_offsets'), 2)
  if (end < begin) throw new SafetensorsError(file, `${where}: data_offsets [${begin},${end}] end before they begin`)
  const size = tensorByteLength(dtype, shape)
  if ('problem' in size) throw new SafetensorsError(file, `${where}: ${size.problem}`)
  if (end - begin !== size.bytes) {
    throw new SafetensorsError(file, `${where}: data_offsets [${begin},${end}] span ${end - begin} bytes but ${dtype} [${shape.join(',')}] needs ${size.bytes}`)
  }
  return { name, dtype, shape, begin, end }
}

function readMetadata (file: string, v: JsonValue): Record<string, string> {
  if (!isJsonObject(v)) throw new SafetensorsError(file, `"${METADATA_KEY}" must be an object of strings, got ${jsonTypeName(v)}`)
  const out: Record<string, string> = {}
  for (const [key, value] of v) {
    if (typeof value !== 'string') {
      throw new SafetensorsError(file, `"${METADATA_KEY}" entry ${JSON.stringify(key)} must be a string, got ${jsonTypeName(value)}`)
    }
    setOwn(out, key, value)
  }
  return out
}

/**
 * Validate a header and say where every tensor's bytes are. Rules (each failure a SafetensorsError
 * naming `file`): valid UTF-8; first byte '{'; valid JSON without duplicate keys; `__metadata__` a string->string map; every other entry exactly {dtype, shape,
 * data_offsets} with a known dtype and plain non-negative integers below 2^53; byte spans equal to
 * prod(shape) * bits / 8 in whole bytes; spans that tile [0, dataLength) with no hole or overlap.
 */
export function parseHeader (bytes: Uint8Array, file: string): ParsedHeader {
  let text: string
  try {
    text = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true }).decode(bytes)
  } catch {
    throw new SafetensorsError(file, 'header is not valid UTF-8')
  }
  // The format says MUST begin with '{' (so: a JSON object, no leading whitespace or BOM);
  // upstream's reader has lately tolerated leading whitespace, we do not.
  if (bytes.length === 0) throw new SafetensorsError(file, 'header is empty (length 0); it must be a JSON object')
  if (bytes[0] !== 0x7b) {
    throw new SafetensorsError(file, `header must begin with '{' (0x7B) as a JSON object does, found byte 0x${bytes[0].toString(16).padStart(2, '0')}`)
  }
  let root: JsonValue
  try {
    root = parseStrictJson(text)
  } catch (e) {
    if (e instanceof StrictJsonError) throw new SafetensorsError(file, `header is not valid JSON: ${e.message}`)
    throw e
  }
  // Unreachable after the '{' check, kept so the type narrows without a cast.
  if (!isJsonObject(root)) throw new SafetensorsError(file, `header is not a JSON object (it is ${jsonTypeName(root)})`)

  let metadata: Record<string, string> = {}
  const tensors: TensorInfo[] = []
  for (const [key, value] of root) {
    if (key === METADATA_KEY) metadata = readMetadata(file, value)
    else tensors.push(readTensorEntry(file, key, value))
  }

  tensors.sort((a, b) => a.begin - b.begin || a.end - b.end)
  let expected = 0
  let previous: TensorInfo | undefined
  for (const t of tensors) {
    if (t.begin > expected) {
      throw new SafetensorsError(file, `data bytes [${expected},${t.begin}) belong to no tensor (a hole before tensor ${JSON.stringify(t.name)})`)
    }
    if (t.begin < expected) {
      throw new SafetensorsError(file, `tensor ${JSON.stringify(t.name)} at [${t.begin},${t.end}] overlaps tensor ${JSON.stringify(previous?.name)} ending at ${expected}`)
    }
    expected = t.end
    previous = t
  }
  return { metadata, tensors, dataLength: expected }
}

/** Tensor placement as the writer knows it. */
export interface HeaderEntry {
  name: string
  dtype: Dtype
  shape: readonly number[]
  begin: number
  end: number
}

/**
 * The header bytes exactly as the reference writer makes them: serde_json's compact form
 * (`{"__metadata__":{..},"name":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},..}`, no spaces;
 * JSON.stringify escapes strings the way serde_json does for well-formed Unicode), `__metadata__`
 * first and only when it has entries, tensors in the order given, then spaces (0x20) up to a
 * multiple of 8 so the data section starts 8-aligned. Metadata keys go in code-point order: the
 * reference uses a HashMap there, so its order with two or more keys is not reproducible anyway.
 */
export function encodeHeader (entries: readonly HeaderEntry[], metadata: Record<string, string> | undefined): Uint8Array {
  const parts: string[] = []
  const metaKeys = metadata === undefined ? [] : Object.keys(metadata).sort(compareCodePoints)
  if (metaKeys.length > 0) {
    const meta = metaKeys.map(k => `${JSON.stringify(k)}:${JSON.stringify((metadata as Record<string, string>)[k])}`)
    parts.push(`"${METADATA_KEY}":{${meta.join(',')}}`)
  }
  for (const e of entries) {
    parts.push(`${JSON.stringify(e.name)}:{"dtype":"${e.dtype}","shape":[${e.shape.join(',')}],"data_offsets":[${e.begin},${e.end}]}`)
  }
  const json = new TextEncoder().encode(`{${parts.join(',')}}`)
  const padded = new Uint8Array(Math.ceil(json.length / 8) * 8).fill(0x20)
  padded.set(json)
  return padded
}
