// The streaming block writer: a sealed capture on local disk into the decoder's block store, one
// boundary at a time (the front door spools a capture from the share first). docs/block-writer.md.
export type { CaptureWriter } from './capture-writer.ts'
export { BlockWriter, streamBlocks, type BlockWriterOptions, type SpoolTimes, type WrittenBlock, type BlockWriterReport } from './writer.ts'
export { checkCaptureTarget, type BlockTarget, type WriterSidecarJson } from './target.ts'
export { openCaptureFiles, LayerFileReader, type OpenedCapture } from './capture-files.ts'
export { readBlockState, blockPayloadFromState, blockCacheBytes } from './block-state.ts'
export { payloadDigest, payloadTensorBytes } from './digest.ts'
export { HeldBytes, type HeldPart } from './held-bytes.ts'
export { SegmentBlockWriter, type SegmentWriterOptions } from './segment-writer.ts'
