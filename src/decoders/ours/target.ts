// Our decoder's block store (oMLX's layout) as the bridge's target: the block writer writes through
// the decoder's own prefix cache, so geometry, storage rule and keys are the decoder's.
import type { DecoderPrefixCache } from '../../decode/prefix-cache/index.ts'
import { BlockWriter, checkCaptureTarget, SegmentBlockWriter } from '../../decode/writer/index.ts'
import type { DecoderTarget } from '../target.ts'

/** The store label /health reports for a block store. */
export const BLOCK_STORE_LABEL = 'blocks'

/** `cache` as a target; `builders`: the writer's builder threads (0: none). */
export function blockStoreTarget (cache: DecoderPrefixCache, options: { builders?: number } = {}): DecoderTarget {
  return {
    kind: BLOCK_STORE_LABEL,
    geometryFingerprint: cache.geometryFingerprint,
    storedBlocks: async (tokens) => (await cache.store.matchPrefix(tokens)).length,
    size: () => cache.store.size,
    totalBytes: () => cache.store.totalBytes,
    checkSidecar: (json) => checkCaptureTarget(json, cache),
    openWriter: async (dir, o) => await BlockWriter.open(dir, {
      target: cache, sidecar: o.sidecar, requestId: o.requestId, tokens: o.tokens, builders: options.builders ?? 0, ...(o.spool !== undefined ? { spool: o.spool } : {}),
    }),
    restore: async (tokens) => (await cache.lookup(tokens)).cache,
    openSegmentWriter: async (dir, o) => await SegmentBlockWriter.open(dir, { target: cache, sidecar: o.sidecar, requestId: o.requestId, tokens: o.tokens }),
  }
}
