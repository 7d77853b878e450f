#!/usr/bin/env node
// A bulk TCP transfer across the link, to know what the link carries on this machine (CPU
// included) before anything of the bridge is timed over it. `send` runs on the prefill host and
// serves BYTES to one connection, then exits; `receive` runs on the decode host, reads it all and
// prints {"bytes","ms","bitsPerSecond"}.
//
//   node link-probe.mjs send HOST PORT BYTES      (prints "listening" when ready)
//   node link-probe.mjs receive HOST PORT
import { createConnection, createServer } from 'node:net'

const [mode, host, portText, bytesText] = process.argv.slice(2)
const port = Number(portText)
// Bounded: one connection, at most 4 GiB, and 60 s whatever happens.
setTimeout(() => { process.stderr.write('link-probe: gave up after 60 s\n'); process.exit(1) }, 60_000).unref()
if (mode === 'send') {
  const total = Math.min(Number(bytesText), 4 * 1024 ** 3)
  const chunk = Buffer.alloc(1 << 20, 0x5a)
  const server = createServer((socket) => {
    server.close()
    let sent = 0
    const pump = () => {
      while (sent < total) {
        const n = Math.min(chunk.length, total - sent)
        sent += n
        if (!socket.write(n === chunk.length ? chunk : chunk.subarray(0, n))) return socket.once('drain', pump)
      }
      socket.end()
    }
    socket.on('error', () => process.exit(1))
    pump()
  })
  server.listen(port, host, () => process.stdout.write('listening\n'))
}
else if (mode === 'receive') {
  const started = performance.now()
  let bytes = 0
  createConnection({ host, port })
    .on('data', (d) => { bytes += d.length })
    .on('end', () => {
      const ms = performance.now() - started
      process.stdout.write(JSON.stringify({ bytes, ms, bitsPerSecond: (bytes * 8) / (ms / 1000) }) + '\n')
      process.exit(0)
    })
    .on('error', (e) => { process.stderr.write(`link-probe: ${e.message}\n`); process.exit(1) })
}
else {
  process.stderr.write('usage: link-probe.mjs send HOST PORT BYTES | receive HOST PORT\n')
  process.exit(2)
}
