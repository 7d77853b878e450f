// W packed once for the sequential-fma matmul (docs/kernels.md, "The fourth order", "Packed once"):
// strips of 16 rows, k-major, codes kept (bf16 stays bf16), zero rows past n. The product of a
// packed W has the bits of matmulF32/matmulBf16 in the 'sequential-fma' order on W itself; packing
// only saves the per-call transposes, which dominate decode (m = 1).
import { NumericsError } from '../errors.ts'
import { checkArray, checkLength, checkNoOverlap, checkSize } from './validate.ts'

/** Rows of W per strip (native/src/pack_strips.h, kPackedStrip). */
export const PACKED_STRIP = 16

/** W [n, k] packed in strips: `data` holds ceil(n / 16) * 16 * k codes of W's own format. */
export interface PackedWeight {
  readonly format: 'f32' | 'bf16'
  readonly n: number
  readonly k: number
  readonly data: Float32Array | Uint16Array
}

/** Codes a packed W of n rows and length k holds. */
export function packedLength (n: number, k: number): number {
  return Math.ceil(n / PACKED_STRIP) * PACKED_STRIP * k
}

/** Checked arguments of a packing: W's format and an output of the packed length. */
export function checkPack (kernel: string, w: unknown, n: unknown, k: unknown): { w: Float32Array | Uint16Array, n: number, k: number, format: 'f32' | 'bf16', out: Float32Array | Uint16Array } {
  const format = Object.prototype.toString.call(w) === '[object Uint16Array]' ? 'bf16' : 'f32'
  const ws = checkArray(kernel, 'w', w, format === 'bf16' ? 'Uint16Array' : 'Float32Array')
  const ns = checkSize(kernel, 'n', n)
  const ks = checkSize(kernel, 'k', k)
  checkLength(kernel, 'w', ws, ns, ks, '[n, k]')
  const length = packedLength(ns, ks)
  return { w: ws, n: ns, k: ks, format, out: format === 'bf16' ? new Uint16Array(length) : new Float32Array(length) }
}

/** Reference packing: out[(s * k + i) * 16 + q] = w[(16 s + q) * k + i], zero past row n. */
export function packReference (w: unknown, n: unknown, k: unknown): PackedWeight {
  const a = checkPack('reference.packSequentialFma', w, n, k)
  for (let row = 0; row < a.n; row++) {
    const s = Math.floor(row / PACKED_STRIP)
    const q = row % PACKED_STRIP
    for (let i = 0; i < a.k; i++) a.out[(s * a.k + i) * PACKED_STRIP + q] = a.w[row * a.k + i]
  }
  return { format: a.format, n: a.n, k: a.k, data: a.out }
}

/** W back from its strips (the reference product unpacks and runs the sequential-fma reference). */
export function unpack (p: PackedWeight): Float32Array | Uint16Array {
  const w = p.format === 'bf16' ? new Uint16Array(p.n * p.k) : new Float32Array(p.n * p.k)
  for (let row = 0; row < p.n; row++) {
    const s = Math.floor(row / PACKED_STRIP)
    const q = row % PACKED_STRIP
    for (let i = 0; i < p.k; i++) w[row * p.k + i] = p.data[(s * p.k + i) * PACKED_STRIP + q]
  }
  return w
}

/** A packed weight checked as a matmul's W: its format, sizes and data length agree, and k matches. */
export function checkPacked (kernel: string, packed: unknown, k: number): PackedWeight {
  const p = packed as Partial<PackedWeight> | null
  if (p === null || typeof p !== 'object' || (p.format !== 'f32' && p.format !== 'bf16')) {
    throw new NumericsError(`${kernel}: packed must be a PackedWeight from packSequentialFma`)
  }
  const n = checkSize(kernel, 'packed.n', p.n)
  const pk = checkSize(kernel, 'packed.k', p.k)
  if (pk !== k) throw new NumericsError(`${kernel}: packed.k is ${pk}, but x rows have k = ${k}`)
  const data = checkArray(kernel, 'packed.data', p.data, p.format === 'bf16' ? 'Uint16Array' : 'Float32Array')
  if (data.length !== packedLength(n, pk)) {
    throw new NumericsError(`${kernel}: packed.data has ${data.length} elements, expected ceil(n / 16) * 16 * k = ${packedLength(n, pk)}`)
  }
  return { format: p.format, n, k: pk, data }
}

/** Checked arguments of a product with a packed W. */
export function checkMatmulPacked (kernel: string, x: unknown, m: unknown, k: unknown, packed: unknown, out: unknown, opts: unknown):
{ x: Float32Array, m: number, k: number, p: PackedWeight, out: Float32Array, roundBf16: boolean } {
  const xs = checkArray(kernel, 'x', x, 'Float32Array')
  const ms = checkSize(kernel, 'm', m)
  const ks = checkSize(kernel, 'k', k)
  checkLength(kernel, 'x', xs, ms, ks, '[m, k]')
  const p = checkPacked(kernel, packed, ks)
  if (opts !== undefined && (opts === null || typeof opts !== 'object')) throw new NumericsError(`${kernel}: opts must be an object`)
  const keys = Object.keys(opts ?? {}).filter((key) => key !== 'roundBf16')
  if (keys.length > 0) throw new NumericsError(`${kernel}: opts.${keys[0]} is not an option (expected roundBf16; the order is sequential-fma)`)
  const round = (opts as { roundBf16?: unknown } | undefined)?.roundBf16
  if (round !== undefined && typeof round !== 'boolean') throw new NumericsError(`${kernel}: opts.roundBf16 must be a boolean`)
  let o: Float32Array
  if (out === undefined) o = new Float32Array(ms * p.n)
  else {
    o = checkArray(kernel, 'out', out, 'Float32Array')
    checkLength(kernel, 'out', o, ms, p.n, '[m, n]')
    checkNoOverlap(kernel, 'out', o, 'x', xs)
    checkNoOverlap(kernel, 'out', o, 'packed.data', p.data)
  }
  return { x: xs, m: ms, k: ks, p, out: o, roundBf16: round === true }
}
