// Everything that is not a completion or /health is the decoder's: passed through as sent (method,
// path, query, body, headers without hop-by-hop ones) and answered as it answers. The decoder's
// internal routes (/v1/cache/...) are for operators on its own address: a 404 here.
import type { FastifyReply, FastifyRequest } from 'fastify'
import { request as undiciRequest, type Dispatcher } from 'undici'
import { passHeaders } from '../http/hop-by-hop.ts'
import { FrontApiError } from './api-error.ts'
import type { FrontState } from './door-state.ts'
import { describeFailure, joinUrl } from './http.ts'
import { VERDICT_HEADER } from './verdict.ts'

/** The verdict of every answer that is not a completion's. */
export const PASSTHROUGH_VERDICT = 'declined: passthrough (not a completion request)'
/** The decoder's internal routes (operators only): never passed through, a 404 from the front door. */
const INTERNAL_PREFIXES = ['/v1/cache']

function isInternal (url: string): boolean {
  const path = url.split('?')[0].replace(/\/+/g, '/').replace(/\/$/, '').toLowerCase()
  return INTERNAL_PREFIXES.some((p) => path === p || path.startsWith(p + '/'))
}
// Passed through to and from the decoder: host is the decoder's own, and undici frames the body itself.
const PASS_THROUGH_DROPS = ['host', 'content-length']

/** Pass `request` through to the decoder and its answer back. */
export async function passThrough (state: FrontState, request: FastifyRequest, reply: FastifyReply): Promise<FastifyReply> {
  const d = state.config.deadlines
  if (isInternal(request.url)) {
    throw new FrontApiError(404, 'not_found_error', `no route ${request.method} ${request.url.split('?')[0]}`, null, 'unknown_route')
  }
  const headers = passHeaders(request.headers, PASS_THROUGH_DROPS)
  // With a key, the decoder gets ours (the client's was checked above and is the same secret).
  Object.assign(headers, state.auth)
  const body = request.body as Buffer | undefined
  let upstream
  try {
    upstream = await undiciRequest(joinUrl(state.config.decoder.url, request.url), {
      method: request.method as Dispatcher.HttpMethod,
      headers,
      body: body !== undefined && body.length > 0 ? body : undefined,
      headersTimeout: d.decoderHeadersMs,
      bodyTimeout: d.decoderIdleMs,
    })
  } catch (e) {
    const problem = describeFailure(e, d.decoderHeadersMs)
    throw new FrontApiError(502, 'bad_gateway_error', `the decoder could not be reached: ${problem}`, null, 'decoder_unreachable')
  }
  const out = passHeaders(upstream.headers, PASS_THROUGH_DROPS)
  out[VERDICT_HEADER] = PASSTHROUGH_VERDICT
  return reply.code(upstream.statusCode).headers(out).send(upstream.body)
}
