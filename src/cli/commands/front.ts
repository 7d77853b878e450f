// `pd-bridge front`: the front door. Reads the config (file + PD_* variables), prints one JSON
// ready line with the URL on stdout, logs pino JSON lines to log.file (or stderr), and serves
// until SIGINT or SIGTERM.
import { Command } from 'commander'
import pino from 'pino'
import { loadFrontConfig } from '../../config/index.ts'
import { decoderKind } from '../../decoders/registry.ts'
import { ConfigError } from '../../errors.ts'
import { startFrontDoor } from '../../front/index.ts'
import { apiKeyFromEnv, keyRequiredProblem } from '../../http/api-key.ts'
import { blockKeyFromEnv } from '../../config/block-key.ts'
import { closeOnSignal } from '../until-signal.ts'

function parsePort (text: string): number {
  if (!/^\d{1,5}$/.test(text) || Number(text) > 65535) throw new ConfigError('--port', `${JSON.stringify(text)} is not a TCP port (0..65535)`)
  return Number(text)
}

/** The front command. */
export const frontCommand = new Command('front')
  .description('run the OpenAI-compatible front door: route, bridge cold long prompts through the prefill engine, fall back to the decoder, report a verdict')
  .option('--config <file>', 'the JSON config file (docs/configuration.md); PD_* variables override it')
  .option('--port <n>', 'listen on this port (overrides listen.port and PD_PORT; 0 for any free one)', parsePort)
  .option('--host <host>', 'listen on this interface (overrides listen.host and PD_HOST)')
  .action(async (opts: { config?: string, port?: number, host?: string }) => {
    const loaded = await loadFrontConfig({ file: opts.config })
    const config = loaded.config
    // The decoder kind is the registry's to know: an unknown one is refused here, naming where it was set.
    decoderKind(config.decoder.engine, 'decoder.engine', loaded.env.includes('PD_DECODER_ENGINE') ? 'environment' : loaded.file)
    if (opts.port !== undefined) config.listen.port = opts.port
    if (opts.host !== undefined) config.listen.host = opts.host
    const destination = config.log.file === undefined ? pino.destination({ fd: 2, sync: true }) : pino.destination({ dest: config.log.file, mkdir: true, sync: true })
    const logger = pino({ level: config.log.level, base: { pid: process.pid, component: 'front' }, timestamp: pino.stdTimeFunctions.isoTime }, destination)
    // PD_API_KEY is read here, not through the config: a secret stays out of files and the ready line.
    const apiKey = apiKeyFromEnv()
    const keyProblem = keyRequiredProblem(config.listen.host, apiKey)
    if (keyProblem !== null) throw new ConfigError('listen.host', keyProblem, loaded.file)
    // The block key likewise (PD_BLOCK_KEY, else derived from PD_API_KEY): only whether there is one is ever shown.
    const blockKey = blockKeyFromEnv()
    const front = await startFrontDoor({ config, logger, apiKey, blockKey: blockKey?.key })
    const ready = {
      event: 'ready',
      url: front.url,
      pid: process.pid,
      config: loaded.file ?? null,
      env: loaded.env,
      decoder: config.decoder.url,
      prefill: config.prefill.url ?? null,
      share: config.share.url ?? null,
      capture_dir: config.capture.dir ?? null,
      block_size: config.decoder.blockSize,
      routing: config.routing,
      capture_retain: config.capture.retain,
      api_key: apiKey !== undefined,
      blocks_authenticated: blockKey !== undefined,
    }
    logger.info(ready, 'front door ready')
    process.stdout.write(JSON.stringify(ready) + '\n')
    await closeOnSignal(logger, () => front.close())
    logger.info({ event: 'closed' }, 'front door closed')
  })
