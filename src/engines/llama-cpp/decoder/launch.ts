// Everything `pd-bridge decoder --engine llama.cpp` starts, in order: tokenizer and config (ours),
// the GGUF checked against them, llama.cpp's model and its one context, the state store, then the
// same HTTP server our engine's decoder runs.
import { resolve } from 'node:path'
import type { Logger } from 'pino'
import { ConfigError, PdBridgeError } from '../../../errors.ts'
import { loadDeepseekV4Config } from '../../../model/config.ts'
import { loadTokenizer } from '../../../model/tokenizer/index.ts'
import { DECODER_DEFAULTS, positive } from '../../decoder/launch.ts'
import type { ServedModel } from '../../decoder/model.ts'
import { startDecoderServer, type DecoderServer } from '../../decoder/server.ts'
import { LlamaCppModel, NODE_LLAMA_CPP_VERSION } from '../runner.ts'
import { stateGeometry } from '../state/geometry.ts'
import { llamaCppGeometryFingerprint } from './fingerprint.ts'
import { generateLlamaCpp } from './generate.ts'
import { checkLlamaCppRequest } from './sampling.ts'
import { checkGgufMatchesConfig } from './gguf-check.ts'
import { resolveContext, type LlamaCppContextConfig } from './options.ts'
import { ServedStateStore } from './served-store.ts'
import type { BlockKey } from '../../../config/block-key.ts'

/** What to launch. */
export interface LlamaCppDecoderLaunchOptions {
  /** The checkpoint directory: config.json and tokenizer.json (no weights are read). */
  modelDir: string
  /** The GGUF llama.cpp runs (`pd-bridge export-gguf --model modelDir`). */
  gguf: string
  /** The state store root; absent: no prefix cache. */
  cacheDir?: string
  blockSize?: number
  kvCacheType?: 'F32' | 'F16'
  threads?: number
  /** Default (and most): max_position_embeddings. */
  contextSize?: number
  /** llama.cpp batch size (API only), default 512. */
  batchSize?: number
  host?: string
  port?: number
  /** Served model id and the model name in state keys; default the resolved model directory. */
  modelName?: string
  maxTokens?: number
  maxBodyBytes?: number
  maxQueue?: number
  logger: Logger
  storeProbeMs?: number
  apiKey?: string
  /** The block key: every state file carries its keyed digest, checked before llama.cpp reads it; absent: not authenticated. */
  blockKey?: BlockKey
}

/** A launched llama.cpp decoder. */
export interface LaunchedLlamaCppDecoder {
  server: DecoderServer
  model: ServedModel
  modelName: string
  geometryFingerprint: string
  context: LlamaCppContextConfig
  gguf: string
  blockSize: number
  /** The server closed, then llama.cpp's context and model disposed. */
  close: () => Promise<void>
}

async function servedModel (dir: string): Promise<ServedModel> {
  const config = await loadDeepseekV4Config(dir)
  const tokenizer = await loadTokenizer(dir).catch((e: unknown) => {
    throw new PdBridgeError(`${dir}: no usable tokenizer.json (${(e as Error).message}); the decoder server needs the checkpoint's tokenizer to render and encode prompts`)
  })
  if (tokenizer.vocabSize > config.vocabSize) throw new ConfigError('vocab_size', `the tokenizer has ${tokenizer.vocabSize} ids but the model only ${config.vocabSize}`, `${dir}/config.json`)
  return { tokenizer, config, dir, profileName: 'llama.cpp' }
}

/** Check everything, load llama.cpp, open the store, start the server. */
export async function launchLlamaCppDecoder (opts: LlamaCppDecoderLaunchOptions): Promise<LaunchedLlamaCppDecoder> {
  const blockSize = positive('--block-size', opts.blockSize, DECODER_DEFAULTS.blockSize)
  const maxTokens = positive('--max-tokens', opts.maxTokens, DECODER_DEFAULTS.maxTokens)
  const maxBodyBytes = positive('--max-body-bytes', opts.maxBodyBytes, DECODER_DEFAULTS.maxBodyBytes)
  const maxQueue = positive('--max-queue', opts.maxQueue, DECODER_DEFAULTS.maxQueue, 0)
  const model = await servedModel(opts.modelDir)
  const context = resolveContext(model.config, opts)
  const modelName = opts.modelName ?? resolve(opts.modelDir)
  if (modelName === '') throw new PdBridgeError('--model-name must not be empty')
  await checkGgufMatchesConfig(opts.gguf, model.config, opts.modelDir)
  const geometry = stateGeometry(model.config, { kvCacheType: context.kvCacheType, flashAttention: context.flashAttention })
  const geometryFingerprint = llamaCppGeometryFingerprint(geometry, blockSize, modelName)

  const llama = await LlamaCppModel.load(opts.gguf)
  const session = await llama.session(context)
  const store = opts.cacheDir === undefined
    ? undefined
    : new ServedStateStore({ dir: opts.cacheDir, modelName, blockSize, geometry, logger: opts.logger, storeProbeMs: opts.storeProbeMs, blockKey: opts.blockKey })
  const generation = { model, session, store, blockSize }
  const server = await startDecoderServer({
    model, modelName, geometryFingerprint, prefixCache: store,
    generate: (job, hooks, signal) => generateLlamaCpp(generation, job, hooks, signal),
    checkRequest: checkLlamaCppRequest,
    maxPositions: context.contextSize,
    healthExtra: () => ({
      engine: 'llama.cpp',
      node_llama_cpp: NODE_LLAMA_CPP_VERSION,
      gguf: resolve(opts.gguf),
      kv_cache_type: context.kvCacheType,
      context_size: context.contextSize,
      flash_attention: context.flashAttention,
      threads: context.threads,
      batch_size: context.batchSize,
      block_size: blockSize,
    }),
    host: opts.host ?? DECODER_DEFAULTS.host,
    port: opts.port ?? DECODER_DEFAULTS.port,
    maxTokens, maxBodyBytes, maxQueue,
    logger: opts.logger,
    apiKey: opts.apiKey,
    redactRoots: [[opts.gguf, 'gguf']],
  })
  return {
    server, model, modelName, geometryFingerprint, context, gguf: resolve(opts.gguf), blockSize,
    close: async () => {
      await server.close()
      await session.dispose()
      await llama.dispose()
      store?.close()
    },
  }
}
