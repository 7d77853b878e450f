// Parsing a GGUF file from its bytes, checking every length and offset against the file before
// trusting it: a truncated or hostile file gets a GgufError naming the byte offset and the field.
import { open } from 'node:fs/promises'
import { GgufError } from './errors.ts'
import { GGML_TYPE, GGML_TYPE_BYTES, GGUF_DEFAULT_ALIGNMENT, GGUF_MAGIC, GGUF_VALUE_TYPE, type GgmlType, type GgufFile, type GgufScalarType, type GgufTensor, type GgufValue } from './types.ts'
import { GGML_MAX_DIMS } from './writer.ts'

const decoder = new TextDecoder('utf-8', { fatal: true })
const VALUE_TYPE_NAMES = new Map<number, keyof typeof GGUF_VALUE_TYPE>(Object.entries(GGUF_VALUE_TYPE).map(([k, v]) => [v, k as keyof typeof GGUF_VALUE_TYPE]))
const GGML_TYPE_NAMES = new Map<number, GgmlType>(Object.entries(GGML_TYPE).map(([k, v]) => [v, k as GgmlType]))

/** Thrown by a Cursor over a prefix of a file when the header runs past the prefix (read more, then parse again). */
class NeedMoreBytes extends Error {
  constructor (readonly upTo: number) {
    super(`need bytes up to ${upTo}`)
  }
}

/**
 * Reads little-endian values from `bytes`, which holds the first `bytes.length` bytes of a file of
 * `fileSize` bytes (the whole file unless a header is read from a prefix). Running past the file is
 * a GgufError; running past only the prefix throws NeedMoreBytes.
 */
class Cursor {
  private readonly view: DataView
  at = 0
  constructor (readonly bytes: Uint8Array, readonly fileSize: number = bytes.length) {
    this.view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength)
  }

  need (n: number, what: string): void {
    if (n < 0 || this.at + n > this.fileSize) throw new GgufError(`byte ${this.at}: ${what} needs ${n} bytes, the file has ${this.fileSize - this.at} left`)
    if (this.at + n > this.bytes.length) throw new NeedMoreBytes(this.at + n)
  }

  u8 (what: string): number { this.need(1, what); return this.view.getUint8(this.at++) }
  i8 (what: string): number { this.need(1, what); return this.view.getInt8(this.at++) }
  u16 (what: string): number { this.need(2, what); const x = this.view.getUint16(this.at, true); this.at += 2; return x }
  i16 (what: string): number { this.need(2, what); const x = this.view.getInt16(this.at, true); this.at += 2; return x }
  u32 (what: string): number { this.need(4, what); const x = this.view.getUint32(this.at, true); this.at += 4; return x }
  i32 (what: string): number { this.need(4, what); const x = this.view.getInt32(this.at, true); this.at += 4; return x }
  f32 (what: string): number { this.need(4, what); const x = this.view.getFloat32(this.at, true); this.at += 4; return x }
  f64 (what: string): number { this.need(8, what); const x = this.view.getFloat64(this.at, true); this.at += 8; return x }
  u64 (what: string): bigint { this.need(8, what); const x = this.view.getBigUint64(this.at, true); this.at += 8; return x }
  i64 (what: string): bigint { this.need(8, what); const x = this.view.getBigInt64(this.at, true); this.at += 8; return x }

  /** A u64 that must fit in the rest of the file as a count of `unit`-byte items (so it is a safe number). */
  count (what: string, unit: number): number {
    const start = this.at
    const n = this.u64(what)
    if (n > BigInt(Math.floor((this.fileSize - this.at) / Math.max(unit, 1)))) {
      throw new GgufError(`byte ${start}: ${what} is ${n}, more than the ${this.fileSize - this.at} bytes left could hold`)
    }
    return Number(n)
  }

  string (what: string): string {
    const start = this.at
    const n = this.count(`${what} length`, 1)
    this.need(n, what)
    const raw = this.bytes.subarray(this.at, this.at + n)
    this.at += n
    try {
      return decoder.decode(raw)
    } catch {
      throw new GgufError(`byte ${start}: ${what} is not valid UTF-8`)
    }
  }
}

