// llama.cpp as a target of the bridge's writer: a capture into a LlamaCppStateStore.
export type { CaptureWriter } from '../../../decode/writer/index.ts'
export { LlamaCppStateWriter, type LlamaCppWriterOptions, type LlamaCppWriterReport, type StagedBlock, type StateBoundaries, type WrittenState } from './writer.ts'
export { LlamaCppSegmentWriter } from './segment-writer.ts'
export { checkLlamaCppTarget, targetDifferences, LlamaCppTargetError, LLAMA_CPP_PROFILE, type TargetSidecarJson } from './checks.ts'
export { readPositionBiases, biasVector } from './position-bias.ts'
