// The embedded decoder's HTTP server: OpenAI-compatible /v1/chat/completions and /v1/completions
// (whole or streamed as SSE), /v1/models, /health and POST /v1/cache/rescan. Requests are checked
// and tokenized before they queue, take the engine one at a time, and never share a cache object.
import { randomUUID } from 'node:crypto'
import type { IncomingMessage, ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'
import Fastify, { type FastifyInstance, type FastifyReply, type RawServerDefault } from 'fastify'
import type { Logger } from 'pino'
import { ApiError, toApiError } from './api-error.ts'
import { bearerMatches, isHealthPath, UNAUTHORIZED_MESSAGE } from '../../http/api-key.ts'
import type { GenerationHooks, GenerationJob, GenerationOutcome, PrefixCacheLike } from './generate.ts'
import type { ServedModel } from './model.ts'
import type { WriteFailure } from '../../decode/prefix-cache/index.ts'
import { completionBudget, promptTokens } from './prompt.ts'
import { EngineQueue, QueueAbandoned, type QueueStats } from './queue.ts'
import { parseChatRequest, parseCompletionRequest, type GenerationRequest } from './request.ts'
import { ChunkMaker, chatCompletion, textCompletion, timingsOf, usageOf, type ResponseHead } from './responses.ts'
import { SseWriter } from './sse.ts'

/** What the server shows of a prefix cache, whichever engine it belongs to: stats for /health, and a rescan. */
export interface ServedCacheInfo {
  /** The store root. */
  dir: string
  blockSize: number
  /** Counters and sizes for /health. */
  describe: () => Record<string, unknown>
  /** Whether the store can be written now (a real probe write, cached for a few seconds). */
  storeHealth: () => Promise<StoreHealth>
  /** Re-read the store from disk; returns the scan report. */
  rescan: () => Promise<Record<string, unknown>>
}

/** Our engine's prefix cache as the server exposes it: generation, stats for /health, and a rescan. */
export interface ServedPrefixCache extends ServedCacheInfo, PrefixCacheLike {}

/** The generation backend: one checked request to its end (or to cancellation through `signal`). */
export type GenerateFn = (job: GenerationJob, hooks: GenerationHooks, signal: AbortSignal) => Promise<GenerationOutcome>

/** /health's `store`: can the decoder write its blocks? */
export interface StoreHealth {
  dir: string
  /** The last probe's real write (create, write, fsync, remove) succeeded. */
  writable: boolean
  /** errno code and sentence of the probe's failure; null when writable. */
  code: string | null
  error: string | null
  /** When the probe last really wrote, and how often it may. */
  checked_at: string
  probe_every_ms: number
  /** The most recent block write-back failed and none succeeded since. */
  writes_failing: boolean
  write_failures: number
  last_write_failure: WriteFailure | null
}

/** Why /health says `degraded` (empty when it says `ok`): the decoder answers, but not fully. */
export function degradedReasons (store: StoreHealth | null): string[] {
  if (store === null) return []
  const reasons: string[] = []
  if (!store.writable) reasons.push(`the block store cannot be written (${store.code ?? 'error'}): ${store.error ?? 'unknown'}; prompts are answered, their blocks are not stored`)
  if (store.writes_failing && store.last_write_failure !== null) {
    const f = store.last_write_failure
    reasons.push(`the last block write failed at ${f.at} (${f.code ?? 'error'}; ${store.write_failures} failed since start): ${f.detail}`)
  }
  return reasons
}

/** Options of `startDecoderServer`. */
export interface DecoderServerOptions {
  /** Tokenizer and config (prompts are tokenized here, before they queue), directory and profile name for /health. */
  model: ServedModel
  /** Runs one request on the engine; requests reach it one at a time. */
  generate: GenerateFn
  /** Most positions a prompt + completion may take; default the config's max_position_embeddings. */
  maxPositions?: number
  /** More /health fields (the engine's own facts), shown after the common ones. */
  healthExtra?: () => Record<string, unknown>
  /** The id served in /v1/models and required (when given) in requests. */
  modelName: string
  /** The geometry fingerprint blocks carry (rope tables, window, profile). */
  geometryFingerprint: string
  /** Absent: no prefix cache (every prompt is prefilled, nothing stored). */
  prefixCache?: ServedCacheInfo
  host?: string
  /** 0: any free port. */
  port?: number
  /** The most completion tokens a request may ask for, and the default. */
  maxTokens: number
  maxBodyBytes: number
  /** Requests that may wait behind the running one. */
  maxQueue: number
  logger: Logger
  /** PD_API_KEY: every route but a bare /health requires `Authorization: Bearer <key>` (401 otherwise). */
  apiKey?: string
}

/** A running server. */
export interface DecoderServer {
  /** `http://host:port`. */
  url: string
  app: FastifyInstance<RawServerDefault, IncomingMessage, ServerResponse, Logger>
  queue: EngineQueue
  /** Stop: refuse new requests (503), end running ones, flush their answers, drop every remaining connection, close the listener. */
  close: () => Promise<void>
}

function fastifyStatus (err: unknown): number | undefined {
  const status = (err as { statusCode?: unknown })?.statusCode
  return typeof status === 'number' ? status : undefined
}

/** Map fastify's own refusals (body size, content type, JSON syntax) to OpenAI-shaped errors. */
function fromFastify (err: unknown, maxBodyBytes: number): ApiError {
  if (err instanceof ApiError) return err
  const code = (err as { code?: unknown })?.code
  const status = fastifyStatus(err)
  const message = err instanceof Error ? err.message : String(err)
  if (code === 'FST_ERR_CTP_BODY_TOO_LARGE' || status === 413) {
    return new ApiError(413, 'request_too_large_error', `the request body is larger than this server accepts (--max-body-bytes ${maxBodyBytes})`, null, 'request_too_large')
  }
  if (code === 'FST_ERR_CTP_INVALID_MEDIA_TYPE' || status === 415) {
    return new ApiError(415, 'unsupported_media_type_error', 'the request body must be JSON (Content-Type: application/json)', null, 'unsupported_media_type')
  }
  if (code === 'FST_ERR_CTP_EMPTY_JSON_BODY') return new ApiError(400, 'invalid_request_error', 'the request body is empty; send a JSON object', null, 'invalid_json')
  if (err instanceof SyntaxError || code === 'FST_ERR_CTP_INVALID_JSON_BODY') {
    return new ApiError(400, 'invalid_request_error', `the request body is not valid JSON: ${message}`, null, 'invalid_json')
  }
  if (status !== undefined && status >= 400 && status < 500) return new ApiError(status, 'invalid_request_error', message)
  return toApiError(err)
}

/** The queue's state in the snake_case the rest of /health uses. */
function queueView (q: QueueStats): Record<string, number> {
  return { running: q.running, waiting: q.waiting, max_queue: q.maxQueue, served: q.served, refused: q.refused, abandoned: q.abandoned }
}

/** Resolves once `res` has handed its last byte to the socket ('finish') or its socket is gone. */
function responseSent (res: ServerResponse): Promise<void> {
  if (res.writableFinished || res.destroyed) return Promise.resolve()
  return new Promise<void>((resolve) => {
    const settle = (): void => {
      res.off('finish', settle)
      res.off('close', settle)
      resolve()
    }
    res.on('finish', settle)
    res.on('close', settle)
  })
}

function sendError (reply: FastifyReply, err: ApiError): FastifyReply {
  return reply.code(err.status).headers(err.headers).send(err.toBody())
}

/** Start the server; resolves once it listens. */
export async function startDecoderServer (opts: DecoderServerOptions): Promise<DecoderServer> {
  const { model, modelName, logger, generate } = opts
  const queue = new EngineQueue(opts.maxQueue)
  const limits = { maxTokens: opts.maxTokens, maxPositions: opts.maxPositions ?? model.config.maxPositionEmbeddings }
  const active = new Set<AbortController>()
  const running = new Set<Promise<void>>()
  const systemFingerprint = `fp_${opts.geometryFingerprint.slice(0, 12)}`
  const createdAt = Math.floor(Date.now() / 1000)
  let closing = false

  // forceCloseConnections: app.close() destroys every connection still open right before it stops
  // listening. close() below calls it only once every response already started has been flushed,
  // so what it cuts carries no answer: idle keep-alive sockets and sockets a client opened but has
  // sent nothing on yet (HTTP client pools and browsers pre-connect). Node counts the latter as
  // active, not idle, and stops timing them out once the server closes, so without this a single
  // such socket keeps SIGTERM waiting until the client drops it.
  const app = Fastify({ loggerInstance: logger, bodyLimit: opts.maxBodyBytes, forceCloseConnections: true })
  // Every response in flight, until its last byte is handed to the socket (or the socket is gone).
  const responses = new Set<Promise<void>>()
  // Requests without the key that may still be answered: a bare /health, with its status alone.
  const anonymous = new WeakSet<object>()
  app.addHook('onRequest', async (request, reply) => {
    const sent = responseSent(reply.raw)
    responses.add(sent)
    void sent.then(() => responses.delete(sent))
    if (opts.apiKey === undefined || bearerMatches(request.headers.authorization, opts.apiKey)) return
    if (request.method === 'GET' && isHealthPath(request.url)) anonymous.add(request)
    else throw new ApiError(401, 'invalid_request_error', UNAUTHORIZED_MESSAGE, null, 'invalid_api_key', { 'www-authenticate': 'Bearer' })
  })
  app.setErrorHandler((err, _request, reply) => {
    const api = fromFastify(err, opts.maxBodyBytes)
    if (api.status >= 500) logger.error({ err }, 'request failed')
    return sendError(reply, api)
  })
  app.setNotFoundHandler((request, reply) => {
    return sendError(reply, new ApiError(404, 'not_found_error', `no route ${request.method} ${request.url.split('?')[0]}`, null, 'unknown_route'))
  })

  const modelCard = { id: modelName, object: 'model', created: createdAt, owned_by: 'pd-bridge' }

  app.get('/health', async (request) => {
    if (anonymous.has(request)) return { status: closing ? 'shutting_down' : 'ok' }
    const store = opts.prefixCache === undefined ? null : await opts.prefixCache.storeHealth()
    const degraded = degradedReasons(store)
    return {
      // Degraded is still a 200: the decoder answers every prompt, it just cannot store blocks.
      status: closing ? 'shutting_down' : degraded.length > 0 ? 'degraded' : 'ok',
      degraded,
      model: modelName,
      model_dir: model.dir,
      profile: model.profileName,
      geometry_fingerprint: opts.geometryFingerprint,
      max_position_embeddings: model.config.maxPositionEmbeddings,
      // What turns a request into ids here; a front door that would compute other ids refuses.
      tokenizer_digest: model.tokenizer.digest,
      chat_template_digest: model.tokenizer.chatFormat.digest,
      limits: { max_tokens: opts.maxTokens, max_body_bytes: opts.maxBodyBytes, max_queue: opts.maxQueue },
      queue: queueView(queue.stats),
      cache: opts.prefixCache === undefined ? null : { dir: opts.prefixCache.dir, block_size: opts.prefixCache.blockSize, ...opts.prefixCache.describe() },
      store,
      ...opts.healthExtra?.(),
    }
  })

  app.get('/v1/models', async () => ({ object: 'list', data: [modelCard] }))
  app.get<{ Params: { id: string } }>('/v1/models/:id', async (request) => {
    if (request.params.id !== modelName) throw unknownModel(request.params.id)
    return modelCard
  })

  app.post('/v1/cache/rescan', async () => {
    if (opts.prefixCache === undefined) throw new ApiError(404, 'not_found_error', 'this decoder runs without a prefix cache (no --cache-dir), so there is nothing to rescan', null, 'cache_disabled')
    const report = await opts.prefixCache.rescan()
    logger.info({ event: 'rescan', report }, 'cache rescanned')
    return { object: 'cache.rescan', report, cache: opts.prefixCache.describe() }
  })

  function unknownModel (asked: string): ApiError {
    return new ApiError(404, 'invalid_request_error', `the model '${asked}' does not exist; this decoder serves '${modelName}'`, 'model', 'model_not_found')
  }

  async function serve (reply: FastifyReply, parsed: GenerationRequest): Promise<void> {
    if (closing) throw new ApiError(503, 'service_unavailable_error', 'the decoder is shutting down and takes no new requests')
    if (parsed.model !== undefined && parsed.model !== modelName) throw unknownModel(parsed.model)
    const tokens = promptTokens(model, parsed.prompt)
    const maxTokens = completionBudget(tokens.length, parsed, limits)
    const id = `${parsed.endpoint === 'chat' ? 'chatcmpl' : 'cmpl'}-${randomUUID().replaceAll('-', '')}`
    const res = reply.raw
    const abort = new AbortController()
    // A response closed before it finished means the client went away: stop working for it.
    const onClose = (): void => { if (!res.writableFinished) abort.abort() }
    res.on('close', onClose)
    active.add(abort)
    let release: (() => void) | undefined
    try {
      try {
        release = await queue.acquire(abort.signal)
      } catch (e) {
        if (!(e instanceof QueueAbandoned)) throw e
        logger.info({ event: 'generation', id, finish_reason: 'cancelled', queued: true }, 'client left while queued')
        reply.hijack()
        res.destroy()
        return
      }
      const head: ResponseHead = { id, created: Math.floor(Date.now() / 1000), model: modelName, system_fingerprint: systemFingerprint }
      const job = { tokens, maxTokens, stop: parsed.stop, ignoreEos: parsed.ignoreEos }
      const promptIds = parsed.returnTokenIds ? tokens : undefined
      const outcome = parsed.stream
        ? await streamGeneration(reply, res, parsed, head, job, promptIds, abort.signal)
        : await wholeGeneration(reply, parsed, head, job, promptIds, abort.signal)
      if (outcome === null) return
      logger.info({
        event: 'generation', id, endpoint: parsed.endpoint, stream: parsed.stream,
        prompt_tokens: outcome.promptTokens, cached_tokens: outcome.cachedTokens, stored_blocks: outcome.storedBlocks, reused_blocks: outcome.reusedBlocks, failed_blocks: outcome.failedBlocks,
        completion_tokens: outcome.completionIds.length, finish_reason: outcome.finishReason,
        ...timingsOf(outcome),
      }, 'generation finished')
    } finally {
      release?.()
      active.delete(abort)
      res.off('close', onClose)
    }
  }

  function shutdownError (): ApiError {
    return new ApiError(503, 'service_unavailable_error', 'the decoder is shutting down; the request was stopped', null, 'shutting_down')
  }

  async function wholeGeneration (reply: FastifyReply, parsed: GenerationRequest, head: ResponseHead, job: GenerationJob, promptIds: number[] | undefined, signal: AbortSignal): Promise<GenerationOutcome> {
    const outcome = await generate(job, {
      onStart: ({ cachedTokens }) => { reply.header('x-cached-tokens', String(cachedTokens)) },
    }, signal)
    if (outcome.finishReason === 'cancelled') {
      if (closing) sendError(reply, shutdownError())
      else reply.hijack()
      return outcome
    }
    const build = parsed.endpoint === 'chat' ? chatCompletion : textCompletion
    await reply.send(build(head, outcome, outcome.finishReason, promptIds))
    return outcome
  }

  async function streamGeneration (reply: FastifyReply, res: ServerResponse, parsed: GenerationRequest, head: ResponseHead, job: GenerationJob, promptIds: number[] | undefined,
    signal: AbortSignal): Promise<GenerationOutcome | null> {
    reply.hijack()
    const sse = new SseWriter(res)
    const chunks = new ChunkMaker(parsed.endpoint, head, parsed.includeUsage)
    let outcome: GenerationOutcome
    try {
      outcome = await generate(job, {
        onStart: async ({ cachedTokens }) => {
          sse.open({ 'x-cached-tokens': String(cachedTokens) })
          const first = chunks.first(promptIds)
          if (first !== null) await sse.send(first)
        },
        onText: (piece) => sse.send(chunks.text(piece)),
        // Between prefill chunks: `: prefill 2560/32768`, so the stream is never silent for long.
        onPrefill: ({ doneTokens, promptTokens }) => sse.comment(`prefill ${doneTokens}/${promptTokens}`),
      }, signal)
    } catch (e) {
      // The reply is hijacked: fastify's error handler cannot answer any more, so answer here.
      const api = toApiError(e)
      logger.error({ err: e, id: head.id }, 'generation failed')
      if (!res.headersSent) {
        res.writeHead(api.status, { 'content-type': 'application/json; charset=utf-8', ...api.headers })
        res.end(JSON.stringify(api.toBody()))
      } else await sse.fail(api)
      return null
    }
    if (outcome.finishReason === 'cancelled') {
      if (closing && !sse.closed) {
        if (!res.headersSent) sse.open({})
        await sse.fail(shutdownError())
      } else sse.end()
      return outcome
    }
    await sse.send(chunks.finish(outcome.finishReason, parsed.returnTokenIds ? outcome.completionIds : undefined))
    if (parsed.includeUsage) await sse.send(chunks.usage(usageOf(outcome), timingsOf(outcome)))
    await sse.done()
    return outcome
  }

  async function tracked (reply: FastifyReply, parsed: GenerationRequest): Promise<FastifyReply> {
    const work = serve(reply, parsed)
    const settled = work.then(() => {}, () => {})
    running.add(settled)
    try {
      await work
    } finally {
      running.delete(settled)
    }
    return reply
  }

  app.post('/v1/chat/completions', async (request, reply) => tracked(reply, parseChatRequest(request.body)))
  app.post('/v1/completions', async (request, reply) => tracked(reply, parseCompletionRequest(request.body)))

  await app.listen({ host: opts.host ?? '127.0.0.1', port: opts.port ?? 0 })
  const address = app.server.address() as AddressInfo
  const host = address.family === 'IPv6' ? `[${address.address}]` : address.address
  return {
    url: `http://${host}:${address.port}`,
    app,
    queue,
    close: async () => {
      closing = true
      queue.stop()
      for (const a of active) a.abort()
      // Running requests stop at their next step and answer 503 (or an SSE error) before the sockets close.
      await Promise.all(running)
      // Wait until those answers (and any other response already started) are flushed, then close:
      // app.close() destroys whatever connections remain (see forceCloseConnections above).
      await Promise.all(responses)
      await app.close()
    },
  }
}
