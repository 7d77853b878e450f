// The streaming block writer: a capture (local, or streamed from the share) into the decoder's
// block store, one boundary at a time. docs/block-writer.md describes it.
export type { CaptureWriter } from './capture-writer.ts'
export { BlockWriter, streamBlocks, type BlockWriterOptions, type ShareWriterOptions, type WrittenBlock, type BlockWriterReport, type CaptureSource } from './writer.ts'
export { checkCaptureTarget, type BlockTarget, type WriterSidecarJson } from './target.ts'
export { openCaptureFiles, LayerFileReader, type OpenedCapture } from './capture-files.ts'
export { readBlockState, blockPayloadFromState, blockCacheBytes } from './block-state.ts'
export { spoolCapture, type SpoolOptions, type SpoolResult } from './spool.ts'
export { payloadDigest, payloadTensorBytes } from './digest.ts'
export { HeldBytes, type HeldPart } from './held-bytes.ts'
