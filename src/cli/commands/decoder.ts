// `pd-bridge decoder`: the embedded decoder server. Loads the engine once, prints one JSON ready
// line on stdout, logs JSON lines (pino) to --log or stderr, serves until SIGINT or SIGTERM.
import { Command } from 'commander'
import pino from 'pino'
import { DECODER_DEFAULTS, launchDecoder } from '../../engines/decoder/index.ts'
import { launchLlamaCppDecoder, parseKvCacheType } from '../../engines/llama-cpp/decoder/index.ts'
import { ConfigError, PdBridgeError } from '../../errors.ts'
import { apiKeyFromEnv, keyRequiredProblem } from '../../http/api-key.ts'
import { blockKeyFromEnv } from '../../config/block-key.ts'
import { closeOnSignal } from '../until-signal.ts'

function integer (flag: string, min: number, max = Number.MAX_SAFE_INTEGER): (text: string) => number {
  return (text) => {
    if (!/^\d{1,16}$/.test(text) || Number(text) < min || Number(text) > max) {
      throw new ConfigError(flag, `${JSON.stringify(text)} is not an integer in [${min}, ${max}]`)
    }
    return Number(text)
  }
}

const ENGINES = ['ours', 'llama.cpp'] as const
type Engine = typeof ENGINES[number]

function engineName (text: string): Engine {
  if (!(ENGINES as readonly string[]).includes(text)) throw new ConfigError('--engine', `${JSON.stringify(text)} is not one of ${ENGINES.join(', ')}`)
  return text as Engine
}

function kvCacheType (text: string): 'F32' | 'F16' {
  try {
    return parseKvCacheType(text)
  } catch {
    throw new ConfigError('--kv-cache-type', `${JSON.stringify(text)} is not F32 or F16`)
  }
}

interface DecoderOptions {
  engine: Engine
  model: string
  profile: string
  cacheDir?: string
  gguf?: string
  kvCacheType?: 'F32' | 'F16'
  threads?: number
  contextSize?: number
  blockSize: number
  maxCacheBytes?: number
  host: string
  port: number
  modelName?: string
  maxTokens: number
  maxBodyBytes: number
  maxQueue: number
  maxBatch?: number
  batchMemoryBytes?: number
  prefillChunk?: number
  log?: string
}

/** The decoder command. */
export const decoderCommand = new Command('decoder')
  .description('serve a DeepSeek-V4 checkpoint as an OpenAI-compatible decoder with a prefix-cache block store')
  .option('--engine <name>', 'ours (our engine, block store) or llama.cpp (node-llama-cpp on the CPU, a store of sequence states)', engineName, 'ours' as Engine)
  .requiredOption('--model <dir>', 'the checkpoint directory (config.json, safetensors, tokenizer.json); with llama.cpp its tokenizer and config')
  .option('--profile <name>', 'numerics profile (ours)', DECODER_DEFAULTS.profile)
  .option('--cache-dir <dir>', 'the prefix-cache store root (created if absent); required for ours, optional for llama.cpp')
  .option('--gguf <file>', 'llama.cpp: the GGUF of --model (pd-bridge export-gguf)')
  .option('--kv-cache-type <type>', 'llama.cpp: KV cache type F32 (default) or F16', kvCacheType)
  .option('--threads <n>', 'llama.cpp: CPU threads (default 2)', integer('--threads', 1, 256))
  .option('--context-size <n>', 'llama.cpp: context positions (default and most: max_position_embeddings)', integer('--context-size', 2))
  .option('--block-size <n>', 'tokens per cache block', integer('--block-size', 1), DECODER_DEFAULTS.blockSize)
  .option('--max-cache-bytes <n>', 'evict least recently used blocks past this size', integer('--max-cache-bytes', 1))
  .option('--host <host>', 'interface to listen on', DECODER_DEFAULTS.host)
  .option('--port <n>', 'TCP port, 0 for any free one', integer('--port', 0, 65535), DECODER_DEFAULTS.port)
  .option('--model-name <name>', 'served model id, also hashed into block keys (default: the model directory path)')
  .option('--max-tokens <n>', 'most completion tokens per request, and what a request without max_tokens gets', integer('--max-tokens', 1), DECODER_DEFAULTS.maxTokens)
  .option('--max-body-bytes <n>', 'largest request body', integer('--max-body-bytes', 1), DECODER_DEFAULTS.maxBodyBytes)
  .option('--max-queue <n>', 'requests that may wait for a turn (then 429)', integer('--max-queue', 0), DECODER_DEFAULTS.maxQueue)
  .option('--max-batch <n>', `ours: requests decoding at once, their steps batched (default ${DECODER_DEFAULTS.maxBatch})`, integer('--max-batch', 1))
  .option('--batch-memory-bytes <n>', 'ours: bound on the running requests\' estimated cache and step bytes; a request waits until it fits (default: a quarter of the machine\'s memory)', integer('--batch-memory-bytes', 1))
  .option('--prefill-chunk <n>', `ours: most tokens per prefill chunk, the longest others' decoding waits for one prefill (default ${DECODER_DEFAULTS.prefillChunk})`, integer('--prefill-chunk', 1))
  .option('--log <file>', 'write JSON log lines here instead of stderr')
  .action(async (opts: DecoderOptions) => {
    checkEngineFlags(opts)
    const keyProblem = keyRequiredProblem(opts.host, apiKeyFromEnv())
    if (keyProblem !== null) throw new ConfigError('--host', keyProblem)
    const destination = opts.log === undefined ? pino.destination({ fd: 2, sync: true }) : pino.destination({ dest: opts.log, mkdir: true, sync: true })
    const logger = pino({ base: { pid: process.pid }, timestamp: pino.stdTimeFunctions.isoTime }, destination)
    if (opts.engine === 'llama.cpp') {
      await serveLlamaCpp(opts, logger)
      return
    }
    // Read once, like the API key: the block key (PD_BLOCK_KEY, else derived from PD_API_KEY); only whether there is one is shown.
    const blockKey = blockKeyFromEnv()
    const launched = await launchDecoder({
      cacheDir: opts.cacheDir!,
      modelDir: opts.model,
      profile: opts.profile,
      blockSize: opts.blockSize,
      maxCacheBytes: opts.maxCacheBytes,
      host: opts.host,
      port: opts.port,
      modelName: opts.modelName,
      maxTokens: opts.maxTokens,
      maxBodyBytes: opts.maxBodyBytes,
      maxQueue: opts.maxQueue,
      maxBatch: opts.maxBatch,
      batchMemoryBytes: opts.batchMemoryBytes,
      prefillChunk: opts.prefillChunk,
      logger,
      apiKey: apiKeyFromEnv(),
      blockKey,
    })
    const ready = {
      event: 'ready',
      url: launched.server.url,
      model: launched.modelName,
      profile: launched.model.profileName,
      cache_dir: opts.cacheDir,
      block_size: opts.blockSize,
      geometry_fingerprint: launched.geometryFingerprint,
      // Whether blocks are authenticated (PD_BLOCK_KEY or PD_API_KEY set), never the key.
      blocks_authenticated: blockKey !== undefined,
      pid: process.pid,
    }
    logger.info(ready, 'decoder ready')
    process.stdout.write(JSON.stringify(ready) + '\n')
    await closeOnSignal(logger, () => launched.server.close())
    logger.info({ event: 'closed' }, 'decoder closed')
  })

