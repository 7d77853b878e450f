// Argument checks shared by the native wrappers and the references: NumericsError naming the
// kernel, the argument and the problem, before any buffer is touched.
import { types } from 'node:util'
import { NumericsError } from '../errors.ts'

type Typed = Float32Array | Uint16Array | Int32Array

/** The typed-array kinds a kernel accepts, checked by brand (works across realms, unlike instanceof). */
export const ARRAY_KINDS = {
  Float32Array: (v: unknown): v is Float32Array => types.isFloat32Array(v),
  Uint16Array: (v: unknown): v is Uint16Array => types.isUint16Array(v),
  Int32Array: (v: unknown): v is Int32Array => types.isInt32Array(v),
} as const

type Kind = keyof typeof ARRAY_KINDS
type KindType<K extends Kind> = K extends 'Float32Array' ? Float32Array : K extends 'Uint16Array' ? Uint16Array : Int32Array

/** A short description of a value's type, for error messages. */
export function describe (v: unknown): string {
  if (v === null) return 'null'
  if (typeof v === 'object') return (v as object).constructor?.name ?? 'object'
  return typeof v
}

/** `v` as a non-negative safe integer size, or NumericsError. */
export function checkSize (kernel: string, name: string, v: unknown): number {
  if (typeof v !== 'number' || !Number.isSafeInteger(v) || v < 0) {
    throw new NumericsError(`${kernel}: ${name} must be a non-negative integer, got ${String(v)}`)
  }
  return v
}

/** `v` must be a typed array of `kind`. */
export function checkArray<K extends Kind> (kernel: string, name: string, v: unknown, kind: K): KindType<K> {
  if (!ARRAY_KINDS[kind](v)) throw new NumericsError(`${kernel}: ${name} must be a ${kind}, got ${describe(v)}`)
  return v as KindType<K>
}

/** `arr.length` must be rows * cols (the shape is named in the message). */
export function checkLength (kernel: string, name: string, arr: Typed, rows: number, cols: number, shape: string): void {
  const expected = rows * cols
  if (!Number.isSafeInteger(expected) || arr.length !== expected) {
    throw new NumericsError(`${kernel}: ${name} has ${arr.length} elements, expected ${shape} = ${rows} x ${cols} = ${expected}`)
  }
}

/** The output may not share memory with an input: threads would read what others already wrote. */
export function checkNoOverlap (kernel: string, outName: string, out: Typed, inName: string, input: Typed): void {
  if (out.buffer !== input.buffer || out.byteLength === 0 || input.byteLength === 0) return
  const outEnd = out.byteOffset + out.byteLength
  const inEnd = input.byteOffset + input.byteLength
  if (out.byteOffset < inEnd && input.byteOffset < outEnd) {
    throw new NumericsError(`${kernel}: ${outName} overlaps ${inName} in memory; pass a separate output buffer`)
  }
}

/**
 * An elementwise kernel's output may be its input itself (each element is read before it is
 * written) or a separate buffer, never a partial overlap.
 */
export function checkSameOrNoOverlap (kernel: string, out: Typed, x: Typed): void {
  const same = out.buffer === x.buffer && out.byteOffset === x.byteOffset
  const disjoint = out.buffer !== x.buffer || out.byteOffset + out.byteLength <= x.byteOffset || x.byteOffset + x.byteLength <= out.byteOffset
  if (!same && !disjoint) throw new NumericsError(`${kernel}: out overlaps x without being x; pass x itself or a separate buffer`)
}

/** `arr.length` must be the product of `dims` (the shape is named in the message). */
export function checkShape (kernel: string, name: string, arr: Typed, dims: readonly number[], shape: string): void {
  const expected = dims.reduce((a, b) => a * b, 1)
  if (!Number.isSafeInteger(expected) || arr.length !== expected) {
    throw new NumericsError(`${kernel}: ${name} has ${arr.length} elements, expected ${shape} = ${dims.join(' x ')} = ${expected}`)
  }
}

