// Streaming write: the header goes first (sizes are known from the layout), then each tensor's bytes
// in layout order, so a file far larger than memory can be written one tensor at a time.
import { SafetensorsError } from '../../errors.ts'
import { AtomicFile } from '../atomic-file.ts'
import { MAX_HEADER_BYTES, encodeHeader, type HeaderEntry } from './header.ts'
import { writeAt } from './positional-io.ts'
import { checkData, checkLayoutEntry, checkMetadata, type LayoutEntry } from './write-checks.ts'

/** Lay out tensors back to back in the given order; returns each one's span and the header bytes. */
export function planLayout (file: string, layout: readonly LayoutEntry[], metadata: Record<string, string> | undefined): { entries: HeaderEntry[], header: Uint8Array, dataLength: number } {
  if (!Array.isArray(layout)) throw new SafetensorsError(file, 'layout must be an array of { name, dtype, shape }')
  checkMetadata(file, metadata)
  const seen = new Set<string>()
  const entries: HeaderEntry[] = []
  let offset = 0
  for (const entry of layout) {
    const bytes = checkLayoutEntry(file, entry)
    if (seen.has(entry.name)) throw new SafetensorsError(file, `tensor ${JSON.stringify(entry.name)} appears twice in the layout`)
    seen.add(entry.name)
    entries.push({ name: entry.name, dtype: entry.dtype, shape: [...entry.shape], begin: offset, end: offset + bytes })
    offset += bytes
    if (!Number.isSafeInteger(offset)) throw new SafetensorsError(file, 'total data size exceeds 2^53 - 1 bytes')
  }
  const header = encodeHeader(entries, metadata)
  if (header.length > MAX_HEADER_BYTES) {
    throw new SafetensorsError(file, `header would be ${header.length} bytes, over the ${MAX_HEADER_BYTES}-byte limit readers accept`)
  }
  return { entries, header, dataLength: offset }
}

/** The 8-byte little-endian header length. */
export function headerLengthPrefix (headerLength: number): Uint8Array {
  const prefix = new Uint8Array(8)
  new DataView(prefix.buffer).setBigUint64(0, BigInt(headerLength), true)
  return prefix
}

/**
 * Writes one safetensors file tensor by tensor. Tensors are laid out in the order of `layout`
 * exactly as given (pass `referenceOrder(layout)` for the reference writer's golden order, as
 * `writeSafetensors` does). The file lives under a temporary name until `close()` renames it.
 */
export class SafetensorsStreamWriter {
  private next = 0
  private position: number
  private state: 'open' | 'closed' | 'failed' = 'open'

  private constructor (
    private readonly file: AtomicFile,
    /** The final path. */
    readonly path: string,
    private readonly entries: HeaderEntry[],
    dataStart: number,
  ) {
    this.position = dataStart
  }

  /** Tensor names in the order `write` must be called. */
  get order (): string[] {
    return this.entries.map(e => e.name)
  }

  /** Check the layout, create the temporary file and write the header. */
  static async create (path: string, layout: { name: string, dtype: LayoutEntry['dtype'], shape: number[] }[], metadata?: Record<string, string>): Promise<SafetensorsStreamWriter> {
    const plan = planLayout(path, layout, metadata)
    let file: AtomicFile
    try {
      file = await AtomicFile.create(path)
    } catch (e) {
      throw new SafetensorsError(path, `cannot create a temporary file next to it: ${(e as Error).message}`)
    }
    try {
      await writeAt(file.handle, headerLengthPrefix(plan.header.length), 0)
      await writeAt(file.handle, plan.header, 8)
    } catch (e) {
      await file.discard()
      throw new SafetensorsError(path, `writing the header failed: ${(e as Error).message}`)
    }
    return new SafetensorsStreamWriter(file, path, plan.entries, 8 + plan.header.length)
  }

  /**
   * Write the next tensor's bytes. It must be the next name in layout order and exactly the
   * layout's byte count; a refused call writes nothing and the writer stays usable.
   */
  async write (name: string, data: Uint8Array): Promise<void> {
    if (this.state !== 'open') throw new SafetensorsError(this.path, `cannot write tensor ${JSON.stringify(name)}: writer is ${this.state}`)
    const expected = this.entries[this.next]
    if (expected === undefined) {
      throw new SafetensorsError(this.path, `cannot write tensor ${JSON.stringify(name)}: all ${this.entries.length} tensors are already written`)
    }
    if (name !== expected.name) {
      const index = this.entries.findIndex(e => e.name === name)
      const why = index < 0 ? 'it is not in the layout' : index < this.next ? 'it was already written' : 'out of order'
      throw new SafetensorsError(this.path, `cannot write tensor ${JSON.stringify(name)}: ${why}; expected ${JSON.stringify(expected.name)} next (layout order)`)
    }
    checkData(this.path, name, data, expected.end - expected.begin)
    try {
      await writeAt(this.file.handle, data, this.position)
    } catch (e) {
      this.state = 'failed'
      await this.file.discard()
      throw new SafetensorsError(this.path, `writing tensor ${JSON.stringify(name)} failed: ${(e as Error).message}`)
    }
    this.position += data.byteLength
    this.next++
  }

  /**
   * Finish: if every tensor was written, fsync and rename into place. If not, the temporary file is
   * deleted, nothing appears under the final name, and the call fails naming the missing tensors.
   */
  async close (): Promise<void> {
    if (this.state !== 'open') throw new SafetensorsError(this.path, `cannot close: writer is ${this.state}`)
    if (this.next < this.entries.length) {
      this.state = 'failed'
      await this.file.discard()
      const missing = this.entries.slice(this.next).map(e => JSON.stringify(e.name))
      const shown = missing.length > 5 ? `${missing.slice(0, 5).join(', ')} and ${missing.length - 5} more` : missing.join(', ')
      throw new SafetensorsError(this.path, `cannot close: ${missing.length} tensor(s) never written (${shown}); no file was created`)
    }
    try {
      await this.file.commit()
      this.state = 'closed'
    } catch (e) {
      this.state = 'failed'
      await this.file.discard()
      throw new SafetensorsError(this.path, `finishing the file failed: ${(e as Error).message}`)
    }
  }

  /** Give up: delete the temporary file. Harmless after close. */
  async abort (): Promise<void> {
    if (this.state !== 'open') return
    this.state = 'failed'
    await this.file.discard()
  }
}
