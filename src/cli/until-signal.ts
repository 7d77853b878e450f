// How a long-running command ends: the first SIGINT/SIGTERM closes the server gracefully, a second
// one while closing exits at once.
import type { Logger } from 'pino'

/** Resolve once `close` has finished after the first SIGINT or SIGTERM (a failed close is logged). */
export function closeOnSignal (logger: Logger, close: () => Promise<void>): Promise<void> {
  return new Promise<void>((resolve) => {
    const stop = (signal: NodeJS.Signals): void => {
      process.off('SIGINT', stop)
      process.off('SIGTERM', stop)
      process.once('SIGINT', () => process.exit(130))
      process.once('SIGTERM', () => process.exit(143))
      logger.info({ event: 'shutdown', signal }, `${signal}, closing`)
      close().then(resolve, (err: unknown) => {
        logger.error({ err }, 'close failed')
        resolve()
      })
    }
    process.on('SIGINT', stop)
    process.on('SIGTERM', stop)
  })
}
