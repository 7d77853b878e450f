// Talking to the links (decoder, prefill engine, share) over HTTP with undici: every call has a
// deadline, and every failure becomes a sentence that names the link and what went wrong
// (connection refused, no answer within N ms, a status and its message).
import { connect } from 'node:net'
import { Agent, request, type Dispatcher } from 'undici'
import { errorCode, PD_ERR, PdBridgeError, type PdErrorCode } from '../errors.ts'

/** A link call that failed: `link` names it (`prefill engine`), `problem` says how, its code which kind it was. */
export class LinkError extends PdBridgeError {
  override name = 'LinkError'
  constructor (readonly link: string, readonly url: string, readonly problem: string, readonly status?: number, code: PdErrorCode = PD_ERR.LINK_FAILED) {
    super(`${link} (${url}): ${problem}`, { code })
  }
}

/**
 * A connection of its own per request (`connection: close`, undici's pipelining 0). A kept-alive
 * socket can be closed by the other side's idle timer just as a request is written on it (the front
 * door's event loop was held by a long inline tokenization, so it saw the close too late): the
 * request is lost and, for a POST, cannot be sent again safely. On a fresh connection it cannot be.
 */
export const freshConnection: Dispatcher = new Agent({ pipelining: 0 })

/** Whether `e` is a connection closed under a request (a stale kept-alive socket, among others). */
function isReset (e: unknown): boolean {
  const err = e as { code?: string, cause?: { code?: string } } | undefined
  const code = err?.code ?? err?.cause?.code
  return code === 'ECONNRESET' || code === 'EPIPE' || code === 'UND_ERR_SOCKET'
}

/** A JSON answer. */
export interface JsonAnswer {
  status: number
  headers: Record<string, string | string[] | undefined>
  /** The parsed body, or the text when it is not JSON. */
  body: unknown
}

/** Why a request to a link failed: in words, and as a code (LINK_NO_ANSWER is the one callers branch on). */
export function linkFailure (e: unknown, timeoutMs: number): { problem: string, code: PdErrorCode } {
  const err = e as { code?: string, name?: string, message?: string, cause?: { code?: string } }
  const code = err?.code ?? err?.cause?.code
  if (code === 'ECONNREFUSED') return { problem: 'connection refused (is it running?)', code: PD_ERR.LINK_FAILED }
  if (code === 'ECONNRESET' || code === 'UND_ERR_SOCKET') return { problem: 'the connection was reset', code: PD_ERR.LINK_FAILED }
  if (code === 'ENOTFOUND' || code === 'EAI_AGAIN') return { problem: 'the host name does not resolve', code: PD_ERR.LINK_FAILED }
  if (code === 'UND_ERR_HEADERS_TIMEOUT' || code === 'UND_ERR_BODY_TIMEOUT' || err?.name === 'TimeoutError') return { problem: `no answer within ${timeoutMs} ms`, code: PD_ERR.LINK_NO_ANSWER }
  if (err?.name === 'AbortError') return { problem: 'aborted', code: PD_ERR.LINK_ABORTED }
  return { problem: err?.message ?? String(e), code: PD_ERR.LINK_FAILED }
}

/** Why a request to a link failed, in words. */
export function describeFailure (e: unknown, timeoutMs: number): string {
  return linkFailure(e, timeoutMs).problem
}

/** The `error.message` of an OpenAI-style error body, or a short piece of the text. */
export function errorMessageOf (body: unknown): string {
  if (typeof body === 'object' && body !== null) {
    const error = (body as { error?: unknown }).error
    if (typeof error === 'object' && error !== null && typeof (error as { message?: unknown }).message === 'string') return (error as { message: string }).message
    if (typeof error === 'string') return error
  }
  const text = typeof body === 'string' ? body : JSON.stringify(body)
  return text.length > 200 ? text.slice(0, 200) + '...' : text
}

/** Options of `callJson`. */
export interface CallOptions {
  method?: Dispatcher.HttpMethod
  /** Sent as JSON. */
  json?: unknown
  /** Sent as application/octet-stream (when json is absent). */
  bytes?: Uint8Array
  /** The whole call (headers and body) must finish within this. */
  timeoutMs: number
  /** Extra request headers (the API key's Authorization). */
  headers?: Record<string, string>
  signal?: AbortSignal
}

/**
 * One JSON call to `link` at `url`: resolves with any status (the caller judges it), rejects with
 * LinkError when the link cannot be reached or does not answer within `timeoutMs`.
 */
export async function callJson (link: string, url: string, options: CallOptions): Promise<JsonAnswer> {
  const timeout = AbortSignal.timeout(options.timeoutMs)
  const signal = options.signal === undefined ? timeout : AbortSignal.any([timeout, options.signal])
  const method = options.method ?? 'GET'
  const send = async (dispatcher?: Dispatcher): Promise<Dispatcher.ResponseData> => await request(url, {
    method,
    headers: {
      accept: 'application/json',
      ...(options.json === undefined ? {} : { 'content-type': 'application/json' }),
      ...(options.bytes === undefined ? {} : { 'content-type': 'application/octet-stream' }),
      ...options.headers,
    },
    body: options.json === undefined ? options.bytes : JSON.stringify(options.json),
    signal,
    ...(dispatcher === undefined ? {} : { dispatcher }),
  })
  try {
    let res: Dispatcher.ResponseData
    try {
      res = await send()
    } catch (e) {
      // A read that met a closing kept-alive socket is asked once more, on a connection of its own.
      if (!(method === 'GET' || method === 'HEAD') || !isReset(e) || signal.aborted) throw e
      res = await send(freshConnection)
    }
    const text = await res.body.text()
    let body: unknown = text
    try {
      body = JSON.parse(text)
    } catch {
      // Not JSON: the caller sees the text.
    }
    return { status: res.statusCode, headers: res.headers, body }
  } catch (e) {
    if (options.signal?.aborted === true && !timeout.aborted) throw new LinkError(link, url, 'aborted', undefined, PD_ERR.LINK_ABORTED)
    const failure = linkFailure(timeout.aborted ? { name: 'TimeoutError' } : e, options.timeoutMs)
    throw new LinkError(link, url, failure.problem, undefined, failure.code)
  }
}

/** Join a base URL and a path (`/v1/prefill`) without doubling slashes. */
export function joinUrl (base: string, path: string): string {
  return base.replace(/\/+$/, '') + path
}

/** Whether a LinkError is a deadline that passed (the link may be busy), not a refusal. */
export function isNoAnswer (e: unknown): boolean {
  return errorCode(e) === PD_ERR.LINK_NO_ANSWER
}

/**
 * Whether the link's port accepts a TCP connection within `timeoutMs`. A process that is there but
 * too busy to answer (a prefill chunk holding its event loop) accepts; a dead one refuses.
 */
export async function acceptsConnections (url: string, timeoutMs: number): Promise<boolean> {
  const u = new URL(url)
  const port = Number(u.port !== '' ? u.port : u.protocol === 'https:' ? 443 : 80)
  return await new Promise((resolve) => {
    const socket = connect({ host: u.hostname.replace(/^\[|\]$/g, ''), port, timeout: timeoutMs })
    const done = (ok: boolean): void => {
      socket.destroy()
      resolve(ok)
    }
    socket.once('connect', () => done(true))
    socket.once('timeout', () => done(false))
    socket.once('error', () => done(false))
  })
}
