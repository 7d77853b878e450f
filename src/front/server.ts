// The front door: an OpenAI-compatible fastify server in front of the decoder. Completion
// requests are routed (short, warm, over the guard -> straight to the decoder; cold and long ->
// bridged first), forwarded, and answered with the verdict (generation.ts, plan.ts). Requests the
// embedded decoder would refuse are refused first, with its own rules. /health reports every link
// (health.ts); the decoder's internal routes (/v1/cache/...) are a 404; every other route passes
// through to the decoder untouched (passthrough.ts). HTTP handling is concurrent; only bridge
// work is serialized, in a bounded queue. This file wires the routes and hooks, listens, closes.
import { mkdtemp, rm } from 'node:fs/promises'
import type { AddressInfo } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import Fastify, { type FastifyInstance, type FastifyRequest } from 'fastify'
import type { Logger } from 'pino'
import type { FrontConfig } from '../config/index.ts'
import { authHeaders, bearerMatches, isHealthPath, UNAUTHORIZED_MESSAGE } from '../http/api-key.ts'
import { PdBridgeError } from '../errors.ts'
import { FrontApiError, toFrontApiError } from './api-error.ts'
import { FrontState } from './door-state.ts'
import { handleGeneration } from './generation.ts'
import { answerHealth } from './health.ts'
import { passThrough, PASSTHROUGH_VERDICT } from './passthrough.ts'
import { mismatchAtStart } from './prompt-agreement.ts'
import type { BridgeQueue } from './queue.ts'
import type { PromptTokenizer } from './tokenize.ts'
import { VERDICT_HEADER } from './verdict.ts'

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
}

function fromFastify (err: unknown, maxBodyBytes: number): FrontApiError {
  if (err instanceof FrontApiError) return err
  const code = (err as { code?: unknown })?.code
  const status = (err as { statusCode?: unknown })?.statusCode
  if (code === 'FST_ERR_CTP_BODY_TOO_LARGE' || status === 413) {
    return new FrontApiError(413, 'request_too_large_error', `the request body is larger than the front door accepts (limits.maxBodyBytes ${maxBodyBytes})`, null, 'request_too_large')
  }
  if (typeof status === 'number' && status >= 400 && status < 500) return new FrontApiError(status, 'invalid_request_error', (err as Error).message)
  return toFrontApiError(err)
}

/** The fastify app: body parsing, the error shape, the key, the verdict on every answer, the routes. */
function buildApp (state: FrontState): FastifyInstance {
  const { config, logger, apiKey, redact } = state
  const app = Fastify({ bodyLimit: config.limits.maxBodyBytes, logger: false })
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
  app.addHook('onSend', async (request, reply) => {
    if (!reply.hasHeader(VERDICT_HEADER)) {
      const generation = request.url.startsWith('/v1/chat/completions') || request.url.startsWith('/v1/completions')
      reply.header(VERDICT_HEADER, generation ? `declined: request refused (${reply.statusCode})` : PASSTHROUGH_VERDICT)
    }
  })

  app.get('/health', async (request, reply) => await answerHealth(state, anonymous.has(request), reply))
  app.post('/v1/chat/completions', async (request, reply) => { await handleGeneration(state, 'chat', '/v1/chat/completions', request, reply) })
  app.post('/v1/completions', async (request, reply) => { await handleGeneration(state, 'completion', '/v1/completions', request, reply) })
  // Everything else is the decoder's: passed through as sent, answered as it answers.
  app.all('/*', async (request, reply) => await passThrough(state, request, reply))
  return app
}

/** Start the front door; resolves once it listens. */
export async function startFrontDoor (options: FrontDoorOptions): Promise<FrontDoor> {
  const { config, logger, apiKey } = options
  const mismatch = await mismatchAtStart(config, authHeaders(apiKey))
  if (mismatch !== undefined) throw new PdBridgeError(`front door not started: ${mismatch}`)
  const ownSpool = config.share.url !== undefined && config.capture.spoolDir === undefined
  const spoolDir = ownSpool ? await mkdtemp(join(tmpdir(), 'pd-bridge-front-spool-')) : config.capture.spoolDir
  const state = new FrontState(config, logger, apiKey, spoolDir)
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
      await app.close()
      await state.tokenizer.close()
      if (ownSpool && spoolDir !== undefined) await rm(spoolDir, { recursive: true, force: true })
    },
  }
}
