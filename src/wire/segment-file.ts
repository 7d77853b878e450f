// Block segments: what a capture publishes while the engine still runs, so the decoder's blocks can
// be written before the capture is sealed. Once every layer has passed boundary b = (k+1)*bs, block
// k's inputs are final: each layer's boundary snapshot at b and each pool's pooled rows
// [k*bs/r, b/r) (pools are append-only). Segment k holds exactly those, under the layer files' own
// names (`layers.{i}.boundary.{b}.*`, `layers.{i}.{pool}.compressed_kv` with only this block's rows)
// and the layer files' dtype rule, so a reader gets the very float32 values a layer file would give.
// `segments.json` lists the segments that landed (each atomic, listed after it landed), in block
// order. The manifest stays the one word on the capture's state; the segment index is only a
// schedule of what may be written early.
import { z } from 'zod'
import { PdBridgeError } from '../errors.ts'
import { REQUEST_ID_PATTERN } from './manifest.ts'

/** The `format` of a segment file's metadata and of the segment index. */
export const SEGMENT_FILE_FORMAT = 'pd-bridge-capture-segment/1'
export const SEGMENT_INDEX_FORMAT = 'pd-bridge-capture-segments/1'

/** The segment index's file name inside a capture directory. */
export const SEGMENT_INDEX_FILE = 'segments.json'

/** `segment-000007.safetensors` for block 7. */
export const SEGMENT_FILE_PATTERN = /^segment-(\d{6})\.safetensors$/

/** The file name of block k's segment. */
export function segmentFileName (block: number): string {
  if (!Number.isSafeInteger(block) || block < 0 || block > 999_999) throw new PdBridgeError(`segment: block ${String(block)} is not an integer in 0..999999`)
  return `segment-${String(block).padStart(6, '0')}.safetensors`
}

/** One landed segment. */
export interface SegmentEntry {
  block: number
  file: string
  bytes: number
  sha256: string
}

/** The segment index of one capture. */
export interface SegmentIndex {
  format: typeof SEGMENT_INDEX_FORMAT
  requestId: string
  blockSize: number
  /** The first block this capture holds: P / bs for a continued capture, else 0. */
  firstBlock: number
  /** Landed segments, blocks firstBlock, firstBlock+1, ... in order. */
  segments: SegmentEntry[]
}

const entrySchema = z.strictObject({
  block: z.int().min(0),
  file: z.string().regex(SEGMENT_FILE_PATTERN),
  bytes: z.int().min(1),
  sha256: z.string().regex(/^[0-9a-f]{64}$/),
})

const indexSchema = z.strictObject({
  format: z.literal(SEGMENT_INDEX_FORMAT),
  requestId: z.string().regex(REQUEST_ID_PATTERN),
  blockSize: z.int().min(1),
  firstBlock: z.int().min(0),
  segments: z.array(entrySchema),
})

/** Parse and check a segment index (consecutive blocks from firstBlock, each file named for its block). */
export function parseSegmentIndex (text: string, source: string): SegmentIndex {
  let raw: unknown
  try {
    raw = JSON.parse(text)
  } catch (e) {
    throw new PdBridgeError(`${source}: not valid JSON: ${(e as Error).message}`)
  }
  const parsed = indexSchema.safeParse(raw)
  if (!parsed.success) {
    const issue = parsed.error.issues[0]
    throw new PdBridgeError(`${source}: ${issue.path.map(String).join('.') || '(root)'}: ${issue.message}`)
  }
  const index = parsed.data as SegmentIndex
  index.segments.forEach((e, i) => {
    if (e.block !== index.firstBlock + i) throw new PdBridgeError(`${source}: segments[${i}] is block ${e.block}, expected ${index.firstBlock + i} (consecutive from firstBlock)`)
    if (e.file !== segmentFileName(e.block)) throw new PdBridgeError(`${source}: segments[${i}] is named ${e.file}, expected ${segmentFileName(e.block)}`)
  })
  return index
}

/** The index's bytes (checked by the parser before anyone can read them). */
export function encodeSegmentIndex (index: SegmentIndex): Uint8Array {
  const text = JSON.stringify(index, null, 2) + '\n'
  parseSegmentIndex(text, SEGMENT_INDEX_FILE)
  return new TextEncoder().encode(text)
}

/** A segment file's string metadata. */
export function segmentFileMetadata (m: { block: number, blockSize: number, fingerprint: string, profile: string, numLayers: number }): Record<string, string> {
  return {
    format: SEGMENT_FILE_FORMAT,
    block: String(m.block),
    block_size: String(m.blockSize),
    fingerprint: m.fingerprint,
    profile: m.profile,
    num_layers: String(m.numLayers),
  }
}

/** A segment file's metadata, checked; `file` names errors. */
export function parseSegmentFileMeta (m: Record<string, string>, file: string): { block: number, blockSize: number, fingerprint: string, profile: string, numLayers: number } {
  if (m.format !== SEGMENT_FILE_FORMAT) throw new PdBridgeError(`${file}: metadata format is ${JSON.stringify(m.format) ?? 'missing'}, expected ${SEGMENT_FILE_FORMAT}`)
  const int = (key: string): number => {
    const v = m[key]
    if (v === undefined || !/^\d+$/.test(v)) throw new PdBridgeError(`${file}: metadata ${key} must be a non-negative integer, found ${JSON.stringify(v) ?? 'nothing'}`)
    return Number(v)
  }
  return { block: int('block'), blockSize: int('block_size'), fingerprint: m.fingerprint ?? '', profile: m.profile ?? '', numLayers: int('num_layers') }
}