/** Each [name, value, minimum] must be a safe integer >= its minimum, or NumericsError. */
export function checkIntegers (kernel: string, sizes: ReadonlyArray<readonly [string, unknown, number]>): number[] {
  return sizes.map(([name, v, min]) => {
    if (typeof v !== 'number' || !Number.isSafeInteger(v) || v < min) throw new NumericsError(`${kernel}: ${name} must be an integer >= ${min}, got ${String(v)}`)
    return v
  })
}

/** `v` as a boolean flag, or NumericsError. */
export function checkBoolean (kernel: string, name: string, v: unknown): boolean {
  if (typeof v !== 'boolean') throw new NumericsError(`${kernel}: ${name} must be a boolean, got ${String(v)}`)
  return v
}

/** `v` as a Float32Array of exactly prod(dims) elements, or NumericsError naming `shape`. */
export function checkFloat32Shape (kernel: string, name: string, v: unknown, dims: readonly number[], shape: string): Float32Array {
  const x = checkArray(kernel, name, v, 'Float32Array')
  checkShape(kernel, name, x, dims, shape)
  return x
}

/** `v` as a finite number (scales, epsilons), or NumericsError. */
export function checkFinite (kernel: string, name: string, v: unknown): number {
  if (typeof v !== 'number' || !Number.isFinite(v)) {
    throw new NumericsError(`${kernel}: ${name} must be a finite number, got ${String(v)}`)
  }
  return v
}

/**
 * An options bag whose every key is one of the boolean flags `flags`: the flags' values (false
 * when absent). Unknown keys are refused, so a misspelt rounding switch cannot be silently ignored.
 */
export function checkFlags<F extends string> (kernel: string, opts: unknown, flags: readonly F[]): Record<F, boolean> {
  const result = {} as Record<F, boolean>
  for (const f of flags) result[f] = false
  if (opts === undefined) return result
  if (opts === null || typeof opts !== 'object') throw new NumericsError(`${kernel}: opts must be an object, got ${describe(opts)}`)
  for (const [key, value] of Object.entries(opts)) {
    if (!(flags as readonly string[]).includes(key)) {
      throw new NumericsError(`${kernel}: opts.${key} is not an option (expected ${flags.join(', ')})`)
    }
    if (value !== undefined && typeof value !== 'boolean') {
      throw new NumericsError(`${kernel}: opts.${key} must be a boolean, got ${describe(value)}`)
    }
    result[key as F] = value === true
  }
  return result
}

/** The accumulation orders of a dot product (docs/kernels.md, "Accumulation order"). */
export type AccumulationOrder = 'lanes8' | 'blocks128' | 'lanes8-fma' | 'sequential-fma'

/** Every accumulation order, in documentation order. */
export const ACCUMULATION_ORDERS: readonly AccumulationOrder[] = ['lanes8', 'blocks128', 'lanes8-fma', 'sequential-fma']

/** Checked matmul options. */
export interface MatmulFlags {
  roundBf16: boolean
  order: AccumulationOrder
}

/** The options bag of a matmul: `roundBf16` (a boolean) and `order` (one of ACCUMULATION_ORDERS). */
export function checkMatmulOptions (kernel: string, opts: unknown): MatmulFlags {
  if (opts === undefined) return { roundBf16: false, order: 'lanes8' }
  if (opts === null || typeof opts !== 'object') throw new NumericsError(`${kernel}: opts must be an object, got ${describe(opts)}`)
  const round = (opts as { roundBf16?: unknown }).roundBf16
  if (round !== undefined && typeof round !== 'boolean') {
    throw new NumericsError(`${kernel}: opts.roundBf16 must be a boolean, got ${describe(round)}`)
  }
  const order = (opts as { order?: unknown }).order
  if (order !== undefined && !(ACCUMULATION_ORDERS as readonly unknown[]).includes(order)) {
    throw new NumericsError(`${kernel}: opts.order must be 'lanes8', 'blocks128', 'lanes8-fma' or 'sequential-fma', got ${typeof order === 'string' ? JSON.stringify(order) : describe(order)}`)
  }
  return { roundBf16: round === true, order: (order as AccumulationOrder | undefined) ?? 'lanes8' }
}

