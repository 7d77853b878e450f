// The front door: an OpenAI-compatible fastify server in front of the decoder. Completion
// requests are routed (short, warm, over the guard -> straight to the decoder; cold and long ->
// bridged first), forwarded, and answered with the verdict (generation.ts, plan.ts). Requests the
// embedded decoder would refuse are refused first, with its own rules. /health reports every link
// (health.ts); the decoder's other client routes (/v1/models...) pass through to it (passthrough.ts);
// every other target is refused by the route guard before any work (src/http/route-guard.ts). HTTP
// handling is concurrent; only bridge work is serialized, in a bounded queue. This file wires the
// routes and hooks, listens, closes.
import type { KeyObject } from 'node:crypto'
import { mkdtemp, rm } from 'node:fs/promises'
import type { AddressInfo } from 'node:net'
import Fastify, { type FastifyInstance, type FastifyRequest } from 'fastify'
import type { Logger } from 'pino'
import type { FrontConfig } from '../config/index.ts'
import { decoderKind } from '../decoders/registry.ts'
import { authHeaders, bearerMatches, isHealthPath, UNAUTHORIZED_MESSAGE } from '../http/api-key.ts'
import { refuseOversizedContinue } from '../http/expect-continue.ts'
import { FastifyRouteGuard } from '../http/fastify-route-guard.ts'
import { routeRefusal } from '../http/openai-error.ts'
import { PdBridgeError } from '../errors.ts'
import { FrontApiError, toFrontApiError } from './api-error.ts'
import { FrontState } from './door-state.ts'
import { handleGeneration } from './generation.ts'
import { answerHealth } from './health.ts'
import { forwardedRoutes, FRONT_ROUTES, passThrough, PASSTHROUGH_VERDICT } from './passthrough.ts'
import { mismatchAtStart } from './prompt-agreement.ts'
import type { BridgeQueue } from './queue.ts'
import { ownSpoolPrefix, reconcileSpools, startReconcile, unlockSpool } from './reconcile.ts'
import type { PromptTokenizer } from './tokenize.ts'
import { refused, VERDICT_HEADER, verdictHeader } from './verdict.ts'

/** A running front door. */
export interface FrontDoor {
  url: string
  app: FastifyInstance
  queue: BridgeQueue
  /** The prompt tokenizer (its `stats`, and `start` / `done` events). */
  tokenizer: PromptTokenizer
  /** Stop accepting, let running requests finish, remove the spool if it was ours. */
  close: () => Promise<void>
}

/** Options of `startFrontDoor`. */
export interface FrontDoorOptions {
  config: FrontConfig
  logger: Logger
  /** PD_API_KEY: clients must send it, and every internal request carries it; absent: no key anywhere. */
  apiKey?: string
  /** The block key (src/config/block-key.ts): every block the writer puts carries its keyed digest; absent: none. */
  blockKey?: KeyObject
}

function tooLarge (maxBodyBytes: number): FrontApiError {
  return new FrontApiError(413, 'request_too_large_error', `the request body is larger than the front door accepts (limits.maxBodyBytes ${maxBodyBytes})`, null, 'request_too_large')
}

function fromFastify (err: unknown, maxBodyBytes: number): FrontApiError {
  if (err instanceof FrontApiError) return err
  const code = (err as { code?: unknown })?.code
  const status = (err as { statusCode?: unknown })?.statusCode
  if (code === 'FST_ERR_CTP_BODY_TOO_LARGE' || status === 413) return tooLarge(maxBodyBytes)
  if (typeof status === 'number' && status >= 400 && status < 500) return new FrontApiError(status, 'invalid_request_error', (err as Error).message)
  return toFrontApiError(err)
}