function readScalar (c: Cursor, type: GgufScalarType, what: string): number | bigint | boolean | string {
  switch (type) {
    case 'UINT8': return c.u8(what)
    case 'INT8': return c.i8(what)
    case 'UINT16': return c.u16(what)
    case 'INT16': return c.i16(what)
    case 'UINT32': return c.u32(what)
    case 'INT32': return c.i32(what)
    case 'FLOAT32': return c.f32(what)
    case 'FLOAT64': return c.f64(what)
    case 'UINT64': return c.u64(what)
    case 'INT64': return c.i64(what)
    case 'BOOL': {
      const at = c.at
      const b = c.u8(what)
      if (b > 1) throw new GgufError(`byte ${at}: ${what} is a BOOL of value ${b}, not 0 or 1`)
      return b === 1
    }
    case 'STRING': return c.string(what)
  }
}

const MIN_ITEM_BYTES: Record<GgufScalarType, number> = { UINT8: 1, INT8: 1, UINT16: 2, INT16: 2, UINT32: 4, INT32: 4, FLOAT32: 4, BOOL: 1, STRING: 8, UINT64: 8, INT64: 8, FLOAT64: 8 }

function valueType (c: Cursor, what: string): keyof typeof GGUF_VALUE_TYPE {
  const at = c.at
  const n = c.u32(what)
  const name = VALUE_TYPE_NAMES.get(n)
  if (name === undefined) throw new GgufError(`byte ${at}: ${what} is ${n}, not a GGUF value type`)
  return name
}

function readValue (c: Cursor, key: string): GgufValue {
  const type = valueType(c, `metadata ${key} type`)
  if (type !== 'ARRAY') return { type, value: readScalar(c, type, `metadata ${key}`) } as GgufValue
  const itemType = valueType(c, `metadata ${key} item type`)
  if (itemType === 'ARRAY') throw new GgufError(`metadata ${key}: arrays of arrays are not read here`)
  const n = c.count(`metadata ${key} item count`, MIN_ITEM_BYTES[itemType])
  const value: unknown[] = []
  for (let i = 0; i < n; i++) value.push(readScalar(c, itemType, `metadata ${key}[${i}]`))
  return { type: 'ARRAY', itemType, value } as GgufValue
}

/** One tensor's entry in the header: where its data lies in the file (absolute byte offsets). */
export interface GgufTensorInfo {
  name: string
  type: GgmlType
  /** ggml order, fastest-varying first. */
  dims: number[]
  /** Absolute byte offset of the data in the file. */
  start: number
  /** Bytes of data. */
  bytes: number
}

/** A GGUF file's header: everything but the tensor data. */
export interface GgufHeader {
  version: number
  metadata: Map<string, GgufValue>
  tensors: GgufTensorInfo[]
  alignment: number
  /** Absolute byte offset of the data section. */
  dataStart: number
  fileSize: number
}

