// `Expect: 100-continue` with a body over the limit: answered 413 before any body byte is read.
// Without a 'checkContinue' listener Node answers every such request `100 Continue` itself, so the
// client sends the whole body before the size check can refuse it; with this one, a declared
// Content-Length over the limit gets the refusal instead, and the connection closes unread.
import type { IncomingMessage, Server, ServerResponse } from 'node:http'

/** The refusal a server answers with: its own error body and headers. */
export interface ContinueRefusal {
  body: string
  headers?: Record<string, string>
}

/** On `server`: refuse `Expect: 100-continue` requests declaring more than `maxBodyBytes` (per request, when a function); let the rest continue. */
export function refuseOversizedContinue (server: Server, maxBodyBytes: number | ((req: IncomingMessage) => number), refusal: (declared: number, limit: number) => ContinueRefusal): void {
  server.on('checkContinue', (req: IncomingMessage, res: ServerResponse) => {
    const declared = Number(req.headers['content-length'])
    const limit = typeof maxBodyBytes === 'number' ? maxBodyBytes : maxBodyBytes(req)
    if (Number.isFinite(declared) && declared > limit) {
      const r = refusal(declared, limit)
      res.shouldKeepAlive = false
      res.writeHead(413, { ...r.headers, 'content-type': 'application/json; charset=utf-8', 'content-length': String(Buffer.byteLength(r.body)), connection: 'close' })
      res.end(r.body)
      return
    }
    res.writeContinue()
    server.emit('request', req, res)
  })
}
