// `pd-bridge decoder`: the embedded decoder server. Loads the engine once, prints one JSON ready
// line on stdout, logs JSON lines (pino) to --log or stderr, serves until SIGINT or SIGTERM.
import { Command } from 'commander'
import pino from 'pino'
import type { DecoderCommandOptions } from '../../decoders/kind.ts'
import { checkDecoderFlags, decoderKind, DECODER_KINDS, DEFAULT_DECODER_KIND } from '../../decoders/registry.ts'
import { DECODER_DEFAULTS } from '../../engines/decoder/index.ts'
import { parseKvCacheType } from '../../engines/llama-cpp/decoder/index.ts'
import { ConfigError } from '../../errors.ts'
import { apiKeyFromEnv, keyRequiredProblem } from '../../http/api-key.ts'
import { blockKeyFromEnv } from '../../config/block-key.ts'
import { parseBlockSize } from '../../config/block-size.ts'
import { closeOnSignal } from '../until-signal.ts'

function integer (flag: string, min: number, max = Number.MAX_SAFE_INTEGER): (text: string) => number {
  return (text) => {
    if (!/^\d{1,16}$/.test(text) || Number(text) < min || Number(text) > max) {
      throw new ConfigError(flag, `${JSON.stringify(text)} is not an integer in [${min}, ${max}]`)
    }
    return Number(text)
  }
}

function engineName (text: string): string {
  return decoderKind(text, '--engine').name
}

function kvCacheType (text: string): 'F32' | 'F16' {
  try {
    return parseKvCacheType(text)
  } catch {
    throw new ConfigError('--kv-cache-type', `${JSON.stringify(text)} is not F32 or F16`)
  }
}

/** The decoder command. */
export const decoderCommand = new Command('decoder')
  .description('serve a DeepSeek-V4 checkpoint as an OpenAI-compatible decoder with a prefix-cache block store')
  .option('--engine <name>', `the decoder kind: ${DECODER_KINDS.map((k) => `${k.name} (${k.summary})`).join('; ')}`, engineName, DEFAULT_DECODER_KIND.name)
  .requiredOption('--model <dir>', 'the checkpoint directory (config.json, safetensors, tokenizer.json); with llama.cpp its tokenizer and config')
  .option('--profile <name>', 'numerics profile (ours)', DECODER_DEFAULTS.profile)
  .option('--cache-dir <dir>', 'the prefix-cache store root (created if absent); required for ours, optional for llama.cpp')
  .option('--gguf <file>', 'llama.cpp: the GGUF of --model (pd-bridge export-gguf)')
  .option('--kv-cache-type <type>', 'llama.cpp: KV cache type F32 (default) or F16', kvCacheType)
  .option('--threads <n>', 'llama.cpp: CPU threads (default 2)', integer('--threads', 1, 256))
  .option('--context-size <n>', 'llama.cpp: context positions (default and most: max_position_embeddings)', integer('--context-size', 2))
  .option('--block-size <n>', 'tokens per cache block (a block store\'s: a multiple of every pool ratio of the model)', (t: string) => parseBlockSize(t), DECODER_DEFAULTS.blockSize)
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
  .action(async (opts: DecoderCommandOptions) => {
    const kind = decoderKind(opts.engine, '--engine')
    checkDecoderFlags(kind, opts)
    const keyProblem = keyRequiredProblem(opts.host, apiKeyFromEnv())
    if (keyProblem !== null) throw new ConfigError('--host', keyProblem)
    const destination = opts.log === undefined ? pino.destination({ fd: 2, sync: true }) : pino.destination({ dest: opts.log, mkdir: true, sync: true })
    const logger = pino({ base: { pid: process.pid }, timestamp: pino.stdTimeFunctions.isoTime }, destination)
    // Read once, like the API key: the block key (PD_BLOCK_KEY, else derived from PD_API_KEY); only whether there is one is shown.
    const blockKey = blockKeyFromEnv()
    const launched = await kind.command.launch(opts, { logger, apiKey: apiKeyFromEnv(), blockKey })
    const ready = { event: 'ready', ...launched.ready }
    logger.info(ready, 'decoder ready')
    process.stdout.write(JSON.stringify(ready) + '\n')
    await closeOnSignal(logger, launched.close)
    logger.info({ event: 'closed' }, 'decoder closed')
  })
