// llama.cpp's store of sequence-state files as the front door's target (../target.ts): the writer
// builds the state at the capture's sealed boundary, the geometry fingerprint is the one the
// llama.cpp decoder's /health reports, and routing counts the prompt's stored boundaries.
import type { KeyObject } from 'node:crypto'
import { llamaCppGeometryFingerprint } from '../../engines/llama-cpp/decoder/fingerprint.ts'
import { stateGeometry } from '../../engines/llama-cpp/state/index.ts'
import { LlamaCppStateStore } from '../../engines/llama-cpp/store/index.ts'
import { checkLlamaCppTarget, LlamaCppSegmentWriter, LlamaCppStateWriter } from '../../engines/llama-cpp/target/index.ts'
import type { DeepseekV4Config } from '../../model/config.ts'
import type { DecoderTarget } from '../target.ts'

/** What the target is opened with: the decoder's store, its model and its context's cache type. */
export interface LlamaCppTargetOptions {
  dir: string
  modelName: string
  cfg: DeepseekV4Config
  blockSize: number
  kvCacheType: 'F32' | 'F16'
  /** Where the writer stages its private oMLX blocks (default the OS temp dir). */
  stagingRoot?: string
  /** The deployment's block key: state files written get their keyed digest (absent: none). */
  authKey?: KeyObject
}

export function llamaCppTarget (o: LlamaCppTargetOptions): DecoderTarget {
  // The decoder runs without flash attention (its default): the state's V layout depends on it.
  const geometry = stateGeometry(o.cfg, { kvCacheType: o.kvCacheType, flashAttention: false })
  const store = LlamaCppStateStore.open({ dir: o.dir, modelName: o.modelName, blockSize: o.blockSize, geometry, authKey: o.authKey })
  return {
    kind: 'llama.cpp',
    geometryFingerprint: llamaCppGeometryFingerprint(geometry, o.blockSize, o.modelName),
    storedBlocks: async (tokens) => {
      // The decoder writes states and the front writes states: read the directory again first.
      store.rescan()
      return store.storedBlocks(tokens)
    },
    size: () => store.size,
    totalBytes: () => store.totalBytes,
    checkSidecar: (json) => checkLlamaCppTarget(json, o.cfg, geometry, o.blockSize),
    openWriter: async (dir, w) => await LlamaCppStateWriter.open(dir, { store, cfg: o.cfg, sidecar: w.sidecar, requestId: w.requestId, tokens: w.tokens, stagingRoot: o.stagingRoot }),
    // Blocks staged while the engine runs; the state at S is built at the seal (docs/llama-cpp.md).
    openSegmentWriter: async (dir, w) => await LlamaCppSegmentWriter.open(dir, { store, cfg: o.cfg, sidecar: w.sidecar, requestId: w.requestId, tokens: w.tokens, stagingRoot: o.stagingRoot }),
  }
}
