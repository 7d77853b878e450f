// The capture share: a node:http server that serves capture manifests and layer files from one
// root directory, with single byte ranges, strong ETags and the manifest's checksums, and nothing else.
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'
import { realpath, stat } from 'node:fs/promises'
import { join } from 'node:path'
import { pipeline } from 'node:stream/promises'
import { ConfigError } from '../errors.ts'
import { MANIFEST_FILE, parseManifest, sha256Hex } from '../wire/manifest.ts'
import { routeTarget } from './route.ts'
import { decideRange } from './range.ts'
import { etagFromStat, ifNoneMatchHits, ifRangeAllows } from './conditional.ts'
import { openInsideRoot } from './open-inside.ts'
import { preferredWait, ShareWaits } from './wait.ts'
import { bearerMatches, UNAUTHORIZED_MESSAGE } from '../http/api-key.ts'

/** Receives one JSON line per finished request (no trailing newline). */
export type ShareLogger = (line: string) => void

/** Options of `startShareServer`. */
export interface ShareServerOptions {
  /** The capture root; only files under it (after resolving symlinks) are ever served. */
  root: string
  /** Interface to listen on; loopback unless told otherwise. */
  host?: string
  /** TCP port; 0 picks a free one. */
  port?: number
  /** Where request log lines go; defaults to stderr. */
  log?: ShareLogger
  /** How long close() lets in-flight responses finish before cutting them, in ms. */
  closeGraceMs?: number
  /** PD_API_KEY: every capture file needs `Authorization: Bearer <key>` (401 otherwise); /health stays open (it says only ok). */
  apiKey?: string
}

/** A running share server. */
export interface ShareServer {
  /** Base URL, e.g. `http://127.0.0.1:40123` (no trailing slash). */
  url: string
  /** The port actually bound. */
  port: number
  /** Stop accepting, let in-flight responses finish (up to closeGraceMs), then resolve. */
  close: () => Promise<void>
}

/** One request's log record. */
interface RequestLog {
  time: string
  method: string
  target: string
  status: number
  bytes: number
  ms: number
  range?: string
  reason?: string
  complete?: boolean
}

/** Start serving `root` over HTTP. Refuses a root that does not exist or is not a directory. */
export async function startShareServer (options: ShareServerOptions): Promise<ShareServer> {
  const host = options.host ?? '127.0.0.1'
  const port = options.port ?? 0
  if (!Number.isInteger(port) || port < 0 || port > 65535) throw new ConfigError('port', `${port} is not a TCP port (0..65535)`)
  const realRoot = await resolveRoot(options.root)
  const log = options.log ?? ((line: string) => { process.stderr.write(line + '\n') })
  const waits = new ShareWaits()
  const server = createServer((req, res) => { void handle(realRoot, req, res, log, options.apiKey, waits) })
  server.on('clientError', (err: NodeJS.ErrnoException, socket) => {
    // Requests Node's parser rejects (raw NUL or spaces in the target, bad headers) never reach
    // the handler; answer 400 and log them like any other refusal.
    if (err.code === 'ECONNRESET' || !socket.writable) {
      socket.destroy()
      return
    }
    const [status, text] = err.code === 'HPE_HEADER_OVERFLOW'
      ? [431, 'Request Header Fields Too Large']
      : err.code === 'ERR_HTTP_REQUEST_TIMEOUT' ? [408, 'Request Timeout'] : [400, 'Bad Request']
    log(JSON.stringify({ time: new Date().toISOString(), method: '', target: '', status, bytes: 0, ms: 0, reason: `unparsable request: ${err.code ?? err.message}` }))
    socket.end(`HTTP/1.1 ${status} ${text}\r\nConnection: close\r\nContent-Length: 0\r\n\r\n`)
  })
  await listen(server, host, port)
  const address = server.address() as AddressInfo
  const shownHost = address.family === 'IPv6' ? `[${address.address}]` : address.address
  return {
    url: `http://${shownHost}:${address.port}`,
    port: address.port,
    close: async () => {
      waits.close()
      await closeServer(server, options.closeGraceMs ?? 1000)
    },
  }
}

