// The decoder's store as the bridge's target: the interface lives with the decoder kinds
// (src/decoders/target.ts), each kind's record opens its own; re-exported for the front door's stages.
export type { CaptureWriter, CaptureWriterOptions, DecoderTarget, SegmentWriter } from '../decoders/target.ts'
