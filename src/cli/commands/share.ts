// `pd-bridge share`: serve a capture root over HTTP until SIGINT or SIGTERM.
import { Command } from 'commander'
import { ConfigError } from '../../errors.ts'
import { startShareServer } from '../../share/index.ts'
import { apiKeyFromEnv, keyRequiredProblem } from '../../http/api-key.ts'

function parsePort (text: string): number {
  if (!/^\d{1,5}$/.test(text) || Number(text) > 65535) throw new ConfigError('--port', `${JSON.stringify(text)} is not a TCP port (0..65535)`)
  return Number(text)
}

/** The share command: prints the base URL on stdout, one JSON log line per request on stderr. */
export const shareCommand = new Command('share')
  .description('serve a capture directory over HTTP (Range, ETag, checksums) for the decoder side to stream')
  .requiredOption('--root <dir>', 'the capture root; nothing outside it is ever served')
  .option('--host <host>', 'interface to listen on', '127.0.0.1')
  .option('--port <n>', 'TCP port, 0 for any free one', '0')
  .action(async (opts: { root: string, host: string, port: string }) => {
    const apiKey = apiKeyFromEnv()
    const keyProblem = keyRequiredProblem(opts.host, apiKey)
    if (keyProblem !== null) throw new ConfigError('--host', keyProblem)
    const server = await startShareServer({ root: opts.root, host: opts.host, port: parsePort(opts.port), apiKey })
    process.stdout.write(`${server.url}\n`)
    await new Promise<void>((resolve) => {
      const stop = (signal: NodeJS.Signals): void => {
        process.off('SIGINT', stop)
        process.off('SIGTERM', stop)
        process.stderr.write(`pd-bridge share: ${signal}, closing\n`)
        server.close().then(resolve, resolve)
      }
      process.on('SIGINT', stop)
      process.on('SIGTERM', stop)
    })
  })
