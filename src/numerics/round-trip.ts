// The quantise-then-dequantise round trips DeepSeek's reference applies to cached activations
// (its quantisation-aware-training simulation): the result is what the cache stores, in float32,
// and every result value is exactly representable in bf16.
//   fp8: window rows and main-pool rows, nope channels, blocks of 64 (ue8m0 scale, e4m3 values)
//   fp4: indexer query and indexer pool rows after the Hadamard transform, blocks of 32 (e2m1)
import { checkOutLength } from './codes.ts'
import { dequantizeE2m1Blocks, quantizeE2m1Blocks } from './mxfp4.ts'
import { dequantizeE4m3Blocks, quantizeE4m3Blocks } from './mxfp8.ts'

/**
 * fp8 round trip per consecutive block of `block` values (x.length a multiple of `block`):
 * s = 2^ceil(log2(fround(max(amax, fround(1e-4)) * fround(1/448)))), then
 * y = e4m3_saturating(fround(x / s)) * s. Equal to DeepSeek's act_quant with ue8m0 scales
 * followed by dequantisation. A block holding NaN or ±Inf comes back all NaN.
 */
export function fp8RoundTripBlocks (x: Float32Array, block: number, out: Float32Array = new Float32Array(x.length)): Float32Array {
  checkOutLength(out.length, x.length, 'fp8RoundTripBlocks')
  return dequantizeE4m3Blocks(quantizeE4m3Blocks(x, block), out)
}

/**
 * fp4 round trip per consecutive block of `block` values (32 in DeepSeek; `block` even):
 * s = 2^ceil(log2(fround(max(amax, 6 * 2^-126) * fround(1/6)))), then
 * y = e2m1_saturating(fround(x / s)) * s, e2m1 rounding to nearest with ties to even.
 * Equal to DeepSeek's fp4_act_quant followed by dequantisation. A block holding NaN or ±Inf
 * comes back all NaN.
 */
export function fp4RoundTripBlocks (x: Float32Array, block = 32, out: Float32Array = new Float32Array(x.length)): Float32Array {
  checkOutLength(out.length, x.length, 'fp4RoundTripBlocks')
  return dequantizeE2m1Blocks(quantizeE2m1Blocks(x, block), out)
}
