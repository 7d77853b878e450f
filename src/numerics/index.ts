// The public surface of the number formats: one import for every codec and quantiser.
export { bitsToF32, f32ToBits } from './bits.ts'
export { BF16_QUIET_NAN, bf16ToF32, decodeBf16, encodeBf16, exactBf16Codes, f32ToBf16, roundBf16 } from './bf16.ts'
export { decodeF16, encodeF16, F16_INF, F16_MAX, F16_QUIET_NAN, f16ToF32, f32ToF16, roundF16 } from './f16.ts'
export {
  decodeE4m3, E4M3_MAX, E4M3_NAN, E4M3_VALUES, e4m3ToF32, encodeE4m3, encodeE4m3NoSat,
  f32ToE4m3, f32ToE4m3NoSat, roundE4m3,
} from './e4m3.ts'
export { decodeE5m2, E5M2_INF, E5M2_MAX, E5M2_NAN, E5M2_VALUES, e5m2ToF32, encodeE5m2, f32ToE5m2, roundE5m2 } from './e5m2.ts'
export {
  decodeE8m0, E8M0_MAX_EXPONENT, E8M0_MIN_EXPONENT, E8M0_NAN, E8M0_VALUES, e8m0Ceil,
  e8m0FromExponent, e8m0ToF32,
} from './e8m0.ts'
export { E2M1_MAX, E2M1_VALUES, e2m1ToF32, f32ToE2m1, roundE2m1 } from './e2m1.ts'
export { packE2m1, unpackE2m1 } from './e2m1-pack.ts'
export { blockAmax, E2M1_AMAX_FLOOR, E4M3_AMAX_FLOOR, MX_BLOCK, ue8m0BlockScale } from './block-scale.ts'
export { dequantizeE4m3Blocks, dequantizeMxfp8, quantizeE4m3Blocks, quantizeMxfp8 } from './mxfp8.ts'
export type { E4m3Blocks } from './mxfp8.ts'
export { dequantizeE2m1Blocks, dequantizeMxfp4, quantizeE2m1Blocks, quantizeMxfp4 } from './mxfp4.ts'
export type { E2m1Blocks } from './mxfp4.ts'
export {
  dequantizeFp8BlockWeight, FP8_WEIGHT_MIN_SCALE, FP8_WEIGHT_TILE, fp8WeightScaleShape,
  quantizeFp8BlockWeight,
} from './fp8-block-weight.ts'
export type { Fp8BlockWeight, Fp8BlockWeightF32, Fp8BlockWeightUe8m0 } from './fp8-block-weight.ts'
export { fp4RoundTripBlocks, fp8RoundTripBlocks } from './round-trip.ts'
