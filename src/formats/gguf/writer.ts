// Serialising a GGUF file: header, typed metadata, tensor infos, then the tensor data, each tensor
// starting at a multiple of the alignment (offsets counted from the start of the data section).
import { open, rename, rm } from 'node:fs/promises'
import { GgufError } from './errors.ts'
import { GGML_TYPE, GGML_TYPE_BYTES, GGUF_DEFAULT_ALIGNMENT, GGUF_MAGIC, GGUF_VALUE_TYPE, GGUF_VERSION, type GgufScalarType, type GgufTensor, type GgufValue } from './types.ts'

/** ggml keeps tensor names in a 64-byte buffer with its NUL: at most 63 bytes of UTF-8. */
export const GGML_MAX_NAME_BYTES = 63
/** ggml tensors have at most four dimensions. */
export const GGML_MAX_DIMS = 4

const encoder = new TextEncoder()

const INT_RANGE: Partial<Record<GgufScalarType, [number, number]>> = {
  UINT8: [0, 0xff], INT8: [-0x80, 0x7f], UINT16: [0, 0xffff], INT16: [-0x8000, 0x7fff],
  UINT32: [0, 0xffffffff], INT32: [-0x80000000, 0x7fffffff],
}

/** A growing little-endian byte buffer. */
class Bytes {
  private buf = new Uint8Array(1 << 16)
  private view = new DataView(this.buf.buffer)
  length = 0

  private room (n: number): void {
    if (this.length + n <= this.buf.length) return
    let size = this.buf.length
    while (size < this.length + n) size *= 2
    const next = new Uint8Array(size)
    next.set(this.buf.subarray(0, this.length))
    this.buf = next
    this.view = new DataView(next.buffer)
  }

  u8 (x: number): void { this.room(1); this.view.setUint8(this.length, x); this.length += 1 }
  i8 (x: number): void { this.room(1); this.view.setInt8(this.length, x); this.length += 1 }
  u16 (x: number): void { this.room(2); this.view.setUint16(this.length, x, true); this.length += 2 }
  i16 (x: number): void { this.room(2); this.view.setInt16(this.length, x, true); this.length += 2 }
  u32 (x: number): void { this.room(4); this.view.setUint32(this.length, x, true); this.length += 4 }
  i32 (x: number): void { this.room(4); this.view.setInt32(this.length, x, true); this.length += 4 }
  f32 (x: number): void { this.room(4); this.view.setFloat32(this.length, x, true); this.length += 4 }
  f64 (x: number): void { this.room(8); this.view.setFloat64(this.length, x, true); this.length += 8 }
  u64 (x: bigint): void { this.room(8); this.view.setBigUint64(this.length, x, true); this.length += 8 }
  i64 (x: bigint): void { this.room(8); this.view.setBigInt64(this.length, x, true); this.length += 8 }
  bytes (b: Uint8Array): void { this.room(b.length); this.buf.set(b, this.length); this.length += b.length }
  string (s: string): void { const b = encoder.encode(s); this.u64(BigInt(b.length)); this.bytes(b) }
  padTo (alignment: number): void { while (this.length % alignment !== 0) this.u8(0) }
  done (): Uint8Array { return this.buf.slice(0, this.length) }
}

function writeScalar (out: Bytes, type: GgufScalarType, value: unknown, what: string): void {
  const range = INT_RANGE[type]
  if (range !== undefined) {
    if (typeof value !== 'number' || !Number.isInteger(value) || value < range[0] || value > range[1]) {
      throw new GgufError(`metadata ${what}: ${String(value)} is not a ${type}`)
    }
  }
  switch (type) {
    case 'UINT8': return out.u8(value as number)
    case 'INT8': return out.i8(value as number)
    case 'UINT16': return out.u16(value as number)
    case 'INT16': return out.i16(value as number)
    case 'UINT32': return out.u32(value as number)
    case 'INT32': return out.i32(value as number)
    case 'FLOAT32':
    case 'FLOAT64':
      if (typeof value !== 'number') throw new GgufError(`metadata ${what}: ${String(value)} is not a number`)
      return type === 'FLOAT32' ? out.f32(value) : out.f64(value)
    case 'UINT64':
    case 'INT64': {
      const ok = typeof value === 'bigint' && (type === 'UINT64' ? value >= 0n && value < 1n << 64n : value >= -(1n << 63n) && value < 1n << 63n)
      if (!ok) throw new GgufError(`metadata ${what}: ${String(value)} is not a ${type} (give a bigint)`)
      return type === 'UINT64' ? out.u64(value as bigint) : out.i64(value as bigint)
    }
    case 'BOOL':
      if (typeof value !== 'boolean') throw new GgufError(`metadata ${what}: ${String(value)} is not a boolean`)
      return out.u8(value ? 1 : 0)
    case 'STRING':
      if (typeof value !== 'string') throw new GgufError(`metadata ${what}: ${String(value)} is not a string`)
      return out.string(value)
  }
}

function writeValue (out: Bytes, key: string, v: GgufValue): void {
  if (v.type === 'ARRAY') {
    out.u32(GGUF_VALUE_TYPE.ARRAY)
    out.u32(GGUF_VALUE_TYPE[v.itemType])
    out.u64(BigInt(v.value.length))
    v.value.forEach((x, i) => writeScalar(out, v.itemType, x, `${key}[${i}]`))
    return
  }
  out.u32(GGUF_VALUE_TYPE[v.type])
  writeScalar(out, v.type, v.value, key)
}

/** A tensor to write: its data now, or a function that makes it when the writer reaches it. */
export interface GgufTensorSource {
  name: string
  type: GgufTensor['type']
  dims: number[]
  data: Uint8Array | (() => Uint8Array)
}

