// Numerics profiles: what each engine's arithmetic is, as named, versioned data (docs/profiles.md).
export type { ActivationFormat, MatmulOrder, NumericsProfile, ReferenceQuant, VectorFormat, WeightFormat, WeightGroup } from './types.ts'
export { WEIGHT_FORMATS, WEIGHT_GROUPS } from './types.ts'
export { getProfile, PROFILE_NAMES, REFERENCE_QUANT_SUFFIX, withReferenceQuant, type ProfileName } from './profiles.ts'
export { canonicalJson, profileFingerprint } from './fingerprint.ts'
export { hadamardScale, hadamardTransform } from './hadamard.ts'
export {
  bf16Fp4RoundTrip, fp8NopeRoundTrip, INDEXER_FP4_BLOCK, indexerFp4RoundTrip, NOPE_FP8_BLOCK,
  referenceQuantHooks, type ReferenceQuantHooks,
} from './reference-quant.ts'
