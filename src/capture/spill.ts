// A streaming capture's spill (issue #20): a layer's boundary snapshots and pooled rows leave memory
// the moment they are computed, appended to one file per layer, `<capture dir>/.spill/layer-{iii}.f32`.
// When the layer reaches the sealed length its layer file is streamed from there: byte for byte the
// file a staged session encodes from memory (the same tensors, the BF16-when-exact rule tracked as
// the values go out, the reference layout, the same metadata). Memory then holds the windows,
// buffers and carries, and an index entry per spilled tensor; the disk holds the rest.
import { closeSync, mkdirSync, openSync, readSync, rmSync, writeSync } from 'node:fs'
import { createHash } from 'node:crypto'
import { join } from 'node:path'
import { PdBridgeError } from '../errors.ts'
import type { Dtype } from '../formats/safetensors/index.ts'
import { referenceOrder } from '../formats/safetensors/order.ts'
import { headerLengthPrefix, planLayout } from '../formats/safetensors/stream-writer.ts'
import type { DumpTensor } from '../model/engine/cache.ts'
import { exactBf16, isBf16Exact, writeFileAtomicSyncStreamed } from '../wire/layer-file.ts'

/** The directory inside a capture directory that holds its spill files (never listed in the manifest). */
export const SPILL_DIR = '.spill'

/** Float values read back per slab when a layer file is streamed out of the spill. */
const SLAB_VALUES = 1 << 18

/** One stretch of a spilled tensor in the spill file. */
interface Piece { offset: number, bytes: number }

/** A tensor whose values are in the spill file, in pieces, in order. */
interface Spilled {
  dtype: 'F32' | 'I64'
  shape: number[]
  pieces: Piece[]
  /** Every value so far is exactly a bf16 value (F32 only). */
  bf16Exact: boolean
}

/** A tensor of the layer file and where its bytes come from. */
interface Source { name: string, dtype: Dtype, shape: number[], memory?: Uint8Array, spilled?: Spilled }

function bytesOf (a: Float32Array | BigInt64Array | Uint16Array): Uint8Array {
  return new Uint8Array(a.buffer, a.byteOffset, a.byteLength)
}

/** One layer's spill file and the index of what it holds. */
export class LayerSpill {
  private fd: number | null
  private end = 0
  private readonly tensors = new Map<string, Spilled>()

  private constructor (readonly path: string, fd: number) {
    this.fd = fd
  }

  /** Create (or truncate) layer `layer`'s spill file under `<captureDir>/.spill/`. */
  static open (captureDir: string, layer: number): LayerSpill {
    const dir = join(captureDir, SPILL_DIR)
    const path = join(dir, `layer-${String(layer).padStart(3, '0')}.f32`)
    try {
      mkdirSync(dir, { recursive: true })
      return new LayerSpill(path, openSync(path, 'w+'))
    }
    catch (e) {
      throw new PdBridgeError(`${path}: cannot create the capture's spill file: ${(e as NodeJS.ErrnoException).code ?? (e as Error).message}`)
    }
  }

  /** Bytes written to the spill file so far. */
  get bytes (): number {
    return this.end
  }

  /** Spill a whole tensor (a boundary snapshot's): it must not be spilled already. */
  addTensor (name: string, t: DumpTensor): void {
    if (this.tensors.has(name)) throw new PdBridgeError(`${this.path}: tensor ${name} was already spilled`)
    const spilled: Spilled = { dtype: t.dtype, shape: [...t.shape], pieces: [], bf16Exact: t.dtype === 'F32' && isBf16Exact(t.data) }
    this.tensors.set(name, spilled)
    this.append(spilled, bytesOf(t.data))
  }

  /** Append rows [rows.length / width, width] to tensor `name` (created with no rows on first use). */
  appendRows (name: string, rows: Float32Array, width: number): void {
    let spilled = this.tensors.get(name)
    if (spilled === undefined) {
      spilled = { dtype: 'F32', shape: [0, width], pieces: [], bf16Exact: true }
      this.tensors.set(name, spilled)
    }
    if (spilled.shape.length !== 2 || spilled.shape[1] !== width || rows.length % width !== 0) {
      throw new PdBridgeError(`${this.path}: ${rows.length} values do not append whole rows of ${width} to ${name} [${spilled.shape.join(', ')}]`)
    }
    if (rows.length === 0) return
    spilled.shape[0] += rows.length / width
    if (spilled.bf16Exact) spilled.bf16Exact = isBf16Exact(rows)
    this.append(spilled, bytesOf(rows))
  }

