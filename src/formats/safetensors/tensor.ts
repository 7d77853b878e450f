// A tensor as raw bytes, and typed views over those bytes.
import { NumericsError } from '../../errors.ts'
import { DTYPE_BITS, SIZE_ONLY_DTYPES, isDtype, isIndex, tensorByteLength, type Dtype } from './dtype.ts'

/** A tensor: dtype, shape and its raw little-endian, row-major (C order) bytes. */
export interface Tensor {
  dtype: Dtype
  shape: number[]
  data: Uint8Array
}

/** Every kind of typed view `viewAs` can return. */
export type TensorView = Float32Array | Float64Array | Uint16Array | Int16Array | Uint8Array | Int8Array
  | Int32Array | Uint32Array | BigInt64Array | BigUint64Array

/** The typed view `viewAs` gives for dtype `D` (bf16/f16 as Uint16Array codes, every 8-bit float as Uint8Array codes). */
export type ViewOf<D extends Dtype> =
  D extends 'F32' ? Float32Array
    : D extends 'F64' ? Float64Array
      : D extends 'BF16' | 'F16' | 'U16' ? Uint16Array
        : D extends 'I16' ? Int16Array
          : D extends 'I8' ? Int8Array
            : D extends 'I32' ? Int32Array
              : D extends 'U32' ? Uint32Array
                : D extends 'I64' ? BigInt64Array
                  : D extends 'U64' ? BigUint64Array
                    : Uint8Array

type ViewClass = { new (buffer: ArrayBufferLike, byteOffset: number, length: number): TensorView, BYTES_PER_ELEMENT: number }

/** The natural typed-array class per dtype; absent ones (BOOL, U8, F8_*, size-only) are plain bytes. */
const VIEW_CLASS: Partial<Record<Dtype, ViewClass>> = {
  F32: Float32Array,
  F64: Float64Array,
  BF16: Uint16Array,
  F16: Uint16Array,
  U16: Uint16Array,
  I16: Int16Array,
  I8: Int8Array,
  I32: Int32Array,
  U32: Uint32Array,
  I64: BigInt64Array,
  U64: BigUint64Array,
}

/** Byte-level views are accepted as raw bytes for any dtype. */
function isByteView (v: ArrayBufferView): boolean {
  return v instanceof Uint8Array || v instanceof Int8Array || v instanceof Uint8ClampedArray || v instanceof DataView
}

function describeShape (shape: readonly unknown[]): string {
  return `[${shape.map(String).join(',')}]`
}

/**
 * A tensor over the bytes of `values` (shared, not copied). Checks that `dtype` is known, the shape
 * holds non-negative safe integers, the byte count equals prod(shape) * bits / 8, and that a typed
 * array wider than a byte is the natural one for `dtype` (a Float64Array for 'F32' is a bug, not bytes).
 */
export function tensorFrom (dtype: Dtype, shape: number[], values: ArrayBufferView): Tensor {
  if (!isDtype(dtype)) throw new NumericsError(`tensorFrom: unknown dtype ${JSON.stringify(dtype)}`)
  if (!Array.isArray(shape) || !shape.every(isIndex)) {
    throw new NumericsError(`tensorFrom: ${dtype} shape ${Array.isArray(shape) ? describeShape(shape) : String(shape)} must be a list of non-negative safe integers`)
  }
  if (values == null || !ArrayBuffer.isView(values)) {
    throw new NumericsError(`tensorFrom: ${dtype} ${describeShape(shape)} needs a typed array or DataView, got ${values === null ? 'null' : typeof values}`)
  }
  const natural = VIEW_CLASS[dtype]
  if (!isByteView(values) && (natural === undefined || !(values instanceof natural))) {
    const want = natural === undefined ? 'a Uint8Array' : `a ${natural.name} or a Uint8Array of raw bytes`
    throw new NumericsError(`tensorFrom: ${dtype} ${describeShape(shape)} needs ${want}, got ${values.constructor.name}`)
  }
  const size = tensorByteLength(dtype, shape)
  if ('problem' in size) throw new NumericsError(`tensorFrom: ${size.problem}`)
  if (values.byteLength !== size.bytes) {
    throw new NumericsError(`tensorFrom: ${dtype} ${describeShape(shape)} needs ${size.bytes} bytes, got ${values.byteLength}`)
  }
  return { dtype, shape: [...shape], data: new Uint8Array(values.buffer, values.byteOffset, values.byteLength) }
}

/**
 * A typed view of a tensor's bytes: the natural array for its dtype (bf16/f16 codes as Uint16Array,
 * F8_* codes and BOOL as Uint8Array, size-only dtypes as their raw bytes). Shares memory when the
 * bytes are aligned for the element size; copies into a fresh buffer when they are not.
 * With `expected`, a tensor of another dtype is an error, and the result is typed precisely.
 */
export function viewAs<D extends Dtype> (t: Tensor, expected: D): ViewOf<D>
export function viewAs (t: Tensor): TensorView
export function viewAs (t: Tensor, expected?: Dtype): TensorView {
  if (t == null || !isDtype(t.dtype) || !(t.data instanceof Uint8Array) || !Array.isArray(t.shape)) {
    throw new NumericsError('viewAs: not a tensor (needs a known dtype, a shape array and Uint8Array data)')
  }
  if (expected !== undefined && t.dtype !== expected) {
    throw new NumericsError(`viewAs: expected a ${expected} tensor, got ${t.dtype} ${describeShape(t.shape)}`)
  }
  const size = tensorByteLength(t.dtype, t.shape)
  if ('problem' in size) throw new NumericsError(`viewAs: ${size.problem}`)
  if (t.data.byteLength !== size.bytes) {
    throw new NumericsError(`viewAs: ${t.dtype} ${describeShape(t.shape)} needs ${size.bytes} bytes, the tensor holds ${t.data.byteLength}`)
  }
  const View = VIEW_CLASS[t.dtype]
  if (View === undefined || SIZE_ONLY_DTYPES.has(t.dtype)) return t.data
  const width = DTYPE_BITS[t.dtype] / 8
  // Typed arrays refuse unaligned offsets; a copy starts at offset 0 of a new buffer.
  const bytes = t.data.byteOffset % width === 0 ? t.data : t.data.slice()
  return new View(bytes.buffer, bytes.byteOffset, bytes.byteLength / width)
}
