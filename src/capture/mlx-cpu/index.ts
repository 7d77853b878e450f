// The mlx-cpu cache path: oMLX's DeepSeek-V4 cache state computed from attention inputs with MLX's
// CPU arithmetic (docs/mlx-cpu-arithmetic.md, "The mlx-cpu cache path").
export { mlxCpuCacheConfig, type MlxCpuCacheConfig } from './config.ts'
export { mlxCpuCacheWeightsFromCheckpoint, mlxQuantizationModes } from './from-checkpoint.ts'
export {
  compressorPool, compressorProject, mlxCpuLayerCache,
  type CompressorProjection, type MlxCpuLayerCache, type MlxCpuPoolState,
} from './layer-cache.ts'
export { mlxCpuWeightSpecs, mlxCpuWeightTensors, type MlxWeightSpec } from './sidecar-weights.ts'
export { mlxCpuCacheWeightsFromTensors, readMlxCpuCacheWeights, type MlxCompressorWeights, type MlxCpuCacheWeights, type MlxCpuLayerWeights } from './weights.ts'