/** Checked matmul arguments, with the output allocated when absent. */
export interface MatmulArgs<W extends Float32Array | Uint16Array> {
  x: Float32Array, m: number, k: number, w: W, n: number, out: Float32Array, roundBf16: boolean, order: AccumulationOrder
}

/** Validate matmul arguments (shared by matmulF32 / matmulBf16 and their references). */
export function checkMatmul<K extends 'Float32Array' | 'Uint16Array'> (kernel: string, x: unknown, m: unknown, k: unknown, w: unknown, n: unknown,
  out: unknown, opts: unknown, wKind: K): MatmulArgs<KindType<K>> {
  const xs = checkArray(kernel, 'x', x, 'Float32Array')
  const ms = checkSize(kernel, 'm', m)
  const ks = checkSize(kernel, 'k', k)
  const ws = checkArray(kernel, 'w', w, wKind)
  const ns = checkSize(kernel, 'n', n)
  checkLength(kernel, 'x', xs, ms, ks, '[m, k]')
  checkLength(kernel, 'w', ws, ns, ks, '[n, k]')
  const { roundBf16, order } = checkMatmulOptions(kernel, opts)
  let o: Float32Array
  if (out === undefined) {
    o = new Float32Array(ms * ns)
  } else {
    o = checkArray(kernel, 'out', out, 'Float32Array')
    checkLength(kernel, 'out', o, ms, ns, '[m, n]')
    checkNoOverlap(kernel, 'out', o, 'x', xs)
    checkNoOverlap(kernel, 'out', o, 'w', ws)
  }
  return { x: xs, m: ms, k: ks, w: ws, n: ns, out: o, roundBf16, order }
}

/** `out` checked against its shape and the inputs it may not overlap, or a new zeroed array. */
export function checkOut (kernel: string, out: unknown, dims: readonly number[], shape: string,
  inputs: ReadonlyArray<readonly [string, Typed]>): Float32Array {
  if (out === undefined) return new Float32Array(dims.reduce((a, b) => a * b, 1))
  const o = checkArray(kernel, 'out', out, 'Float32Array')
  checkShape(kernel, 'out', o, dims, shape)
  for (const [name, input] of inputs) checkNoOverlap(kernel, 'out', o, name, input)
  return o
}

/** Checked RMSNorm arguments, with the output allocated when absent. */
export interface RmsNormArgs {
  x: Float32Array, rows: number, d: number, weight: Float32Array, eps: number, out: Float32Array
}

/** Validate RMSNorm arguments: d >= 1, weight of length d, eps a finite number >= 0. */
export function checkRmsNorm (kernel: string, x: unknown, rows: unknown, d: unknown, weight: unknown, eps: unknown, out: unknown): RmsNormArgs {
  const xs = checkArray(kernel, 'x', x, 'Float32Array')
  const rs = checkSize(kernel, 'rows', rows)
  const ds = checkSize(kernel, 'd', d)
  if (ds < 1) throw new NumericsError(`${kernel}: d must be at least 1, got ${ds}`)
  const ws = checkArray(kernel, 'weight', weight, 'Float32Array')
  checkLength(kernel, 'x', xs, rs, ds, '[rows, d]')
  checkLength(kernel, 'weight', ws, 1, ds, '[d]')
  if (typeof eps !== 'number' || !Number.isFinite(eps) || eps < 0) {
    throw new NumericsError(`${kernel}: eps must be a finite number >= 0, got ${String(eps)}`)
  }
  let o: Float32Array
  if (out === undefined) {
    o = new Float32Array(rs * ds)
  } else {
    o = checkArray(kernel, 'out', out, 'Float32Array')
    checkLength(kernel, 'out', o, rs, ds, '[rows, d]')
    checkNoOverlap(kernel, 'out', o, 'x', xs)
    checkNoOverlap(kernel, 'out', o, 'weight', ws)
  }
  return { x: xs, rows: rs, d: ds, weight: ws, eps, out: o }
}
