// The safetensors element types, their sizes, and the order the reference writer lays them out in.

/**
 * Every dtype the safetensors format defines (huggingface/safetensors `enum Dtype`, snapshot 24b0b28).
 * The first sixteen have typed views in `viewAs`; the last six (`F8_E4M3FNUZ`, `F8_E5M2FNUZ`, `C64`,
 * `F4`, `F6_E2M3`, `F6_E3M2`) are size-only: read, validated and written as raw bytes.
 */
export type Dtype = 'BOOL' | 'U8' | 'I8' | 'U16' | 'I16' | 'U32' | 'I32' | 'U64' | 'I64' | 'F16' | 'BF16' | 'F32' | 'F64'
  | 'F8_E4M3' | 'F8_E5M2' | 'F8_E8M0'
  | 'F8_E4M3FNUZ' | 'F8_E5M2FNUZ' | 'C64' | 'F4' | 'F6_E2M3' | 'F6_E3M2'

/** Bits per element of each dtype (F4 and F6 pack below a byte; C64 is two f32 parts). */
export const DTYPE_BITS: Readonly<Record<Dtype, number>> = Object.freeze({
  BOOL: 8,
  U8: 8,
  I8: 8,
  U16: 16,
  I16: 16,
  U32: 32,
  I32: 32,
  U64: 64,
  I64: 64,
  F16: 16,
  BF16: 16,
  F32: 32,
  F64: 64,
  F8_E4M3: 8,
  F8_E5M2: 8,
  F8_E8M0: 8,
  F8_E4M3FNUZ: 8,
  F8_E5M2FNUZ: 8,
  C64: 64,
  F4: 4,
  F6_E2M3: 6,
  F6_E3M2: 6,
})

/** The dtypes that are only known by size: `viewAs` gives their raw bytes. */
export const SIZE_ONLY_DTYPES: ReadonlySet<Dtype> = new Set<Dtype>(['F8_E4M3FNUZ', 'F8_E5M2FNUZ', 'C64', 'F4', 'F6_E2M3', 'F6_E3M2'])

/**
 * The declaration order of the reference's `enum Dtype`. Its writer sorts tensors by this enum
 * DESCENDING (derived `Ord`), then by name. The enum is "in increasing alignment order", but within
 * one alignment the enum position still decides (all F32 tensors precede all U32, then I32), so we
 * keep the exact list rather than a bare alignment number.
 */
const REFERENCE_ENUM_ORDER: readonly Dtype[] = [
  'BOOL', 'F4', 'F6_E2M3', 'F6_E3M2', 'U8', 'I8', 'F8_E5M2', 'F8_E4M3', 'F8_E8M0', 'F8_E4M3FNUZ', 'F8_E5M2FNUZ',
  'I16', 'U16', 'F16', 'BF16', 'I32', 'U32', 'F32', 'C64', 'F64', 'I64', 'U64',
]

const ENUM_INDEX = new Map<string, number>(REFERENCE_ENUM_ORDER.map((d, i) => [d, i]))

/** All dtype names, in the reference enum's declaration order. */
export const DTYPES: readonly Dtype[] = REFERENCE_ENUM_ORDER

/** Whether `x` is a dtype name (case-sensitive, as the reference parses it). */
export function isDtype (x: unknown): x is Dtype {
  return typeof x === 'string' && ENUM_INDEX.has(x)
}

/** Position of `dtype` in the reference enum; the writer sorts by this, larger first. */
export function referenceDtypeRank (dtype: Dtype): number {
  return ENUM_INDEX.get(dtype) as number
}

/**
 * Byte size of a tensor, or a sentence saying why there is none: a shape whose element count times
 * the bit width is not a whole number of bytes (sub-byte dtypes), or a size past 2^53.
 * Computed in BigInt so a hostile shape cannot overflow silently.
 */
export function tensorByteLength (dtype: Dtype, shape: readonly number[]): { bytes: number } | { problem: string } {
  let elements = 1n
  for (const d of shape) elements *= BigInt(d)
  const bits = elements * BigInt(DTYPE_BITS[dtype])
  if (bits % 8n !== 0n) {
    return { problem: `${dtype} shape [${shape.join(',')}] holds ${bits} bits, not a whole number of bytes` }
  }
  const bytes = bits / 8n
  if (bytes > BigInt(Number.MAX_SAFE_INTEGER)) {
    return { problem: `${dtype} shape [${shape.join(',')}] needs ${bytes} bytes, more than 2^53 - 1` }
  }
  return { bytes: Number(bytes) }
}

/** Whether `d` is a valid dimension or offset: a non-negative safe integer. */
export function isIndex (d: unknown): d is number {
  return typeof d === 'number' && Number.isSafeInteger(d) && d >= 0
}
