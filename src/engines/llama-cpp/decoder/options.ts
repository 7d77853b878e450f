// The llama.cpp decoder's fixed context configuration, its defaults and their checks. Every field
// changes llama.cpp's arithmetic or its state files, so one configuration holds for a whole run.
import type { DeepseekV4Config } from '../../../model/config.ts'
import { PdBridgeError } from '../../../errors.ts'
import type { CacheType } from '../state/format.ts'

export const LLAMA_CPP_DECODER_DEFAULTS = {
  threads: 2,
  kvCacheType: 'F32' as CacheType,
  flashAttention: false,
  /**
   * Tokens per llama.cpp batch. The runner's default (batch = context) would size the compute
   * buffers for a 32K-token batch; 512 keeps them small and prompts are fed block by block anyway.
   */
  batchSize: 512,
} as const

/** The context a decoder runs, resolved and checked. */
export interface LlamaCppContextConfig {
  contextSize: number
  threads: number
  kvCacheType: CacheType
  flashAttention: boolean
  batchSize: number
}

function integer (flag: string, v: number | undefined, fallback: number, min: number, max = Number.MAX_SAFE_INTEGER): number {
  const n = v ?? fallback
  if (!Number.isSafeInteger(n) || n < min || n > max) throw new PdBridgeError(`${flag} must be an integer in [${min}, ${max}], got ${String(n)}`)
  return n
}

/** Parse a --kv-cache-type value (case-insensitive), or say which values exist. */
export function parseKvCacheType (text: string): CacheType {
  const t = text.toUpperCase()
  if (t !== 'F32' && t !== 'F16') throw new PdBridgeError(`--kv-cache-type must be F32 or F16, got ${JSON.stringify(text)}`)
  return t
}

/**
 * Resolve the context: size default max_position_embeddings (llama.cpp allocates its DSV4 caches
 * per position, a few KB each for tiny, so the full window costs little), never above it (the
 * model's rope is defined that far) and at least 2 (a prompt token and a completion).
 */
export function resolveContext (cfg: DeepseekV4Config, opts: Partial<LlamaCppContextConfig>): LlamaCppContextConfig {
  const max = cfg.maxPositionEmbeddings
  const contextSize = integer('--context-size', opts.contextSize, max, 2, max)
  const threads = integer('--threads', opts.threads, LLAMA_CPP_DECODER_DEFAULTS.threads, 1, 256)
  const batchSize = Math.min(contextSize, integer('batch size', opts.batchSize, LLAMA_CPP_DECODER_DEFAULTS.batchSize, 1))
  const kvCacheType = opts.kvCacheType ?? LLAMA_CPP_DECODER_DEFAULTS.kvCacheType
  if (kvCacheType !== 'F32' && kvCacheType !== 'F16') throw new PdBridgeError(`--kv-cache-type must be F32 or F16, got ${String(kvCacheType)}`)
  if (opts.flashAttention === true) throw new PdBridgeError('flash attention is not supported by the llama.cpp decoder (its state geometry and parity are measured without it)')
  return { contextSize, threads, kvCacheType, flashAttention: false, batchSize }
}
