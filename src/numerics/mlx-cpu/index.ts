// MLX 0.32.2's CPU arithmetic for the cache path of oMLX's DeepSeek-V4 model, bit for bit
// (docs/mlx-cpu-arithmetic.md; the rules were found by harness/mlx/probes/).
export { bf16, bf16Array, bf16Reference } from './bf16-round.ts'
export { mlxCos, mlxExp, mlxSin } from './cephes.ts'
export { fma32, fround } from './f32.ts'
export { overlapCompress, simpleCompress } from './pooling.ts'
export { mlxPowF32 } from './pow.ts'
export {
  affineDequantized, affineMatmul, MLX_E4M3_VALUES, mxfp8Matmul, mxScale,
  type AffineWeight, type Mxfp8Weight,
} from './quantized-matmul.ts'
export {
  affineQuantize, mxfp8Exponent, mxfp8Quantize, packBytes, rint, toFp8,
  type AffineQuantized, type MxQuantized,
} from './quantize.ts'
export { mlxRmsNormRow, mlxRmsNormRows } from './rms-norm.ts'
export { MLX_CPU, rounder, type RoundTo, type RoundingPoints } from './rounding-points.ts'
export { deepseekV4RopeFreqs, mlxRopeRow, ropeInvFreqs, type MlxYarn } from './rope.ts'