function parseHeader (c: Cursor): GgufHeader {
  const fileSize = c.fileSize
  const magic = c.u32('magic')
  if (magic !== GGUF_MAGIC) throw new GgufError(`byte 0: not a GGUF file (magic 0x${magic.toString(16).padStart(8, '0')}, expected "GGUF")`)
  const version = c.u32('version')
  if (version !== 2 && version !== 3) throw new GgufError(`byte 4: GGUF version ${version} is not read here (2 and 3 are)`)
  const tensorCount = c.count('tensor count', 8 + 4 + 8 + 4 + 8)
  const kvCount = c.count('metadata count', 8 + 4)
  const metadata = new Map<string, GgufValue>()
  for (let i = 0; i < kvCount; i++) {
    const at = c.at
    const key = c.string(`metadata key ${i}`)
    if (metadata.has(key)) throw new GgufError(`byte ${at}: metadata ${key} is given twice`)
    metadata.set(key, readValue(c, key))
  }
  const alignmentValue = metadata.get('general.alignment')
  let alignment = GGUF_DEFAULT_ALIGNMENT
  if (alignmentValue !== undefined) {
    if (alignmentValue.type !== 'UINT32' || alignmentValue.value < 1 || (alignmentValue.value & (alignmentValue.value - 1)) !== 0) {
      throw new GgufError('metadata general.alignment: must be a UINT32 power of two')
    }
    alignment = alignmentValue.value
  }
  const infos: Array<{ name: string, type: GgmlType, dims: number[], offset: number, bytes: number }> = []
  const names = new Set<string>()
  for (let i = 0; i < tensorCount; i++) {
    const name = c.string(`tensor ${i} name`)
    if (names.has(name)) throw new GgufError(`tensor ${name}: given twice`)
    names.add(name)
    const nDims = c.u32(`tensor ${name} dims count`)
    if (nDims < 1 || nDims > GGML_MAX_DIMS) throw new GgufError(`tensor ${name}: ${nDims} dims, ggml has 1 to ${GGML_MAX_DIMS}`)
    const dims: number[] = []
    for (let d = 0; d < nDims; d++) {
      const n = c.u64(`tensor ${name} dim ${d}`)
      if (n < 1n || n > BigInt(fileSize)) throw new GgufError(`tensor ${name}: dim ${d} is ${n}, which no tensor in a ${fileSize}-byte file can have`)
      dims.push(Number(n))
    }
    const typeAt = c.at
    const typeNumber = c.u32(`tensor ${name} type`)
    const type = GGML_TYPE_NAMES.get(typeNumber)
    if (type === undefined) throw new GgufError(`byte ${typeAt}: tensor ${name} has ggml type ${typeNumber}, which is not read here (only unquantised types)`)
    const offset = c.u64(`tensor ${name} offset`)
    const size = dims.reduce((a, b) => a * b, 1) * GGML_TYPE_BYTES[type]
    if (offset % BigInt(alignment) !== 0n) throw new GgufError(`tensor ${name}: data offset ${offset} is not a multiple of the alignment ${alignment}`)
    if (offset > BigInt(fileSize)) throw new GgufError(`tensor ${name}: data offset ${offset} is past the end of the file`)
    infos.push({ name, type, dims, offset: Number(offset), bytes: size })
  }
  const dataStart = Math.ceil(c.at / alignment) * alignment
  const spans = infos.map((t) => [t.offset, t.offset + t.bytes, t.name] as const).sort((a, b) => a[0] - b[0])
  for (let i = 1; i < spans.length; i++) {
    if (spans[i][0] < spans[i - 1][1]) throw new GgufError(`tensor ${spans[i][2]}: its data overlaps ${spans[i - 1][2]}'s`)
  }
  const tensors = infos.map((t) => {
    const start = dataStart + t.offset
    if (start + t.bytes > fileSize) throw new GgufError(`tensor ${t.name}: ${t.type} [${t.dims.join(', ')}] needs bytes ${start}..${start + t.bytes}, the file has ${fileSize}`)
    return { name: t.name, type: t.type, dims: t.dims, start, bytes: t.bytes }
  })
  return { version, metadata, tensors, alignment, dataStart, fileSize }
}

/** Parse a whole GGUF file (versions 2 and 3, little-endian). Tensor data is copied out of `bytes`. */
export function parseGguf (bytes: Uint8Array): GgufFile {
  const header = parseHeader(new Cursor(bytes))
  // A copy (new Uint8Array of a view): Buffer.prototype.slice would return a view of `bytes`.
  const tensors: GgufTensor[] = header.tensors.map((t) => ({ name: t.name, type: t.type, dims: t.dims, data: new Uint8Array(bytes.subarray(t.start, t.start + t.bytes)) }))
  return { version: header.version, metadata: header.metadata, tensors, alignment: header.alignment }
}

/**
 * Parse the header of a GGUF file of `fileSize` bytes from its first bytes (`prefix`). Every offset
 * and length is checked against `fileSize`. Returns null when the header runs past the prefix
 * (read a longer prefix and try again).
 */
export function parseGgufHeader (prefix: Uint8Array, fileSize: number = prefix.length): GgufHeader | null {
  if (prefix.length > fileSize) throw new GgufError(`a prefix of ${prefix.length} bytes is longer than the ${fileSize}-byte file`)
  try {
    return parseHeader(new Cursor(prefix, fileSize))
  }
  catch (err) {
    if (err instanceof NeedMoreBytes) return null
    throw err
  }
}

/**
 * The header of the GGUF file at `path` (metadata and tensor table, no tensor data), reading only
 * as much of the file as the header needs. A broken file is a GgufError naming the path.
 */
export async function readGgufHeader (path: string): Promise<GgufHeader> {
  const handle = await open(path, 'r')
  try {
    const fileSize = (await handle.stat()).size
    let length = Math.min(fileSize, 1 << 20)
    for (;;) {
      const prefix = new Uint8Array(length)
      const { bytesRead } = await handle.read(prefix, 0, length, 0)
      if (bytesRead !== length) throw new GgufError(`${path}: read ${bytesRead} of the first ${length} bytes`)
      let header: GgufHeader | null
      try {
        header = parseGgufHeader(prefix, fileSize)
      }
      catch (err) {
        if (err instanceof GgufError) throw new GgufError(`${path}: ${err.message}`)
        throw err
      }
      if (header !== null) return header
      length = Math.min(fileSize, length * 4)
    }
  }
  finally {
    await handle.close()
  }
}
