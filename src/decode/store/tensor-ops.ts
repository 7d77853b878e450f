// The few tensor operations restore needs, on raw bytes: slice and join along one axis, and the
// int64 row-range vector of a PoolingCache delta.
import { DTYPE_BITS, tensorByteLength, viewAs, type Dtype, type Tensor } from '../../formats/safetensors/index.ts'
import { BlockStoreError } from './errors.ts'

function elementBytes (dtype: Dtype, what: string): number {
  const bits = DTYPE_BITS[dtype]
  if (bits % 8 !== 0) throw new BlockStoreError(what, `${dtype} packs below a byte; it cannot be sliced by rows`)
  return bits / 8
}

function product (xs: readonly number[]): number {
  return xs.reduce((a, b) => a * b, 1)
}

/** The row axis of a state tensor: the second to last, as in [batch, rows, dim] and [batch, heads, rows, dim]. */
export function rowAxis (t: Tensor, what: string): number {
  if (t.shape.length < 2) throw new BlockStoreError(what, `a ${t.shape.length}-d tensor [${t.shape.join(',')}] has no row axis`)
  return t.shape.length - 2
}

/** Rows [from, to) of `t` along `axis` (a copy). */
export function sliceAlong (t: Tensor, axis: number, from: number, to: number, what: string): Tensor {
  const n = t.shape[axis]
  if (!Number.isSafeInteger(from) || !Number.isSafeInteger(to) || from < 0 || to < from || to > n) {
    throw new BlockStoreError(what, `rows [${from}, ${to}) are outside the ${n} rows of axis ${axis}`)
  }
  const unit = elementBytes(t.dtype, what) * product(t.shape.slice(axis + 1))
  const outer = product(t.shape.slice(0, axis))
  const shape = [...t.shape]
  shape[axis] = to - from
  const data = new Uint8Array(outer * (to - from) * unit)
  for (let o = 0; o < outer; o++) {
    const src = (o * n + from) * unit
    data.set(t.data.subarray(src, src + (to - from) * unit), o * (to - from) * unit)
  }
  return { dtype: t.dtype, shape, data }
}

/** Join tensors along `axis`; every other dimension and the dtype must agree. */
export function concatAlong (parts: readonly Tensor[], axis: number, what: string): Tensor {
  if (parts.length === 0) throw new BlockStoreError(what, 'nothing to join')
  const first = parts[0]
  for (const [i, p] of parts.entries()) {
    const same = p.dtype === first.dtype && p.shape.length === first.shape.length &&
      p.shape.every((d, k) => k === axis || d === first.shape[k])
    if (!same) {
      throw new BlockStoreError(what, `part ${i} is ${p.dtype} [${p.shape.join(',')}], which does not join part 0, ${first.dtype} [${first.shape.join(',')}], along axis ${axis}`)
    }
  }
  const unit = elementBytes(first.dtype, what) * product(first.shape.slice(axis + 1))
  const outer = product(first.shape.slice(0, axis))
  const total = parts.reduce((a, p) => a + p.shape[axis], 0)
  const shape = [...first.shape]
  shape[axis] = total
  const data = new Uint8Array(outer * total * unit)
  let at = 0
  for (let o = 0; o < outer; o++) {
    for (const p of parts) {
      const rows = p.shape[axis] * unit
      data.set(p.data.subarray(o * rows, (o + 1) * rows), at)
      at += rows
    }
  }
  return { dtype: first.dtype, shape, data }
}

/** An I64 vector tensor. */
export function int64Vector (values: readonly number[]): Tensor {
  const v = BigInt64Array.from(values.map((x) => BigInt(x)))
  return { dtype: 'I64', shape: [values.length], data: new Uint8Array(v.buffer) }
}

/** The values of an I64 vector tensor as safe integers. */
export function readInt64Vector (t: Tensor, what: string): number[] {
  if (t.dtype !== 'I64' || t.shape.length !== 1) {
    throw new BlockStoreError(what, `expected an I64 vector, got ${t.dtype} [${t.shape.join(',')}]`)
  }
  return [...viewAs(t, 'I64')].map((x) => {
    if (x > BigInt(Number.MAX_SAFE_INTEGER) || x < BigInt(Number.MIN_SAFE_INTEGER)) {
      throw new BlockStoreError(what, `value ${x} is past 2^53`)
    }
    return Number(x)
  })
}

/** A tensor of zeros. */
export function zeros (dtype: Dtype, shape: number[], what: string): Tensor {
  const size = tensorByteLength(dtype, shape)
  if ('problem' in size) throw new BlockStoreError(what, size.problem)
  return { dtype, shape, data: new Uint8Array(size.bytes) }
}

/** Whether two tensors have the same dtype, shape and bytes. */
export function sameTensor (a: Tensor, b: Tensor): boolean {
  if (a.dtype !== b.dtype || a.shape.length !== b.shape.length || a.shape.some((d, i) => d !== b.shape[i])) return false
  if (a.data.byteLength !== b.data.byteLength) return false
  return Buffer.from(a.data.buffer, a.data.byteOffset, a.data.byteLength).equals(Buffer.from(b.data.buffer, b.data.byteOffset, b.data.byteLength))
}
