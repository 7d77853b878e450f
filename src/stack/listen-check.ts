// Whether the front door's address is free, asked before any child starts: a busy port found
// after the prefill engine, share and decoder are up costs their start and reads as their failure.
import { createServer } from 'node:net'
import { StackError } from './errors.ts'

/** Resolve when host:port can be listened on (port 0 always can); a StackError naming it otherwise. */
export async function checkListenFree (host: string, port: number): Promise<void> {
  if (port === 0) return
  await new Promise<void>((resolve, reject) => {
    const probe = createServer()
    probe.once('error', (err: NodeJS.ErrnoException) => {
      const why = err.code === 'EADDRINUSE' ? 'is in use by another process' : err.code === 'EADDRNOTAVAIL' ? 'is not an address of this machine' : err.message
      reject(new StackError(`the front door's address ${host}:${port} ${why}; pick another with --port (or listen.port in front.json), or stop what holds it`))
    })
    probe.listen({ host, port, exclusive: true }, () => probe.close(() => resolve()))
  })
}
