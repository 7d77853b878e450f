// A checkpoint's weights under a numerics profile (docs/profiles.md, "Weight preparation").
export type { Linear, PreparedLinear, PreparedWeights, WeightContainer } from './types.ts'
export { prepareWeights } from './prepare.ts'
export { holdMatrix, heldValues, quantizeDequantize, type HeldMatrix, type SourceMatrix } from './formats.ts'
export { isExpertTensor, parseLinearName, type LinearName } from './groups.ts'