async function resolveRoot (root: string): Promise<string> {
  try {
    const real = await realpath(root)
    if (!(await stat(real)).isDirectory()) throw new ConfigError('root', 'is not a directory', root)
    return real
  }
  catch (e) {
    if (e instanceof ConfigError) throw e
    const code = (e as NodeJS.ErrnoException).code
    throw new ConfigError('root', code === 'ENOENT' ? 'no such directory' : `cannot be used: ${code ?? (e as Error).message}`, root)
  }
}

function listen (server: Server, host: string, port: number): Promise<void> {
  return new Promise((resolve, reject) => {
    server.once('error', (e: NodeJS.ErrnoException) => {
      if (e.code === 'EADDRINUSE') reject(new ConfigError('port', `${port} on ${host} is already in use`))
      else if (e.code === 'EACCES') reject(new ConfigError('port', `${port} on ${host} needs privileges this process lacks`))
      else reject(new ConfigError('host', `cannot listen on ${host}:${port}: ${e.code ?? e.message}`))
    })
    server.listen(port, host, () => resolve())
  })
}

function closeServer (server: Server, graceMs: number): Promise<void> {
  return new Promise((resolve) => {
    const cut = setTimeout(() => server.closeAllConnections(), graceMs)
    server.close(() => {
      clearTimeout(cut)
      resolve()
    })
    server.closeIdleConnections()
  })
}

async function handle (realRoot: string, req: IncomingMessage, res: ServerResponse, log: ShareLogger, apiKey: string | undefined, waits: ShareWaits): Promise<void> {
  const started = performance.now()
  const record: RequestLog = {
    time: new Date().toISOString(),
    method: req.method ?? '',
    target: (req.url ?? '').slice(0, 256),
    status: 0,
    bytes: 0,
    ms: 0,
  }
  if (req.headers.range !== undefined) record.range = req.headers.range.slice(0, 128)
  res.on('close', () => {
    record.status = res.statusCode
    record.ms = Math.round((performance.now() - started) * 1000) / 1000
    record.complete = res.writableFinished
    log(JSON.stringify(record))
  })
  try {
    await respond(realRoot, req, res, record, apiKey, waits)
  }
  catch (e) {
    record.reason = `internal error: ${(e as Error).message}`
    if (!res.headersSent) sendJson(req, res, record, 500, 'internal error')
    else res.destroy()
  }
}

async function respond (realRoot: string, req: IncomingMessage, res: ServerResponse, record: RequestLog, apiKey: string | undefined, waits: ShareWaits): Promise<void> {
  const route = routeTarget(req.url ?? '')
  if (route.kind === 'refused') return sendJson(req, res, record, route.status, route.reason)
  // Before the method and the file system: without the key nothing about the root is told.
  if (route.kind !== 'health' && apiKey !== undefined && !bearerMatches(req.headers.authorization, apiKey)) {
    res.setHeader('WWW-Authenticate', 'Bearer')
    return sendJson(req, res, record, 401, UNAUTHORIZED_MESSAGE)
  }
  if (req.method !== 'GET' && req.method !== 'HEAD') {
    res.setHeader('Allow', 'GET, HEAD')
    return sendJson(req, res, record, 405, `method ${req.method ?? ''} not allowed; the share is read-only`)
  }
  if (route.kind === 'health') return sendJson(req, res, record, 200, undefined, { status: 'ok' })
  const waited = await waitWhileUnchanged(realRoot, route.requestId, route.file, req, res, waits)
  if (res.destroyed) return
  if (waited !== undefined) res.setHeader('Preference-Applied', `wait=${waited}`)
  const opened = await openInsideRoot(realRoot, route.requestId, route.file)
  if (opened.kind === 'refused') return sendJson(req, res, record, opened.status, opened.reason)
  const { handle, stat } = opened
  let streaming = false
  try {
    const isManifest = route.file === MANIFEST_FILE
    // The manifest is small and replaced by rename: read it whole from the open handle, so the
    // bytes, their checksum and the ETag all describe the same version.
    const buffer = isManifest ? await handle.readFile() : undefined
    const sha = buffer !== undefined ? sha256Hex(buffer) : await listedChecksum(realRoot, route.requestId, route.file)
    const etag = etagFromStat(stat)
    const size = Number(stat.size)
    res.setHeader('ETag', etag)
    res.setHeader('Last-Modified', new Date(Number(stat.mtimeMs)).toUTCString())
    res.setHeader('Accept-Ranges', 'bytes')
    res.setHeader('Cache-Control', 'no-cache')
    if (sha !== undefined) res.setHeader('X-Content-SHA256', sha)
    if (ifNoneMatchHits(req.headers['if-none-match'], etag)) {
      res.statusCode = 304
      res.end()
      return
    }
    const useRange = req.headers.range !== undefined && ifRangeAllows(single(req.headers['if-range']), etag)
    const decision = useRange ? decideRange(req.headers.range, size) : { kind: 'full' as const }
    if (decision.kind === 'unsatisfiable') {
      res.setHeader('Content-Range', `bytes */${size}`)
      return sendJson(req, res, record, 416, decision.reason)
    }
    const start = decision.kind === 'partial' ? decision.start : 0
    const end = decision.kind === 'partial' ? decision.end : size - 1
    res.statusCode = decision.kind === 'partial' ? 206 : 200
    if (decision.kind === 'partial') res.setHeader('Content-Range', `bytes ${start}-${end}/${size}`)
    res.setHeader('Content-Type', isManifest ? 'application/json' : 'application/octet-stream')
    res.setHeader('Content-Length', end - start + 1)
    if (req.method === 'HEAD' || size === 0) {
      res.end()
      return
    }
    if (buffer !== undefined) {
      record.bytes = end - start + 1
      res.end(buffer.subarray(start, end + 1))
      return
    }
    const stream = handle.createReadStream({ start, end, autoClose: true })
    streaming = true
    stream.on('data', (chunk: Buffer | string) => { record.bytes += chunk.length })
    // A client that hangs up mid-file is normal (it will resume with Range); the log says so.
    await pipeline(stream, res).catch(() => { record.reason = 'client went away mid-response' })
  }
  finally {
    if (!streaming) await handle.close()
  }
}

