// Little-endian cursors over a state file: the writer grows a buffer, the reader names the
// section it was in when the bytes ran out.
import { LlamaCppStateError } from './errors.ts'

export class ByteWriter {
  private buf = new Uint8Array(1 << 16)
  private view = new DataView(this.buf.buffer)
  private at = 0

  private room (n: number): void {
    if (this.at + n <= this.buf.length) return
    let size = this.buf.length * 2
    while (size < this.at + n) size *= 2
    const grown = new Uint8Array(size)
    grown.set(this.buf.subarray(0, this.at))
    this.buf = grown
    this.view = new DataView(grown.buffer)
  }

  u32 (v: number): void {
    this.room(4)
    this.view.setUint32(this.at, v, true)
    this.at += 4
  }

  i32 (v: number): void {
    this.room(4)
    this.view.setInt32(this.at, v, true)
    this.at += 4
  }

  u64 (v: number): void {
    this.room(8)
    this.view.setBigUint64(this.at, BigInt(v), true)
    this.at += 8
  }

  bytes (b: Uint8Array): void {
    this.room(b.length)
    this.buf.set(b, this.at)
    this.at += b.length
  }

  /** The bytes written so far (a copy). */
  finish (): Uint8Array {
    return this.buf.slice(0, this.at)
  }
}

export class ByteReader {
  private readonly view: DataView
  offset = 0
  /** The section being read, for errors. */
  section = 'sequence header'

  constructor (private readonly buf: Uint8Array, private readonly file?: string) {
    this.view = new DataView(buf.buffer, buf.byteOffset, buf.byteLength)
  }

  get remaining (): number {
    return this.buf.length - this.offset
  }

  fail (problem: string): never {
    throw new LlamaCppStateError(this.section, problem, this.file)
  }

  private need (n: number): void {
    if (this.offset + n > this.buf.length) this.fail(`the file ends at byte ${this.buf.length}, inside a ${n}-byte field at byte ${this.offset}`)
  }

  u32 (): number {
    this.need(4)
    const v = this.view.getUint32(this.offset, true)
    this.offset += 4
    return v
  }

  i32 (): number {
    this.need(4)
    const v = this.view.getInt32(this.offset, true)
    this.offset += 4
    return v
  }

  u64 (): number {
    this.need(8)
    const v = this.view.getBigUint64(this.offset, true)
    this.offset += 8
    if (v > BigInt(Number.MAX_SAFE_INTEGER)) this.fail(`a 64-bit field holds ${v}, beyond any real size`)
    return Number(v)
  }

  /** n bytes (a view into the file). */
  bytes (n: number): Uint8Array {
    this.need(n)
    const b = this.buf.subarray(this.offset, this.offset + n)
    this.offset += n
    return b
  }
}