function tensorBytes (t: { name: string, type: GgufTensor['type'], dims: number[] }, seen: Set<string>): number {
  const nameBytes = encoder.encode(t.name).length
  if (nameBytes === 0 || nameBytes > GGML_MAX_NAME_BYTES) throw new GgufError(`tensor ${JSON.stringify(t.name)}: a name is 1 to ${GGML_MAX_NAME_BYTES} bytes of UTF-8, this one is ${nameBytes}`)
  if (seen.has(t.name)) throw new GgufError(`tensor ${t.name}: given twice`)
  seen.add(t.name)
  if (!Object.hasOwn(GGML_TYPE, t.type)) throw new GgufError(`tensor ${t.name}: unknown ggml type ${String(t.type)}`)
  if (t.dims.length < 1 || t.dims.length > GGML_MAX_DIMS || t.dims.some((d) => !Number.isSafeInteger(d) || d < 1)) {
    throw new GgufError(`tensor ${t.name}: dims [${t.dims.join(', ')}] must be 1 to ${GGML_MAX_DIMS} positive integers`)
  }
  return t.dims.reduce((a, b) => a * b, 1) * GGML_TYPE_BYTES[t.type]
}

function checkData (t: { name: string, type: GgufTensor['type'], dims: number[] }, data: Uint8Array, bytes: number): void {
  if (data.length !== bytes) throw new GgufError(`tensor ${t.name}: ${t.type} [${t.dims.join(', ')}] needs ${bytes} bytes of data, got ${data.length}`)
}

/**
 * The header of a GGUF v3 file (magic, counts, metadata, tensor infos, padding to the alignment) and
 * each tensor's size, after checking every key, value and tensor entry (not the data itself).
 */
function headerBytes (o: { metadata: Iterable<[string, GgufValue]>, tensors: ReadonlyArray<{ name: string, type: GgufTensor['type'], dims: number[] }>, alignment?: number }): { header: Uint8Array, sizes: number[], alignment: number } {
  const metadata = [...o.metadata]
  const alignment = o.alignment ?? GGUF_DEFAULT_ALIGNMENT
  if (!Number.isSafeInteger(alignment) || alignment < 1 || (alignment & (alignment - 1)) !== 0) throw new GgufError(`alignment ${alignment} is not a power of two`)
  const keys = new Set<string>()
  for (const [key, v] of metadata) {
    if (key.length === 0) throw new GgufError('metadata: a key may not be empty')
    if (keys.has(key)) throw new GgufError(`metadata ${key}: given twice`)
    keys.add(key)
    if (key === 'general.alignment' && !(v.type === 'UINT32' && v.value === alignment)) {
      throw new GgufError(`metadata general.alignment: must be the UINT32 ${alignment} the data is aligned to`)
    }
  }
  const seen = new Set<string>()
  const sizes = o.tensors.map((t) => tensorBytes(t, seen))

  const out = new Bytes()
  out.u32(GGUF_MAGIC)
  out.u32(GGUF_VERSION)
  out.u64(BigInt(o.tensors.length))
  out.u64(BigInt(metadata.length))
  for (const [key, v] of metadata) {
    out.string(key)
    writeValue(out, key, v)
  }
  let offset = 0
  o.tensors.forEach((t, i) => {
    out.string(t.name)
    out.u32(t.dims.length)
    for (const d of t.dims) out.u64(BigInt(d))
    out.u32(GGML_TYPE[t.type])
    out.u64(BigInt(offset))
    offset += sizes[i]
    offset += (alignment - (offset % alignment)) % alignment
  })
  out.padTo(alignment)
  return { header: out.done(), sizes, alignment }
}

/**
 * The bytes of a GGUF v3 file holding `metadata` (in the order given) and `tensors` (in the order
 * given, each at the next multiple of `alignment`). A `general.alignment` key, if given, must be a
 * UINT32 equal to `alignment`. Every value and tensor is checked; a problem is a GgufError naming it.
 */
export function serializeGguf (o: { metadata: Iterable<[string, GgufValue]>, tensors: readonly GgufTensor[], alignment?: number }): Uint8Array {
  const { header, sizes, alignment } = headerBytes(o)
  o.tensors.forEach((t, i) => checkData(t, t.data, sizes[i]))
  const out = new Bytes()
  out.bytes(header)
  for (const t of o.tensors) {
    out.bytes(t.data)
    out.padTo(alignment)
  }
  return out.done()
}

/**
 * Write the same file as serializeGguf to `path`, one tensor at a time: a tensor's data may be a
 * function, called when the writer reaches it, so only one converted tensor need be in memory. The
 * file appears whole or not at all (written under a temporary name, then renamed). Returns its size.
 */
export async function writeGgufFile (path: string, o: { metadata: Iterable<[string, GgufValue]>, tensors: readonly GgufTensorSource[], alignment?: number }): Promise<number> {
  const { header, sizes, alignment } = headerBytes(o)
  const temporary = `${path}.partial-${process.pid}`
  const handle = await open(temporary, 'w')
  let written = 0
  try {
    const write = async (b: Uint8Array) => {
      let at = 0
      while (at < b.length) {
        const { bytesWritten } = await handle.write(b, at, b.length - at)
        at += bytesWritten
      }
      written += b.length
    }
    await write(header)
    for (const [i, t] of o.tensors.entries()) {
      const data = typeof t.data === 'function' ? t.data() : t.data
      checkData(t, data, sizes[i])
      await write(data)
      const pad = (alignment - (data.length % alignment)) % alignment
      if (pad > 0) await write(new Uint8Array(pad))
    }
    await handle.close()
    await rename(temporary, path)
    return written
  }
  catch (err) {
    await handle.close().catch(() => {})
    await rm(temporary, { force: true })
    throw err
  }
}
