// A raw HTTP/1.1 exchange over a socket: the request target goes out byte for byte as given (fetch
// and node:http would normalize or refuse odd spellings first), and the answer comes back as text.
import { connect } from 'node:net'

/** What came back: the status, the header lines (lower-case names) and the body, all as received. */
export interface RawAnswer {
  status: number
  head: string
  headers: Record<string, string>
  body: string
  /** Everything received, for checks over the whole answer. */
  text: string
}

function parse (text: string): RawAnswer {
  const end = text.indexOf('\r\n\r\n')
  const head = end === -1 ? text : text.slice(0, end)
  const body = end === -1 ? '' : text.slice(end + 4)
  const [statusLine, ...lines] = head.split('\r\n')
  const headers: Record<string, string> = {}
  for (const line of lines) {
    const i = line.indexOf(':')
    if (i > 0) headers[line.slice(0, i).trim().toLowerCase()] = line.slice(i + 1).trim()
  }
  const whole = headers['transfer-encoding'] === 'chunked' ? dechunk(body) : body
  return { status: Number(/^HTTP\/1\.[01] (\d{3})/.exec(statusLine)?.[1] ?? 0), head, headers, body: whole, text }
}

/** A chunked body's bytes (RFC 9112 7.1), extensions and trailers ignored. */
function dechunk (raw: string): string {
  let out = ''
  let at = 0
  for (;;) {
    const eol = raw.indexOf('\r\n', at)
    if (eol === -1) return out
    const size = parseInt(raw.slice(at, eol).split(';')[0], 16)
    if (!(size > 0)) return out
    out += raw.slice(eol + 2, eol + 2 + size)
    at = eol + 2 + size + 2
  }
}

/** Send `method target` to `baseUrl` with `headers` and `body`, read until the server closes, parse. */
export async function rawRequest (baseUrl: string, method: string, target: string, headers: Record<string, string> = {}, body = ''): Promise<RawAnswer> {
  const url = new URL(baseUrl)
  const lines = [`${method} ${target} HTTP/1.1`, `Host: ${url.host}`, 'Connection: close']
  for (const [k, v] of Object.entries(headers)) lines.push(`${k}: ${v}`)
  if (body !== '' || method === 'POST' || method === 'PUT') lines.push(`Content-Length: ${Buffer.byteLength(body)}`)
  const socket = connect(Number(url.port), url.hostname)
  const chunks: Buffer[] = []
  return await new Promise<RawAnswer>((resolve, reject) => {
    socket.on('data', (c: Buffer) => chunks.push(c))
    socket.on('error', (e: NodeJS.ErrnoException) => {
      // A server may reset after answering a refused request: what came before the reset counts.
      if (chunks.length > 0 && e.code === 'ECONNRESET') resolve(parse(Buffer.concat(chunks).toString('latin1')))
      else reject(e)
    })
    socket.on('end', () => resolve(parse(Buffer.concat(chunks).toString('latin1'))))
    socket.write(Buffer.from(lines.join('\r\n') + '\r\n\r\n' + body, 'latin1'))
  })
}

/**
 * Send headers only, with `Expect: 100-continue` and a declared Content-Length, and return the first
 * answer the server sends (the interim `100 Continue`, or a final status) without sending a body byte.
 */
export async function expectContinue (baseUrl: string, method: string, target: string, contentLength: number, headers: Record<string, string> = {}): Promise<RawAnswer & { bodyBytesSent: 0 }> {
  const url = new URL(baseUrl)
  const lines = [`${method} ${target} HTTP/1.1`, `Host: ${url.host}`, 'Content-Type: application/json', 'Expect: 100-continue', `Content-Length: ${contentLength}`]
  for (const [k, v] of Object.entries(headers)) lines.push(`${k}: ${v}`)
  const socket = connect(Number(url.port), url.hostname)
  let received = ''
  return await new Promise((resolve, reject) => {
    const done = (): void => {
      socket.destroy()
      resolve({ ...parse(received), bodyBytesSent: 0 })
    }
    socket.on('data', (c: Buffer) => {
      received += c.toString('latin1')
      const end = received.indexOf('\r\n\r\n')
      if (end === -1) return
      // An interim 100 is all there is to read; a final answer is read to its declared length.
      if (received.startsWith('HTTP/1.1 100')) return done()
      const length = Number(/\r\ncontent-length: *(\d+)/i.exec(received.slice(0, end))?.[1] ?? 0)
      if (received.length - end - 4 >= length) done()
    })
    socket.on('end', done)
    socket.on('error', reject)
    socket.write(lines.join('\r\n') + '\r\n\r\n')
  })
}