/** The fastify app: body parsing, the error shape, the key, the verdict on every answer, the routes. */
function buildApp (state: FrontState): FastifyInstance {
  const { config, logger, apiKey, redact } = state
  const forwarded = forwardedRoutes(state.kind)
  const guard = new FastifyRouteGuard([...FRONT_ROUTES, ...forwarded], routeRefusal)
  const app = Fastify({ bodyLimit: config.limits.maxBodyBytes, logger: false, rewriteUrl: guard.rewriteUrl })
  refuseOversizedContinue(app.server, config.limits.maxBodyBytes, () => ({
    body: JSON.stringify(tooLarge(config.limits.maxBodyBytes).toBody()),
    headers: { [VERDICT_HEADER]: verdictHeader(refused(413)) },
  }))
  // Bodies stay bytes: completions are parsed here (with our own errors), passthrough forwards them as sent.
  app.removeAllContentTypeParsers()
  app.addContentTypeParser('*', { parseAs: 'buffer' }, (_request, body, done) => { done(null, body) })
  app.setErrorHandler((err, _request, reply) => {
    const api = fromFastify(err, config.limits.maxBodyBytes)
    if (api.status >= 500) logger.error({ err }, 'request failed')
    const shown = new FrontApiError(api.status, api.type, redact(api.message), api.param, api.code, api.headers)
    return reply.code(api.status).headers(api.headers).send(shown.toBody())
  })
  // Requests that came without the key and may still be answered (a bare /health).
  const anonymous = new WeakSet<FastifyRequest>()
  app.addHook('onRequest', async (request) => {
    if (apiKey === undefined || bearerMatches(request.headers.authorization, apiKey)) return
    if (request.method === 'GET' && isHealthPath(request.url)) {
      anonymous.add(request)
      return
    }
    throw new FrontApiError(401, 'invalid_request_error', UNAUTHORIZED_MESSAGE, null, 'invalid_api_key', { 'www-authenticate': 'Bearer' })
  })
  // After the key (nothing is told without it), before the body and any handler.
  app.addHook('onRequest', guard.onRequest)
  app.addHook('onSend', async (request, reply) => {
    if (!reply.hasHeader(VERDICT_HEADER)) {
      const generation = request.url.startsWith('/v1/chat/completions') || request.url.startsWith('/v1/completions')
      reply.header(VERDICT_HEADER, generation ? verdictHeader(refused(reply.statusCode)) : PASSTHROUGH_VERDICT)
    }
  })

  app.get('/health', async (request, reply) => await answerHealth(state, anonymous.has(request), reply))
  app.post('/v1/chat/completions', async (request, reply) => { await handleGeneration(state, 'chat', '/v1/chat/completions', request, reply) })
  app.post('/v1/completions', async (request, reply) => { await handleGeneration(state, 'completion', '/v1/completions', request, reply) })
  // The decoder's other client routes: passed through, answered as it answers. Nothing else is routed.
  for (const route of forwarded) app.route({ method: [...route.methods], url: route.path, handler: async (request, reply) => await passThrough(state, request, reply) })
  return app
}

/** Start the front door; resolves once it listens. */
export async function startFrontDoor (options: FrontDoorOptions): Promise<FrontDoor> {
  const { config, logger, apiKey } = options
  // An unknown decoder kind is refused before anything is asked or swept.
  const kind = decoderKind(config.decoder.engine)
  const mismatch = await mismatchAtStart(config, authHeaders(apiKey))
  if (mismatch !== undefined) throw new PdBridgeError(`front door not started: ${mismatch}`)
  const ownSpool = config.share.url !== undefined && config.capture.spoolDir === undefined
  // What a front door that died left behind goes before this one spools anything (reconcile.ts).
  const reconciled = await reconcileSpools(config.capture.spoolDir, ownSpool, kind.store.sweepTempsAtStart ? config.decoder.cacheDir : undefined)
  const spoolDir = ownSpool ? await mkdtemp(ownSpoolPrefix()) : config.capture.spoolDir
  const state = new FrontState(config, logger, apiKey, spoolDir, options.blockKey)
  const stopRetiring = new AbortController()
  const retiring = startReconcile(reconciled, state.effective, state.auth, logger, stopRetiring.signal)
  const app = buildApp(state)
  await app.listen({ host: config.listen.host, port: config.listen.port })
  const address = app.server.address() as AddressInfo
  const host = address.family === 'IPv6' ? `[${address.address}]` : address.address
  return {
    url: `http://${host}:${address.port}`,
    app,
    queue: state.queue,
    tokenizer: state.tokenizer,
    close: async () => {
      state.closing = true
      stopRetiring.abort()
      await app.close()
      await state.stopRetiring()
      await state.tokenizer.close()
      await retiring
      if (ownSpool && spoolDir !== undefined) await rm(spoolDir, { recursive: true, force: true })
      else if (spoolDir !== undefined && reconciled.spoolHeldBy === undefined) await unlockSpool(spoolDir)
    },
  }
}
