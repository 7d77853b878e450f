// Everything `pd-bridge decoder` starts, in order: the model (loaded once), the prefix cache over
// the block store, then the HTTP server.
import { totalmem } from 'node:os'
import { resolve } from 'node:path'
import type { Logger } from 'pino'
import { PdBridgeError } from '../../errors.ts'
import { loadDecoderModel, type DecoderModel } from './model.ts'
import { openServedPrefixCache } from './prefix-cache.ts'
import type { BlockKey } from '../../config/block-key.ts'
import { DecodeBatcher } from './batcher.ts'
import { generate, PREFILL_CHUNK } from './generate.ts'
import { sequenceBytes } from './memory-budget.ts'
import { startDecoderServer, type DecoderServer } from './server.ts'
import { Geometry } from '../../wire/geometry.ts'
import { DEFAULT_BLOCK_SIZE } from '../../wire/block-size.ts'

/** Defaults of the decoder's limits. */
export const DECODER_DEFAULTS = {
  profile: 'decoder',
  blockSize: DEFAULT_BLOCK_SIZE,
  host: '127.0.0.1',
  port: 8000,
  maxTokens: 4096,
  maxBodyBytes: 4 * 1024 * 1024,
  maxQueue: 16,
  maxBatch: 8,
  prefillChunk: PREFILL_CHUNK,
} as const

/** Default batch memory budget: a quarter of the machine's memory (the weights and the rest of the process live outside it). */
export function defaultBatchMemoryBytes (): number {
  return Math.floor(totalmem() / 4)
}

/** What to launch. */
export interface DecoderLaunchOptions {
  modelDir: string
  profile?: string
  /** The block store root; absent: no prefix cache. */
  cacheDir?: string
  blockSize?: number
  /** Size limit of the block store (LRU eviction past it). */
  maxCacheBytes?: number
  host?: string
  port?: number
  /** Served model id and the model name in block keys; default the resolved model directory (oMLX keys by path). */
  modelName?: string
  maxTokens?: number
  maxBodyBytes?: number
  maxQueue?: number
  /** Requests decoding at once, their steps batched. */
  maxBatch?: number
  /** Bound on the running requests' estimated cache and step bytes (memory-budget.ts); default a quarter of the machine's memory. */
  batchMemoryBytes?: number
  /** Most tokens per prefill chunk: how long the others' decoding may wait for one prompt's prefill. */
  prefillChunk?: number
  logger: Logger
  /** How often /health may really write a probe file into the store (ms); default 10 s. */
  storeProbeMs?: number
  /** PD_API_KEY: required on every route but a bare /health; absent: open. */
  apiKey?: string
  /** The block key (PD_BLOCK_KEY or derived from PD_API_KEY): blocks are authenticated; absent: integrity-checked only. */
  blockKey?: BlockKey
}

/** A launched decoder. */
export interface LaunchedDecoder {
  server: DecoderServer
  model: DecoderModel
  modelName: string
  geometryFingerprint: string
}

export function positive (name: string, v: number | undefined, fallback: number, min = 1): number {
  const n = v ?? fallback
  if (!Number.isSafeInteger(n) || n < min) throw new PdBridgeError(`${name} must be an integer >= ${min}, got ${String(n)}`)
  return n
}

/** Load the model, open the cache, start the server. */
export async function launchDecoder (opts: DecoderLaunchOptions): Promise<LaunchedDecoder> {
  const blockSize = positive('--block-size', opts.blockSize, DECODER_DEFAULTS.blockSize)
  const maxTokens = positive('--max-tokens', opts.maxTokens, DECODER_DEFAULTS.maxTokens)
  const maxBodyBytes = positive('--max-body-bytes', opts.maxBodyBytes, DECODER_DEFAULTS.maxBodyBytes)
  const maxQueue = positive('--max-queue', opts.maxQueue, DECODER_DEFAULTS.maxQueue, 0)
  const maxBatch = positive('--max-batch', opts.maxBatch, DECODER_DEFAULTS.maxBatch)
  const batchMemoryBytes = positive('--batch-memory-bytes', opts.batchMemoryBytes, defaultBatchMemoryBytes())
  const prefillChunk = positive('--prefill-chunk', opts.prefillChunk, DECODER_DEFAULTS.prefillChunk)
  const model = await loadDecoderModel(opts.modelDir, opts.profile ?? DECODER_DEFAULTS.profile)
  const modelName = opts.modelName ?? resolve(opts.modelDir)
  if (modelName === '') throw new PdBridgeError('--model-name must not be empty')
  const prefixCache = opts.cacheDir === undefined
    ? undefined
    : await openServedPrefixCache({ dir: opts.cacheDir, modelName, model, blockSize, maxSizeBytes: opts.maxCacheBytes, logger: opts.logger, storeProbeMs: opts.storeProbeMs, blockKey: opts.blockKey })
  const geometryFingerprint = prefixCache?.geometryFingerprint ?? Geometry.fromConfig(model.config, model.engine.profile).fingerprint
  const batcher = new DecodeBatcher(model.engine)
  const context = { model, prefixCache, batcher, prefillChunk }
  const server = await startDecoderServer({
    model, modelName, geometryFingerprint, prefixCache,
    generate: (job, hooks, signal) => generate(context, job, hooks, signal),
    admission: { slots: maxBatch, budgetBytes: batchMemoryBytes, costOf: (promptTokens, maxTokens) => sequenceBytes(model.config, promptTokens, maxTokens) },
    healthExtra: () => ({ batch: batcher.stats }),
    host: opts.host ?? DECODER_DEFAULTS.host,
    port: opts.port ?? DECODER_DEFAULTS.port,
    maxTokens, maxBodyBytes, maxQueue,
    logger: opts.logger,
    apiKey: opts.apiKey,
  })
  return { server, model, modelName, geometryFingerprint }
}