  private append (spilled: Spilled, bytes: Uint8Array): void {
    const fd = this.openFd()
    let off = 0
    while (off < bytes.length) off += writeSync(fd, bytes, off, bytes.length - off, this.end + off)
    spilled.pieces.push({ offset: this.end, bytes: bytes.length })
    this.end += bytes.length
  }

  private openFd (): number {
    if (this.fd === null) throw new PdBridgeError(`${this.path}: the spill was already removed`)
    return this.fd
  }

  /**
   * Write the layer file to `path` atomically: `resident` (the tensors still in memory) and every
   * spilled tensor, F32 values as BF16 when `bf16` and every value of the tensor is a bf16 value,
   * in the reference layout with `metadata`. Returns its size and SHA-256.
   */
  writeLayerFile (path: string, resident: Map<string, DumpTensor>, metadata: Record<string, string>, bf16: boolean): { bytes: number, sha256: string } {
    const sources: Source[] = []
    for (const [name, t] of resident) {
      if (this.tensors.has(name)) throw new PdBridgeError(`${this.path}: tensor ${name} is both in memory and spilled`)
      if (t.dtype === 'I64') {
        sources.push({ name, dtype: 'I64', shape: t.shape, memory: bytesOf(t.data) })
        continue
      }
      const codes = bf16 ? exactBf16(t.data) : null
      sources.push(codes === null ? { name, dtype: 'F32', shape: t.shape, memory: bytesOf(t.data) } : { name, dtype: 'BF16', shape: t.shape, memory: bytesOf(codes) })
    }
    for (const [name, s] of this.tensors) {
      sources.push({ name, dtype: s.dtype === 'F32' && bf16 && s.bf16Exact ? 'BF16' : s.dtype, shape: s.shape, spilled: s })
    }
    const ordered = referenceOrder(sources)
    const plan = planLayout(path, ordered.map(({ name, dtype, shape }) => ({ name, dtype, shape })), metadata)
    const hash = createHash('sha256')
    let total = 0
    writeFileAtomicSyncStreamed(path, (write) => {
      const out = (chunk: Uint8Array): void => {
        hash.update(chunk)
        total += chunk.length
        write(chunk)
      }
      out(headerLengthPrefix(plan.header.length))
      out(plan.header)
      for (const s of ordered) {
        if (s.memory !== undefined) out(s.memory)
        else if (s.spilled !== undefined) this.stream(s.spilled, s.dtype === 'BF16', out)
      }
    })
    return { bytes: total, sha256: hash.digest('hex') }
  }

  // A spilled tensor's bytes in slabs, as bf16 codes (the high halves: every value is exact) when asked.
  private stream (s: Spilled, asBf16: boolean, out: (chunk: Uint8Array) => void): void {
    const fd = this.openFd()
    const slab = new Uint8Array(SLAB_VALUES * 4)
    for (const piece of s.pieces) {
      for (let at = 0; at < piece.bytes; at += slab.length) {
        const n = Math.min(slab.length, piece.bytes - at)
        let got = 0
        while (got < n) {
          const r = readSync(fd, slab, got, n - got, piece.offset + at + got)
          if (r === 0) throw new PdBridgeError(`${this.path}: the spill file ends at ${piece.offset + at + got}, before the ${piece.offset + piece.bytes} bytes its index names`)
          got += r
        }
        if (!asBf16) {
          out(slab.subarray(0, n))
          continue
        }
        const bits = new Uint32Array(slab.buffer, 0, n / 4)
        const codes = new Uint16Array(bits.length)
        for (let i = 0; i < bits.length; i++) codes[i] = bits[i] >>> 16
        out(bytesOf(codes))
      }
    }
  }

  /** Close and delete the spill file (a no-op the second time). */
  remove (): void {
    if (this.fd !== null) {
      closeSync(this.fd)
      this.fd = null
    }
    rmSync(this.path, { force: true })
  }
}

/** Remove a capture directory's spill directory and everything in it (a no-op when there is none). */
export function removeSpillDir (captureDir: string): void {
  rmSync(join(captureDir, SPILL_DIR), { recursive: true, force: true })
}
