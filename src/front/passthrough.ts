// The decoder's client routes the front door does not answer itself (/v1/models, /v1/models/{id}),
// passed through (method, normalized path, query, body, headers without hop-by-hop ones) and
// answered as the decoder answers. Only the routes its kind's record lists are forwarded; every
// other path, the decoder's operator routes (/health, /v1/cache/rescan) included, is refused by the
// front door's route guard (server.ts) and never reaches the decoder.
import type { FastifyReply, FastifyRequest } from 'fastify'
import { request as undiciRequest, type Dispatcher } from 'undici'
import type { DecoderKind } from '../decoders/kind.ts'
import { passHeaders } from '../http/hop-by-hop.ts'
import type { AllowedRoute } from '../http/route-guard.ts'
import { FrontApiError } from './api-error.ts'
import type { FrontState } from './door-state.ts'
import { describeFailure, freshConnection, joinUrl } from './http.ts'
import { VERDICT_HEADER } from './verdict.ts'

/** The verdict of every answer that is not a completion's. */
export const PASSTHROUGH_VERDICT = 'declined: passthrough (not a completion request)'

/** The front door's own routes (completions are routed and forwarded by generation.ts). */
export const FRONT_ROUTES: readonly AllowedRoute[] = [
  { methods: ['GET', 'HEAD'], path: '/health' },
  { methods: ['POST'], path: '/v1/chat/completions' },
  { methods: ['POST'], path: '/v1/completions' },
]

const answeredHere = new Set(FRONT_ROUTES.map((r) => r.path))

/** What is passed through: the client routes of the decoder kind's server that the front door does not answer. */
export function forwardedRoutes (kind: DecoderKind): readonly AllowedRoute[] {
  return kind.clientRoutes.filter((r) => !answeredHere.has(r.path))
}
// Passed through to and from the decoder: host is the decoder's own, and undici frames the body itself.
const PASS_THROUGH_DROPS = ['host', 'content-length']

/** Pass `request` (its URL already the guard's normalized one) through to the decoder and its answer back. */
export async function passThrough (state: FrontState, request: FastifyRequest, reply: FastifyReply): Promise<FastifyReply> {
  const d = state.config.deadlines
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
      // A client's request is sent once, so never on a kept-alive socket the decoder may be closing.
      dispatcher: freshConnection,
    })
  } catch (e) {
    const problem = describeFailure(e, d.decoderHeadersMs)
    throw new FrontApiError(502, 'bad_gateway_error', `the decoder could not be reached: ${problem}`, null, 'decoder_unreachable')
  }
  const out = passHeaders(upstream.headers, PASS_THROUGH_DROPS)
  out[VERDICT_HEADER] = PASSTHROUGH_VERDICT
  return reply.code(upstream.statusCode).headers(out).send(upstream.body)
}
