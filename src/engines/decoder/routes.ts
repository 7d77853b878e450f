// Every route the decoder serves (ours and llama.cpp's: one server, src/engines/decoder/server.ts),
// as the route guard's allowlist. Clients need the first list; the second is the operator's, on the
// decoder's own address only: the front door forwards the client routes and nothing else.
import type { AllowedRoute } from '../../http/route-guard.ts'

/** What an OpenAI client of the decoder calls. */
export const DECODER_CLIENT_ROUTES: readonly AllowedRoute[] = [
  { methods: ['POST'], path: '/v1/chat/completions' },
  { methods: ['POST'], path: '/v1/completions' },
  { methods: ['GET', 'HEAD'], path: '/v1/models' },
  { methods: ['GET', 'HEAD'], path: '/v1/models/:id' },
]

/** The operator's: the full /health and the store rescan. */
export const DECODER_OPERATOR_ROUTES: readonly AllowedRoute[] = [
  { methods: ['GET', 'HEAD'], path: '/health' },
  { methods: ['POST'], path: '/v1/cache/rescan' },
]

/** The decoder's allowlist. */
export const DECODER_ROUTES: readonly AllowedRoute[] = [...DECODER_CLIENT_ROUTES, ...DECODER_OPERATOR_ROUTES]
