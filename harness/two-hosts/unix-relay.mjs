#!/usr/bin/env node
// The client's way in to the decode host: run inside the decode host's namespace, it listens on a
// Unix socket (the file system is shared across network namespaces; the network is not) and pipes
// each connection to host:port there. Nothing crosses the shaped link. Prints a ready line naming
// the target, stops on SIGTERM or SIGINT.
//
//   node harness/two-hosts/unix-relay.mjs SOCKET HOST PORT
import { createConnection, createServer } from 'node:net'
import { rmSync } from 'node:fs'

const [socketPath, host, portText] = process.argv.slice(2)
const port = Number(portText)
if (socketPath === undefined || host === undefined || !Number.isInteger(port) || port < 1 || port > 65535) {
  process.stderr.write('usage: unix-relay.mjs SOCKET HOST PORT\n')
  process.exit(2)
}
const open = new Set()
const server = createServer((client) => {
  const target = createConnection({ host, port })
  open.add(client)
  client.on('close', () => open.delete(client))
  client.pipe(target).pipe(client)
  const end = () => { client.destroy(); target.destroy() }
  client.on('error', end)
  target.on('error', end)
})
rmSync(socketPath, { force: true })
server.listen(socketPath, () => {
  process.stdout.write(JSON.stringify({ event: 'ready', url: `http://${host}:${port}`, socket: socketPath }) + '\n')
})
const stop = () => {
  server.close(() => { rmSync(socketPath, { force: true }); process.exit(0) })
  for (const c of open) c.destroy()
}
process.on('SIGTERM', stop)
process.on('SIGINT', stop)
// Started by the stack's supervisor with an IPC channel: when the supervisor goes, so does the relay.
if (typeof process.send === 'function') {
  process.channel?.unref()
  process.once('disconnect', stop)
}