/**
 * A conditional GET with `Prefer: wait=N` (wait.ts) whose If-None-Match still matches waits until
 * the capture's directory changes (or N s, the client leaving, the server closing); then the usual
 * answer follows, 200 or 304. The seconds waited for, or undefined when it did not wait.
 */
async function waitWhileUnchanged (realRoot: string, requestId: string, file: string, req: IncomingMessage, res: ServerResponse, waits: ShareWaits): Promise<number | undefined> {
  const match = req.headers['if-none-match']
  const seconds = req.method === 'GET' && match !== undefined ? preferredWait(req.headers.prefer) : undefined
  if (seconds === undefined) return undefined
  const unchanged = async (): Promise<boolean> => {
    const opened = await openInsideRoot(realRoot, requestId, file)
    if (opened.kind === 'refused') return false
    await opened.handle.close()
    return ifNoneMatchHits(match, etagFromStat(opened.stat))
  }
  // Only a file that is there and unchanged is waited on: the usual answer says everything else.
  if (!(await unchanged())) return undefined
  return await waits.wait(join(realRoot, requestId), seconds, res, unchanged) ? seconds : undefined
}

/** The manifest's SHA-256 for a listed layer file, or undefined when the manifest does not list it (yet). */
async function listedChecksum (realRoot: string, requestId: string, file: string): Promise<string | undefined> {
  const opened = await openInsideRoot(realRoot, requestId, MANIFEST_FILE)
  if (opened.kind === 'refused') return undefined
  try {
    const manifest = parseManifest(await opened.handle.readFile('utf8'), MANIFEST_FILE)
    return manifest.layers.find((e) => e.file === file)?.sha256
  }
  catch {
    return undefined
  }
  finally {
    await opened.handle.close()
  }
}

/** Node joins most repeated headers itself; for the rest, join them: a joined list never equals one tag. */
function single (value: string | string[] | undefined): string | undefined {
  return Array.isArray(value) ? value.join(', ') : value
}

function sendJson (req: IncomingMessage, res: ServerResponse, record: RequestLog, status: number, reason?: string, body?: object): void {
  if (reason !== undefined) record.reason = reason
  const text = JSON.stringify(body ?? { error: reason }) + '\n'
  res.statusCode = status
  res.setHeader('Content-Type', 'application/json')
  res.setHeader('Content-Length', Buffer.byteLength(text))
  if (req.method === 'HEAD') {
    res.end()
    return
  }
  record.bytes = Buffer.byteLength(text)
  res.end(text)
}
