// What one more sequence in the batch costs in memory, estimated from the model geometry before it
// is admitted: its own cache at prompt + max_tokens tokens (as ModelCache holds it: the window,
// each pool's entries in a store that grows by doubling, buffers and carries) and the buffers of its
// row in a decode step. The weights are shared by every sequence and not counted; neither is the
// one prefill chunk that runs at a time (an engine-wide constant).
import type { DeepseekV4Config } from '../../model/config.ts'
import { cacheLayout } from '../../model/engine/cache-layout.ts'

const F32 = 4
/** RowStore's first capacity, in rows. */
const FIRST_ROWS = 16

/** Rows a RowStore holding `rows` rows has allocated, plus the old array while it grows. */
function rowStoreRows (rows: number): number {
  let capacity = FIRST_ROWS
  while (capacity < rows) capacity *= 2
  return capacity === FIRST_ROWS ? capacity : capacity + capacity / 2
}

/** An upper bound of the bytes a ModelCache of `tokens` tokens holds (ModelCache.heldBytes). */
export function cacheBytesAt (cfg: DeepseekV4Config, tokens: number): number {
  let bytes = 0
  for (const layer of cacheLayout(cfg.layerTypes, cfg)) {
    bytes += layer.windowRows * layer.headDim * F32
    for (const pool of layer.pools) {
      const entries = Math.floor(tokens / pool.ratio)
      bytes += rowStoreRows(entries) * pool.dim * F32
      // Buffers (kv, gate), the previous window (kv, gate) and the overlap carry (kv, gate).
      bytes += 2 * pool.ratio * pool.width * F32 * (pool.overlap ? 2 : 1)
      if (pool.overlap) bytes += 2 * pool.ratio * pool.dim * F32
    }
  }
  return bytes
}

/**
 * The transient buffers of one sequence's row in a decode step at `tokens` tokens: its residual
 * streams and their copies, queries, the keys and entries its attention reads, the indexer's
 * scores, the MoE experts' buffers for its top-k rows (gathered input, gate_up, SwiGLU, down:
 * native/src/moe_experts.cc holds all experts' at once), and its logits (the step's row, the copy
 * handed out, the one the sampler reads).
 */
export function stepBytesAt (cfg: DeepseekV4Config, tokens: number): number {
  const streams = cfg.hcMult * cfg.hiddenSize * 12
  const queries = cfg.numAttentionHeads * cfg.headDim * 4 + cfg.qLoraRank * 2
  const attended = cfg.slidingWindow + Math.max(Math.ceil(tokens / cfg.compressRates.hca), cfg.indexTopk)
  const keys = attended * cfg.headDim * 2
  const scores = Math.ceil(tokens / cfg.compressRates.csa) * 2
  const experts = cfg.numExpertsPerTok * (2 * cfg.hiddenSize + 3 * cfg.moeIntermediateSize)
  const logits = cfg.vocabSize * 3
  return (streams + queries + keys + scores + experts + logits) * F32
}

/** What admitting a request of `promptTokens` + `maxTokens` costs the batch's memory budget. */
export function sequenceBytes (cfg: DeepseekV4Config, promptTokens: number, maxTokens: number): number {
  const tokens = promptTokens + maxTokens
  return cacheBytesAt(cfg, tokens) + stepBytesAt(cfg, tokens)
}
