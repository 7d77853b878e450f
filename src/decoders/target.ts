// Where the front door's bridge puts the decoder's finished cache: one small interface over every
// decoder kind's store (each kind's record opens its own, src/decoders/<kind>/). Our decoder keeps a
// block store of safetensors blocks (oMLX's layout); llama.cpp keeps one sequence-state file per
// block boundary. All are keyed by the same block-key chain, so routing asks "how many full blocks
// of this prompt are stored" the same way, and the bridge drives every writer the same way (open,
// writeNext until null, finalize; close on failure).
import type { SidecarJson } from '../wire/sidecar-format.ts'
import type { ModelCache } from '../model/engine/index.ts'
import type { BlockWriterReport, CaptureWriter, SpoolTimes } from '../decode/writer/index.ts'
import type { CaptureManifest } from '../wire/manifest.ts'

export type { CaptureWriter }

/**
 * A writer of a capture still running, as the front door's streamed stage drives it: `writeReady`
 * after every manifest poll, `finish` once sealed, `close` when the bridge stops before that.
 */
export interface SegmentWriter {
  /** Write (or stage) every block segment listed and not yet written; the number written. */
  writeReady: () => Promise<number>
  /** The capture is sealed: write what is left and verify it. */
  finish: () => Promise<BlockWriterReport & { manifest: CaptureManifest }>
  /** Stop without finishing; whatever stays in the decoder's store is whole and correct. */
  close: () => Promise<void>
  /** Blocks built from segments so far (the overlap: those before the seal were built while the engine ran). */
  readonly blocksWritten: number
  /** Entries put into the decoder's store so far: what stays after a failure (the verdict names them). */
  readonly blocksKept: number
  /** When each block was built, ms from the open. */
  readonly putTimes: readonly number[]
}

/** What a writer is opened with. */
export interface CaptureWriterOptions {
  sidecar: { dir: string, json: SidecarJson, fingerprint: string }
  requestId: string
  /** The token ids the prefill engine was asked for. */
  tokens: number[]
  /** When a capture spooled from the share landed (the block writer reports it; others ignore it). */
  spool?: SpoolTimes
}

/** The decoder's store as the bridge sees it. */
export interface DecoderTarget {
  /** What the store holds, as /health names it (the kind record's store label: `blocks`, `llama.cpp`). */
  kind: string
  /** What the decoder's /health must report, or bridged caches would never be served. */
  geometryFingerprint: string
  /** Full blocks of `tokens` stored from the start (files present; read and checked only by the decoder). */
  storedBlocks: (tokens: number[]) => Promise<number>
  /** Entries (blocks or state files) and their bytes, for /health. */
  size: () => number
  totalBytes: () => number
  /** Throw, naming what differs, when a capture under this sidecar cannot go into this store. */
  checkSidecar: (json: SidecarJson) => void
  /** Open the sealed capture in `dir` for writing (checks manifest, checksums and token digest first). */
  openWriter: (dir: string, options: CaptureWriterOptions) => Promise<CaptureWriter>
  /**
   * The decoder's cache at the last stored block boundary of `tokens` (its own lookup: integrity,
   * geometry and the exact-prompt rule), or null when nothing restores: what a warm-extended bridge
   * continues from. Absent where the store's state cannot be handed out (llama.cpp's).
   */
  restore?: (tokens: number[]) => Promise<ModelCache | null>
  /**
   * Open the capture in `dir` while it still runs, to write its blocks from the block segments the
   * engine publishes (docs/block-writer.md, *Blocks while the engine runs*; llama.cpp's stages its
   * blocks and builds its state at the seal, docs/llama-cpp.md). Absent where a target cannot.
   */
  openSegmentWriter?: (dir: string, options: CaptureWriterOptions) => Promise<SegmentWriter>
}
