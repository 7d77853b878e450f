// `pd-bridge decoder`: the embedded decoder server. Loads the engine once, prints one JSON ready
// line on stdout, logs JSON lines (pino) to --log or stderr, serves until SIGINT or SIGTERM.
import { Command } from 'commander'
import pino from 'pino'
import { DECODER_DEFAULTS, launchDecoder } from '../../engines/decoder/index.ts'
import { ConfigError } from '../../errors.ts'
import { apiKeyFromEnv } from '../../http/api-key.ts'
import { closeOnSignal } from '../until-signal.ts'

function integer (flag: string, min: number, max = Number.MAX_SAFE_INTEGER): (text: string) => number {
  return (text) => {
    if (!/^\d{1,16}$/.test(text) || Number(text) < min || Number(text) > max) {
      throw new ConfigError(flag, `${JSON.stringify(text)} is not an integer in [${min}, ${max}]`)
    }
    return Number(text)
  }
}

interface DecoderOptions {
  model: string
  profile: string
  cacheDir: string
  blockSize: number
  maxCacheBytes?: number
  host: string
  port: number
  modelName?: string
  maxTokens: number
  maxBodyBytes: number
  maxQueue: number
  log?: string
}

/** The decoder command. */
export const decoderCommand = new Command('decoder')
  .description('serve a DeepSeek-V4 checkpoint as an OpenAI-compatible decoder with a prefix-cache block store')
  .requiredOption('--model <dir>', 'the checkpoint directory (config.json, safetensors, tokenizer.json)')
  .option('--profile <name>', 'numerics profile', DECODER_DEFAULTS.profile)
  .requiredOption('--cache-dir <dir>', 'the prefix-cache block store root (created if absent)')
  .option('--block-size <n>', 'tokens per cache block', integer('--block-size', 1), DECODER_DEFAULTS.blockSize)
  .option('--max-cache-bytes <n>', 'evict least recently used blocks past this size', integer('--max-cache-bytes', 1))
  .option('--host <host>', 'interface to listen on', DECODER_DEFAULTS.host)
  .option('--port <n>', 'TCP port, 0 for any free one', integer('--port', 0, 65535), DECODER_DEFAULTS.port)
  .option('--model-name <name>', 'served model id, also hashed into block keys (default: the model directory path)')
  .option('--max-tokens <n>', 'most completion tokens per request, and what a request without max_tokens gets', integer('--max-tokens', 1), DECODER_DEFAULTS.maxTokens)
  .option('--max-body-bytes <n>', 'largest request body', integer('--max-body-bytes', 1), DECODER_DEFAULTS.maxBodyBytes)
  .option('--max-queue <n>', 'requests that may wait behind the running one (then 429)', integer('--max-queue', 0), DECODER_DEFAULTS.maxQueue)
  .option('--log <file>', 'write JSON log lines here instead of stderr')
  .action(async (opts: DecoderOptions) => {
    const destination = opts.log === undefined ? pino.destination({ fd: 2, sync: true }) : pino.destination({ dest: opts.log, mkdir: true, sync: true })
    const logger = pino({ base: { pid: process.pid }, timestamp: pino.stdTimeFunctions.isoTime }, destination)
    const launched = await launchDecoder({
      modelDir: opts.model,
      profile: opts.profile,
      cacheDir: opts.cacheDir,
      blockSize: opts.blockSize,
      maxCacheBytes: opts.maxCacheBytes,
      host: opts.host,
      port: opts.port,
      modelName: opts.modelName,
      maxTokens: opts.maxTokens,
      maxBodyBytes: opts.maxBodyBytes,
      maxQueue: opts.maxQueue,
      logger,
      apiKey: apiKeyFromEnv(),
    })
    const ready = {
      event: 'ready',
      url: launched.server.url,
      model: launched.modelName,
      profile: launched.model.profileName,
      cache_dir: opts.cacheDir,
      block_size: opts.blockSize,
      geometry_fingerprint: launched.geometryFingerprint,
      pid: process.pid,
    }
    logger.info(ready, 'decoder ready')
    process.stdout.write(JSON.stringify(ready) + '\n')
    await closeOnSignal(logger, () => launched.server.close())
    logger.info({ event: 'closed' }, 'decoder closed')
  })