/** Flags that belong to one engine are refused with the other, so a typo never silently does nothing. */
function checkEngineFlags (opts: DecoderOptions): void {
  if (opts.engine === 'ours') {
    if (opts.cacheDir === undefined) throw new PdBridgeError('--cache-dir is required with --engine ours')
    const llamaOnly = ([['--gguf', opts.gguf], ['--kv-cache-type', opts.kvCacheType], ['--threads', opts.threads], ['--context-size', opts.contextSize]] as const).filter(([, v]) => v !== undefined).map(([f]) => f)
    if (llamaOnly.length > 0) throw new PdBridgeError(`${llamaOnly.join(', ')}: only with --engine llama.cpp`)
    return
  }
  const oursOnly = ([['--max-batch', opts.maxBatch], ['--batch-memory-bytes', opts.batchMemoryBytes], ['--prefill-chunk', opts.prefillChunk]] as const).filter(([, v]) => v !== undefined).map(([f]) => f)
  if (oursOnly.length > 0) throw new PdBridgeError(`${oursOnly.join(', ')}: only with --engine ours (the llama.cpp decoder runs one request at a time)`)
  if (opts.gguf === undefined) throw new PdBridgeError('--gguf is required with --engine llama.cpp (make one with pd-bridge export-gguf --model DIR --out FILE.gguf)')
  if (opts.profile !== DECODER_DEFAULTS.profile) throw new PdBridgeError('--profile: only with --engine ours (llama.cpp runs its own arithmetic)')
  if (opts.maxCacheBytes !== undefined) throw new PdBridgeError('--max-cache-bytes: only with --engine ours (the llama.cpp state store does not evict)')
}

async function serveLlamaCpp (opts: DecoderOptions, logger: pino.Logger): Promise<void> {
  const blockKey = blockKeyFromEnv()
  const launched = await launchLlamaCppDecoder({
    modelDir: opts.model,
    gguf: opts.gguf!,
    cacheDir: opts.cacheDir,
    blockSize: opts.blockSize,
    kvCacheType: opts.kvCacheType,
    threads: opts.threads,
    contextSize: opts.contextSize,
    host: opts.host,
    port: opts.port,
    modelName: opts.modelName,
    maxTokens: opts.maxTokens,
    maxBodyBytes: opts.maxBodyBytes,
    maxQueue: opts.maxQueue,
    logger,
    apiKey: apiKeyFromEnv(),
    blockKey,
  })
  const ready = {
    event: 'ready',
    url: launched.server.url,
    model: launched.modelName,
    profile: launched.model.profileName,
    cache_dir: opts.cacheDir ?? null,
    block_size: launched.blockSize,
    geometry_fingerprint: launched.geometryFingerprint,
    blocks_authenticated: blockKey !== undefined,
    pid: process.pid,
    engine: 'llama.cpp',
    gguf: launched.gguf,
    kv_cache_type: launched.context.kvCacheType,
    context_size: launched.context.contextSize,
  }
  logger.info(ready, 'decoder ready')
  process.stdout.write(JSON.stringify(ready) + '\n')
  await closeOnSignal(logger, () => launched.close())
  logger.info({ event: 'closed' }, 'decoder closed')
}
