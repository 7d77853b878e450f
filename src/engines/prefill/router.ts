// A small JSON router over node:http: routes by method and path pattern, answers 404 for an
// unknown path and 405 (with Allow) for a known path under another method, and turns every thrown
// ApiError into its JSON error body. Anything else thrown is a 500 that still names the problem.
import type { IncomingMessage, ServerResponse } from 'node:http'
import { ApiError } from './api-error.ts'

/** What a handler returns: a status and a JSON body, plus headers. */
export interface JsonReply {
  status: number
  body: unknown
  headers?: Record<string, string>
}

/** A route handler; `params` are the pattern's capture groups, decoded. */
export type Handler = (req: IncomingMessage, params: string[]) => Promise<JsonReply> | JsonReply

/** One route: a method and an anchored path pattern. */
export interface Route {
  method: 'GET' | 'POST' | 'PUT' | 'DELETE'
  path: RegExp
  handler: Handler
}

/** Write a JSON reply. */
export function sendJson (res: ServerResponse, reply: JsonReply): void {
  const text = JSON.stringify(reply.body) + '\n'
  res.writeHead(reply.status, {
    'Content-Type': 'application/json; charset=utf-8',
    'Content-Length': String(Buffer.byteLength(text)),
    'Cache-Control': 'no-store',
    ...reply.headers,
  })
  res.end(text)
}

/** The reply for an error: ApiErrors as they are, anything else a 500 naming the problem. */
export function errorReply (err: unknown): JsonReply {
  const e = err instanceof ApiError
    ? err
    : new ApiError(500, 'internal_error', `internal error: ${err instanceof Error ? err.message : String(err)}`)
  return { status: e.status, body: e.toBody(), headers: e.headers }
}

function decodeSegments (groups: string[]): string[] | undefined {
  try {
    return groups.map((g) => decodeURIComponent(g))
  }
  catch {
    return undefined
  }
}

/** Find the route for a request and run it; never throws. Returns the reply it sent. */
export async function dispatch (routes: readonly Route[], req: IncomingMessage): Promise<JsonReply> {
  let path: string
  try {
    path = new URL(req.url ?? '/', 'http://engine.invalid').pathname
  }
  catch {
    return errorReply(new ApiError(400, 'invalid_request_error', `cannot parse the request target ${JSON.stringify(req.url)}`))
  }
  const allowed: string[] = []
  for (const route of routes) {
    const m = route.path.exec(path)
    if (m === null) continue
    if (route.method !== req.method) {
      allowed.push(route.method)
      continue
    }
    const params = decodeSegments(m.slice(1))
    if (params === undefined) return errorReply(new ApiError(404, 'not_found_error', `no such resource: ${path} (bad percent-encoding)`))
    try {
      return await route.handler(req, params)
    }
    catch (e) {
      return errorReply(e)
    }
  }
  if (allowed.length > 0) {
    const allow = [...new Set(allowed)].join(', ')
    return errorReply(new ApiError(405, 'method_not_allowed_error', `${req.method ?? '?'} is not allowed on ${path}; allowed: ${allow}`, undefined, { Allow: allow }))
  }
  return errorReply(new ApiError(404, 'not_found_error', `no such resource: ${path}`))
}
