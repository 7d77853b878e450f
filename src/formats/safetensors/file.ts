// Random access to one safetensors file: the header is read and checked once, each tensor's bytes
// are read at their offset on demand, or all at once (readAll) for small files such as cache blocks.
import { open, type FileHandle } from 'node:fs/promises'
import { constants as bufferConstants } from 'node:buffer'
import { SafetensorsError } from '../../errors.ts'
import { MAX_HEADER_BYTES, parseHeader, type TensorInfo } from './header.ts'
import { readAt } from './positional-io.ts'
import type { Tensor } from './tensor.ts'

/** An open safetensors file. Open with `SafetensorsFile.open`; `close()` when done. */
export class SafetensorsFile {
  private closed = false

  private constructor (
    private readonly fh: FileHandle,
    /** The path it was opened with (every error names it). */
    readonly path: string,
    /** `__metadata__` (string->string), `{}` when the file has none. */
    readonly metadata: Record<string, string>,
    /** Every tensor, in the order its bytes lie in the file. */
    readonly tensors: ReadonlyMap<string, TensorInfo>,
    /** Absolute file position of the data section: 8 + header length. */
    readonly dataStart: number,
  ) {}

  /**
   * Open `path`, read the 8-byte length and the header (only those bytes), and validate everything
   * the header says against the file size. Any breach is a SafetensorsError naming the file.
   */
  static async open (path: string): Promise<SafetensorsFile> {
    let fh: FileHandle
    try {
      fh = await open(path, 'r')
    } catch (e) {
      throw new SafetensorsError(path, `cannot open: ${(e as Error).message}`)
    }
    try {
      return await SafetensorsFile.readHeader(fh, path)
    } catch (e) {
      await fh.close()
      throw e
    }
  }

  private static async readHeader (fh: FileHandle, path: string): Promise<SafetensorsFile> {
    const { size } = await fh.stat()
    if (size < 8) throw new SafetensorsError(path, `file is ${size} bytes, shorter than the 8-byte header length`)
    const lengthBytes = new Uint8Array(8)
    if (await readAt(fh, lengthBytes, 0) !== 8) throw new SafetensorsError(path, 'file ended while reading the header length')
    const headerLength = new DataView(lengthBytes.buffer).getBigUint64(0, true)
    if (headerLength > BigInt(MAX_HEADER_BYTES)) {
      throw new SafetensorsError(path, `header length ${headerLength} is absurd (limit ${MAX_HEADER_BYTES})`)
    }
    const n = Number(headerLength)
    if (8 + n > size) throw new SafetensorsError(path, `header length ${n} runs past the end of the file (${size} bytes)`)
    const headerBytes = new Uint8Array(n)
    if (await readAt(fh, headerBytes, 8) !== n) throw new SafetensorsError(path, 'file ended while reading the header')
    const header = parseHeader(headerBytes, path)
    const dataStart = 8 + n
    const dataLength = size - dataStart
    if (dataLength < header.dataLength) {
      throw new SafetensorsError(path, `data section is ${dataLength} bytes but the tensors need ${header.dataLength} (truncated file)`)
    }
    if (dataLength > header.dataLength) {
      throw new SafetensorsError(path, `${dataLength - header.dataLength} trailing bytes after the last tensor (data section is ${dataLength} bytes, tensors need ${header.dataLength})`)
    }
    const tensors = new Map(header.tensors.map(t => [t.name, t]))
    return new SafetensorsFile(fh, path, header.metadata, tensors, dataStart)
  }

  /** The placement of tensor `name`; an unknown name is a SafetensorsError. */
  info (name: string): TensorInfo {
    const info = this.tensors.get(name)
    if (info === undefined) throw new SafetensorsError(this.path, `no tensor named ${JSON.stringify(name)}`)
    return info
  }

  /** Read one tensor: exactly its bytes, at its offset. */
  async read (name: string): Promise<Tensor> {
    const info = this.info(name)
    const data = await this.readRange(name, 0, info.end - info.begin)
    return { dtype: info.dtype, shape: [...info.shape], data }
  }

  /**
   * Read bytes [from, to) of tensor `name`'s data (relative to the tensor's first byte), for
   * tensors too large to hold at once or when only a slice is needed.
   */
  async readRange (name: string, from: number, to: number): Promise<Uint8Array> {
    if (this.closed) throw new SafetensorsError(this.path, `cannot read tensor ${JSON.stringify(name)}: file is closed`)
    const info = this.info(name)
    const size = info.end - info.begin
    if (!Number.isSafeInteger(from) || !Number.isSafeInteger(to) || from < 0 || to < from || to > size) {
      throw new SafetensorsError(this.path, `tensor ${JSON.stringify(name)}: byte range [${from},${to}) is outside its ${size} bytes`)
    }
    if (to - from > bufferConstants.MAX_LENGTH) {
      throw new SafetensorsError(this.path, `tensor ${JSON.stringify(name)}: ${to - from} bytes exceed the largest buffer Node can allocate; read it in ranges`)
    }
    const data = new Uint8Array(to - from)
    const got = await readAt(this.fh, data, this.dataStart + info.begin + from)
    if (got !== data.length) {
      throw new SafetensorsError(this.path, `tensor ${JSON.stringify(name)}: file ended after ${got} of ${data.length} bytes (changed since it was opened?)`)
    }
    return data
  }

  /**
   * Read every tensor with one read of the whole data section (a block file's dozens of tensors
   * read one by one cost a file-system round trip each). Each tensor gets its own copy of its
   * bytes, as `read` gives. For files that fit one buffer; a larger one is a SafetensorsError.
   */
  async readAll (): Promise<Map<string, Tensor>> {
    if (this.closed) throw new SafetensorsError(this.path, 'cannot read the tensors: file is closed')
    let length = 0
    for (const info of this.tensors.values()) length = Math.max(length, info.end)
    if (length > bufferConstants.MAX_LENGTH) {
      throw new SafetensorsError(this.path, `the data section's ${length} bytes exceed the largest buffer Node can allocate; read the tensors one by one`)
    }
    const section = new Uint8Array(length)
    const got = await readAt(this.fh, section, this.dataStart)
    if (got !== length) throw new SafetensorsError(this.path, `file ended after ${got} of the data section's ${length} bytes (changed since it was opened?)`)
    const out = new Map<string, Tensor>()
    for (const [name, info] of this.tensors) out.set(name, { dtype: info.dtype, shape: [...info.shape], data: section.slice(info.begin, info.end) })
    return out
  }

  /** Close the file; later reads fail. Closing twice is harmless. */
  async close (): Promise<void> {
    if (this.closed) return
    this.closed = true
    await this.fh.close()
  }
}

/** Read a whole safetensors file (every tensor) into memory. */
export async function readSafetensors (path: string): Promise<{ metadata: Record<string, string>, tensors: Map<string, Tensor> }> {
  const file = await SafetensorsFile.open(path)
  try {
    const tensors = new Map<string, Tensor>()
    for (const name of file.tensors.keys()) tensors.set(name, await file.read(name))
    return { metadata: file.metadata, tensors }
  } finally {
    await file.close()
  }
}
