#!/usr/bin/env node
// Added delay without netem: a userspace TCP relay on the path. Run on the decode host, it listens
// on LISTEN_HOST:LISTEN_PORT and pipes each connection to TARGET_HOST:TARGET_PORT (the prefill
// host's engine or share, across the link), holding every chunk DELAY_MS before sending it on, in
// each direction. It delays chunks as the relay reads them, not packets on the wire (as netem does):
// a chunk may carry many segments, and TCP's acknowledgements on the link itself are not delayed.
// The end of a stream is passed on after the same delay, behind the last chunk. Prints a ready line
// naming its own URL, stops on SIGTERM or SIGINT (or when its supervisor goes).
//
//   node harness/two-hosts/delay-relay.mjs LISTEN_HOST LISTEN_PORT TARGET_HOST TARGET_PORT DELAY_MS
import { createConnection, createServer } from 'node:net'

const [listenHost, listenPortText, targetHost, targetPortText, delayText] = process.argv.slice(2)
const listenPort = Number(listenPortText)
const targetPort = Number(targetPortText)
const delayMs = Number(delayText)
const portOk = (p) => Number.isInteger(p) && p >= 0 && p <= 65535
if (listenHost === undefined || targetHost === undefined || !portOk(listenPort) || !portOk(targetPort) || targetPort === 0 || !Number.isFinite(delayMs) || delayMs < 0) {
  process.stderr.write('usage: delay-relay.mjs LISTEN_HOST LISTEN_PORT TARGET_HOST TARGET_PORT DELAY_MS\n')
  process.exit(2)
}

/**
 * Forward `from` to `to`, each chunk (and the end) DELAY_MS after it was read. Timers of one
 * duration fire in the order they were set, so the order of the chunks is kept.
 */
function delayed (from, to) {
  from.on('data', (chunk) => { setTimeout(() => { if (!to.destroyed) to.write(chunk) }, delayMs) })
  from.on('end', () => { setTimeout(() => { if (!to.destroyed) to.end() }, delayMs) })
}

const open = new Set()
// Half-open allowed on both sockets: one side's end is passed on (after the delay) while the other
// direction still carries its data.
const server = createServer({ allowHalfOpen: true }, (client) => {
  const target = createConnection({ host: targetHost, port: targetPort, allowHalfOpen: true })
  open.add(client)
  client.on('close', () => open.delete(client))
  delayed(client, target)
  delayed(target, client)
  // An error on either side, or one side closed in both directions, ends both (after the delay, so
  // what was read is still sent).
  const end = () => { setTimeout(() => { client.destroy(); target.destroy() }, delayMs) }
  client.on('error', end)
  target.on('error', end)
  client.on('close', end)
  target.on('close', end)
})
server.listen(listenPort, listenHost, () => {
  const port = server.address().port
  process.stdout.write(JSON.stringify({ event: 'ready', url: `http://${listenHost}:${port}`, target: `${targetHost}:${targetPort}`, delayMs }) + '\n')
})
const stop = () => {
  server.close(() => process.exit(0))
  for (const c of open) c.destroy()
}
process.on('SIGTERM', stop)
process.on('SIGINT', stop)
// Started by the stack's supervisor with an IPC channel: when the supervisor goes, so does the relay.
if (typeof process.send === 'function') {
  process.channel?.unref()
  process.once('disconnect', stop)
}
