// The DeepSeek reference's quantisation round trips on cached activations (its QAT simulation),
// as pure functions on float32 rows, plus the per-profile hooks an engine calls.
//   window rows, main-pool entries: fp8 e4m3 round trip of the nope dims (row[0, nope)), blocks
//     of 64 with a ue8m0 scale; the trailing rope dims are untouched;
//   indexer queries and indexer-pool entries: Hadamard over the whole row, rounded to bf16, then
//     an fp4 e2m1 round trip in blocks of 32 with a ue8m0 scale.
// The block scale rule and the element rounding are src/numerics' (docs/numerics.md).
import { NumericsError } from '../../errors.ts'
import { roundBf16 } from '../../numerics/bf16.ts'
import { fp4RoundTripBlocks, fp8RoundTripBlocks } from '../../numerics/round-trip.ts'
import { hadamardTransform } from './hadamard.ts'
import type { ReferenceQuant } from './types.ts'

/** Values per ue8m0 scale in the fp8 nope round trip. */
export const NOPE_FP8_BLOCK = 64
/** Values per ue8m0 scale in the indexer's fp4 round trip. */
export const INDEXER_FP4_BLOCK = 32

function checkOut (what: string, row: Float32Array, out: Float32Array): void {
  if (out.length !== row.length) throw new NumericsError(`${what}: out has ${out.length} elements, expected ${row.length}`)
}

/**
 * fp8 round trip of row[0, nopeDims) in blocks of 64 (scale 2^ceil(log2(max(amax, 1e-4) / 448)),
 * saturating e4m3, dequantised); row[nopeDims, end) copied unchanged. nopeDims must be a
 * multiple of 64 and at most row.length. `out` may be `row` (in place).
 */
export function fp8NopeRoundTrip (row: Float32Array, nopeDims: number, out: Float32Array = new Float32Array(row.length)): Float32Array {
  checkOut('fp8NopeRoundTrip', row, out)
  if (!Number.isSafeInteger(nopeDims) || nopeDims < 0 || nopeDims > row.length || nopeDims % NOPE_FP8_BLOCK !== 0) {
    throw new NumericsError(`fp8NopeRoundTrip: nope dims ${String(nopeDims)} must be a multiple of ${NOPE_FP8_BLOCK} within the row's ${row.length} values`)
  }
  if (out !== row) out.set(row.subarray(nopeDims), nopeDims)
  fp8RoundTripBlocks(row.subarray(0, nopeDims), NOPE_FP8_BLOCK, out.subarray(0, nopeDims))
  return out
}

/**
 * The quantising half of the indexer round trip: every value rounded to bf16 (the reference's
 * Hadamard output is bf16), then the fp4 round trip in blocks of 32 (scale
 * 2^ceil(log2(max(amax, 6 * 2^-126) / 6)), e2m1 ties to even). Idempotent. `out` may be `row`.
 */
export function bf16Fp4RoundTrip (row: Float32Array, out: Float32Array = new Float32Array(row.length)): Float32Array {
  checkOut('bf16Fp4RoundTrip', row, out)
  if (row.length % INDEXER_FP4_BLOCK !== 0) {
    throw new NumericsError(`bf16Fp4RoundTrip: row of ${row.length} values is not a whole number of ${INDEXER_FP4_BLOCK}-value blocks`)
  }
  for (let i = 0; i < row.length; i++) out[i] = roundBf16(row[i])
  return fp4RoundTripBlocks(out, INDEXER_FP4_BLOCK, out)
}

/**
 * The indexer's whole round trip: hadamardTransform (H_n / sqrt(n), fixed butterfly order), then
 * bf16Fp4RoundTrip. The row length must be a power of two and a multiple of 32 (128 in
 * DeepSeek-V4). `out` may be `row`.
 */
export function indexerFp4RoundTrip (row: Float32Array, out: Float32Array = new Float32Array(row.length)): Float32Array {
  checkOut('indexerFp4RoundTrip', row, out)
  if (row.length % INDEXER_FP4_BLOCK !== 0) {
    throw new NumericsError(`indexerFp4RoundTrip: row of ${row.length} values is not a whole number of ${INDEXER_FP4_BLOCK}-value blocks`)
  }
  return bf16Fp4RoundTrip(hadamardTransform(row, out), out)
}

/** In-place hooks an engine calls on cached rows; each is a no-op where its switch is off. */
export interface ReferenceQuantHooks {
  /** A window row (head_dim values) after RoPE. */
  windowRow: (row: Float32Array) => void
  /** A main compressed-pool entry (head_dim values) after RoPE. */
  poolEntry: (row: Float32Array) => void
  /** An indexer query head or indexer-pool entry (index_head_dim values) after RoPE. */
  indexerVector: (row: Float32Array) => void
}

const noop = (): void => {}

/**
 * The hooks for a profile's `referenceQuant` switches and a model with `headDim` and `ropeDim`
 * (nope = headDim - ropeDim, a multiple of 64), or null when every switch is off.
 */
export function referenceQuantHooks (rq: ReferenceQuant, headDim: number, ropeDim: number): ReferenceQuantHooks | null {
  if (!rq.windowFp8 && !rq.mainPoolFp8 && !rq.indexerFp4) return null
  const nope = headDim - ropeDim
  if ((rq.windowFp8 || rq.mainPoolFp8) && (!Number.isSafeInteger(nope) || nope < 0 || nope % NOPE_FP8_BLOCK !== 0)) {
    throw new NumericsError(`referenceQuantHooks: nope dims head_dim - rope_dim = ${headDim} - ${ropeDim} must be a non-negative multiple of ${NOPE_FP8_BLOCK}`)
  }
  const fp8 = (row: Float32Array): void => {
    fp8NopeRoundTrip(row, nope, row)
  }
  const fp4 = (row: Float32Array): void => {
    indexerFp4RoundTrip(row, row)
  }
  return {
    windowRow: rq.windowFp8 ? fp8 : noop,
    poolEntry: rq.mainPoolFp8 ? fp8 : noop,
    indexerVector: rq.indexerFp4 ? fp4 : noop,
  }
}
