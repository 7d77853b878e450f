// A small JSON router over node:http: the route guard (src/http/route-guard.ts) judges each target
// on its normalized path against the routes, answering 400 for an ambiguous spelling, 404 for an
// unknown path and 405 (with Allow) for a known path under another method; every thrown ApiError
// becomes its JSON error body. Anything else thrown is a 500 that still names the problem.
import type { IncomingMessage, ServerResponse } from 'node:http'
import { RouteAllowlist, type AllowedRoute, type RefusedTarget } from '../../http/route-guard.ts'
import { ApiError } from './api-error.ts'

/** What a handler returns: a status and a JSON body, plus headers. */
export interface JsonReply {
  status: number
  body: unknown
  headers?: Record<string, string>
}

/** A route handler; `params` are the pattern's `:name` segments in order, decoded. */
export type Handler = (req: IncomingMessage, params: string[]) => Promise<JsonReply> | JsonReply

/** One route: its methods, a path pattern (`/v1/prefill/:id`) and the handler. */
export interface Route extends AllowedRoute {
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

function refusalReply (refusal: RefusedTarget): JsonReply {
  const type = refusal.status === 404 ? 'not_found_error' : refusal.status === 405 ? 'method_not_allowed_error' : 'invalid_request_error'
  const headers = refusal.allow === undefined ? undefined : { Allow: refusal.allow.join(', ') }
  return errorReply(new ApiError(refusal.status, type, refusal.reason, undefined, headers))
}

/** Find the route for a request (judged on its normalized path) and run it; never throws. Returns the reply it sent. */
export async function dispatch (routes: readonly Route[], req: IncomingMessage): Promise<JsonReply> {
  const judged = new RouteAllowlist(routes).judge(req.method ?? '', req.url ?? '')
  if (!judged.ok) {
    // A refused request's body is drained unread.
    req.resume()
    return refusalReply(judged)
  }
  try {
    return await (judged.route as Route).handler(req, Object.values(judged.params))
  }
  catch (e) {
    return errorReply(e)
  }
}
