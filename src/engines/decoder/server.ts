// The embedded decoder's HTTP server: OpenAI-compatible /v1/chat/completions and /v1/completions
// (whole or streamed as SSE), /v1/models, /health and POST /v1/cache/rescan, and nothing else
// (routes.ts, judged by the route guard before any work). Requests are checked and tokenized before
// they queue, run as many at once as the backend's admission allows (our engine batches them,
// llama.cpp's takes one), and never share a cache object. Without the key, no answer names a file
// by its absolute path (src/http/redact.ts).
import { randomInt, randomUUID } from 'node:crypto'
import type { IncomingMessage, ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'
import Fastify, { type FastifyInstance, type FastifyReply, type FastifyRequest, type RawServerDefault } from 'fastify'
import type { Logger } from 'pino'
import { ApiError, toApiError } from './api-error.ts'
import { bearerMatches, isHealthPath, UNAUTHORIZED_MESSAGE } from '../../http/api-key.ts'
import { refuseOversizedContinue } from '../../http/expect-continue.ts'
import { FastifyRouteGuard } from '../../http/fastify-route-guard.ts'
import { redactedError, routeRefusal } from '../../http/openai-error.ts'
import { pathRedactor, redactDeep, type NamedRoot, type Redactor } from '../../http/redact.ts'
import { DECODER_ROUTES } from './routes.ts'
import type { GenerationHooks, GenerationJob, GenerationOutcome, PrefixCacheLike } from './generate.ts'
import type { ServedModel } from './model.ts'
import type { WriteFailure } from '../../decode/prefix-cache/index.ts'
import { completionBudget, promptTokens } from './prompt.ts'
import { EngineQueue, QueueAbandoned, type QueueStats } from './queue.ts'
import { bodyTooLarge, notJson, readGenerationRequest, readJsonBody, unknownModel } from './body.ts'
import type { GenerationRequest } from './request.ts'
import { LogprobsFormat } from './logprobs.ts'
import { ChunkMaker, chatCompletion, chatFinishReason, textCompletion, timingsOf, usageOf, type DecoderExtra, type FinishedChoice, type ResponseHead } from './responses.ts'
import { hasText, ReplyStreamer } from './reply-stream.ts'
import { isRandom } from './sampling/index.ts'
import { SseWriter } from './sse.ts'
import { storeIdentity } from '../../decode/store/index.ts'
import type { ReplyParts } from '../../model/tokenizer/index.ts'

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

/** Admission of a backend that runs several requests at once. */
export interface Admission {
  /** Requests running at once (the batch). */
  slots: number
  /** Bound on the running requests' estimated bytes. */
  budgetBytes?: number
  /** A request's estimated bytes from its prompt and completion budget. */
  costOf: (promptTokens: number, maxTokens: number) => number
}

/** Options of `startDecoderServer`. */
export interface DecoderServerOptions {
  /** Tokenizer and config (prompts are tokenized here, before they queue), directory and profile name for /health. */
  model: ServedModel
  /** Runs one request on the engine; as many run at once as `admission` lets through. */
  generate: GenerateFn
  /** How many requests run at once and within what memory; default one at a time, no budget. */
  admission?: Admission
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
  /** More roots shown by name to callers without the key (the model and cache directories always are): a GGUF file. */
  redactRoots?: readonly NamedRoot[]
  /** The engine's own refusals of a checked request (what its sampler cannot do), before it queues. */
  checkRequest?: (r: GenerationRequest) => void
}

/** A seed for a request that sent none: 48 random bits, reported back so the answer can be repeated. */
function drawSeed (): number {
  return randomInt(2 ** 48 - 1)
}

/** The timings of every choice of one request, summed. */
function requestTimings (outcomes: readonly GenerationOutcome[]): { prefillMs: number, decodeMs: number } {
  let prefillMs = 0
  let decodeMs = 0
  for (const o of outcomes) {
    prefillMs += o.prefillMs
    decodeMs += o.decodeMs
  }
  return { prefillMs, decodeMs }
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

/** Map fastify's own refusals (body size, content type) to OpenAI-shaped errors; bodies are read by body.ts. */
function fromFastify (err: unknown, maxBodyBytes: number): ApiError {
  if (err instanceof ApiError) return err
  const code = (err as { code?: unknown })?.code
  const status = fastifyStatus(err)
  const message = err instanceof Error ? err.message : String(err)
  if (code === 'FST_ERR_CTP_BODY_TOO_LARGE' || status === 413) return bodyTooLarge(maxBodyBytes)
  if (code === 'FST_ERR_CTP_INVALID_MEDIA_TYPE' || status === 415) return notJson()
  if (status !== undefined && status >= 400 && status < 500) return new ApiError(status, 'invalid_request_error', message)
  return toApiError(err)
}

/** The queue's state in the snake_case the rest of /health uses. */
function queueView (q: QueueStats): Record<string, number | null> {
  return {
    running: q.running, waiting: q.waiting, max_queue: q.maxQueue, slots: q.slots, used_bytes: q.usedBytes, budget_bytes: q.budgetBytes,
    served: q.served, refused: q.refused, too_large: q.tooLarge, abandoned: q.abandoned,
  }
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

const shownAsIs: Redactor = (text) => text

/** Start the server; resolves once it listens. */
export async function startDecoderServer (opts: DecoderServerOptions): Promise<DecoderServer> {
  const { model, modelName, logger, generate } = opts
  const queue = new EngineQueue(opts.maxQueue, { slots: opts.admission?.slots ?? 1, budgetBytes: opts.admission?.budgetBytes })
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
  const guard = new FastifyRouteGuard(DECODER_ROUTES, routeRefusal)
  const app = Fastify({ loggerInstance: logger, bodyLimit: opts.maxBodyBytes, forceCloseConnections: true, rewriteUrl: guard.rewriteUrl })
  refuseOversizedContinue(app.server, opts.maxBodyBytes, () => ({ body: JSON.stringify(bodyTooLarge(opts.maxBodyBytes).toBody()) }))
  // Bodies stay bytes until a route reads them with body.ts, the reader the front door runs too.
  app.removeAllContentTypeParsers()
  app.addContentTypeParser('*', { parseAs: 'buffer' }, (_request, body, done) => { done(null, body) })
  // Absolute paths are the key holder's: with no key configured nobody holds it, and every answer is redacted.
  const redact = pathRedactor([[model.dir, 'model'], [opts.prefixCache?.dir, 'cacheDir'], ...(opts.redactRoots ?? [])])
  const holdsKey = (request: { headers: { authorization?: string | string[] } }): boolean => opts.apiKey !== undefined && bearerMatches(request.headers.authorization, opts.apiKey)
  const redactorFor = (request: { headers: { authorization?: string | string[] } }): Redactor => holdsKey(request) ? shownAsIs : redact
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
  // After the key (nothing is told without it), before the body and any handler.
  app.addHook('onRequest', guard.onRequest)
  app.setErrorHandler((err, request, reply) => {
    const api = fromFastify(err, opts.maxBodyBytes)
    if (api.status >= 500) logger.error({ err }, 'request failed')
    return sendError(reply, redactedError(api, redactorFor(request)))
  })
  app.setNotFoundHandler((request, reply) => {
    return sendError(reply, new ApiError(404, 'not_found_error', `no route ${request.method} ${request.url.split('?')[0]}`, null, 'unknown_route'))
  })

  // A model name that is a path (the default --model-name) is shown redacted without the key, and
  // what is shown is accepted as the name: a client sends back what /v1/models listed.
  const shownName = redact(modelName)
  const servesModel = (asked: string): boolean => asked === modelName || asked === shownName
  const modelCard = (request: { headers: { authorization?: string | string[] } }): Record<string, unknown> =>
    ({ id: redactorFor(request)(modelName), object: 'model', created: createdAt, owned_by: 'pd-bridge' })

  app.get('/health', async (request) => {
    if (anonymous.has(request)) return { status: closing ? 'shutting_down' : 'ok' }
    const store = opts.prefixCache === undefined ? null : await opts.prefixCache.storeHealth()
    const degraded = degradedReasons(store)
    return redactDeep({
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
      // max_positions: what prompt + completion may take here (llama.cpp's context may be smaller than the model's window).
      limits: {
        max_tokens: opts.maxTokens, max_positions: limits.maxPositions, max_body_bytes: opts.maxBodyBytes, max_queue: opts.maxQueue,
        max_batch: opts.admission?.slots ?? 1, batch_memory_bytes: opts.admission?.budgetBytes ?? null,
      },
      queue: queueView(queue.stats),
      // dir_id names the store without its path (doctor compares it where dir is redacted).
      cache: opts.prefixCache === undefined ? null : { dir: opts.prefixCache.dir, dir_id: storeIdentity(opts.prefixCache.dir), block_size: opts.prefixCache.blockSize, ...opts.prefixCache.describe() },
      store,
      ...opts.healthExtra?.(),
    }, redactorFor(request))
  })

  app.get('/v1/models', async (request) => ({ object: 'list', data: [modelCard(request)] }))
  app.get<{ Params: { id: string } }>('/v1/models/:id', async (request) => {
    if (!servesModel(request.params.id)) throw unknownModel(request.params.id, shownName)
    return modelCard(request)
  })

  app.post('/v1/cache/rescan', async (request) => {
    if (opts.prefixCache === undefined) throw new ApiError(404, 'not_found_error', 'this decoder runs without a prefix cache (no --cache-dir), so there is nothing to rescan', null, 'cache_disabled')
    const report = await opts.prefixCache.rescan()
    logger.info({ event: 'rescan', report }, 'cache rescanned')
    return redactDeep({ object: 'cache.rescan', report, cache: opts.prefixCache.describe() }, redactorFor(request))
  })

  async function serve (reply: FastifyReply, parsed: GenerationRequest): Promise<void> {
    if (closing) throw new ApiError(503, 'service_unavailable_error', 'the decoder is shutting down and takes no new requests')
    if (parsed.model !== undefined && !servesModel(parsed.model)) throw unknownModel(parsed.model, shownName)
    opts.checkRequest?.(parsed)
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
        release = await queue.acquire(abort.signal, opts.admission?.costOf(tokens.length, maxTokens) ?? 0)
      } catch (e) {
        if (!(e instanceof QueueAbandoned)) throw e
        logger.info({ event: 'generation', id, finish_reason: 'cancelled', queued: true }, 'client left while queued')
        reply.hijack()
        res.destroy()
        return
      }
      const head: ResponseHead = { id, created: Math.floor(Date.now() / 1000), model: redactorFor(reply.request)(modelName), system_fingerprint: systemFingerprint }
      const seed = parsed.sampling.seed ?? drawSeed()
      const job: GenerationJob = { tokens, maxTokens, stop: parsed.stop, ignoreEos: parsed.ignoreEos, sampling: parsed.sampling, seed, choice: 0 }
      const extra: DecoderExtra = isRandom(parsed.sampling) ? { seed } : {}
      const promptIds = parsed.returnTokenIds ? tokens : undefined
      const outcomes = parsed.stream
        ? await streamGeneration(reply, res, parsed, head, job, promptIds, extra, abort.signal)
        : await wholeGeneration(reply, parsed, head, job, promptIds, extra, abort.signal)
      if (outcomes === null) return
      const first = outcomes[0]
      logger.info({
        event: 'generation', id, endpoint: parsed.endpoint, stream: parsed.stream,
        prompt_tokens: first.promptTokens, cached_tokens: first.cachedTokens, stored_blocks: first.storedBlocks, reused_blocks: first.reusedBlocks, failed_blocks: first.failedBlocks,
        completion_tokens: usageOf(outcomes).completion_tokens, finish_reason: outcomes.length === 1 ? first.finishReason : outcomes.map((o) => o.finishReason),
        ...(extra.seed === undefined ? {} : { seed: extra.seed }), ...(outcomes.length === 1 ? {} : { choices: outcomes.length }),
        ...timingsOf(requestTimings(outcomes)),
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

  /**
   * The request's n choices, one after another on the engine (each its own prefill and decode,
   * choice i sampling with seed + i); stops at the first one cancelled, which is returned last.
   */
  async function runChoices (parsed: GenerationRequest, job: GenerationJob, hooks: (index: number) => GenerationHooks, signal: AbortSignal,
    finished?: (outcome: GenerationOutcome, index: number) => Promise<void>): Promise<GenerationOutcome[]> {
    const outcomes: GenerationOutcome[] = []
    for (let choice = 0; choice < parsed.sampling.n; choice++) {
      const outcome = await generate({ ...job, choice }, hooks(choice), signal)
      outcomes.push(outcome)
      if (outcome.finishReason === 'cancelled') break
      await finished?.(outcome, choice)
    }
    return outcomes
  }

  // A chat reply split as the checkpoint's chat format defines (DeepSeek-V4: reasoning, DSML tool calls).
  function replyParts (parsed: GenerationRequest, text: string): ReplyParts | undefined {
    const parse = model.tokenizer.chatFormat.parseReply
    if (parsed.prompt.kind !== 'chat' || parse === undefined) return undefined
    return parse.call(model.tokenizer.chatFormat, text, parsed.prompt.chat)
  }

  async function wholeGeneration (reply: FastifyReply, parsed: GenerationRequest, head: ResponseHead, job: GenerationJob, promptIds: number[] | undefined, extra: DecoderExtra,
    signal: AbortSignal): Promise<GenerationOutcome[]> {
    const outcomes = await runChoices(parsed, job, (choice) => ({
      onStart: ({ cachedTokens }) => { if (choice === 0) reply.header('x-cached-tokens', String(cachedTokens)) },
    }), signal)
    if (outcomes.some((o) => o.finishReason === 'cancelled')) {
      if (closing) sendError(reply, shutdownError())
      else reply.hijack()
      return outcomes
    }
    const choices: FinishedChoice[] = outcomes.map((o) => ({
      outcome: o,
      finish: o.finishReason as FinishedChoice['finish'],
      logprobs: o.logprobs === undefined ? null : new LogprobsFormat(model.tokenizer).format(parsed.endpoint, o.logprobs),
      parts: replyParts(parsed, o.text),
    }))
    const build = parsed.endpoint === 'chat' ? chatCompletion : textCompletion
    await reply.send(build(head, choices, promptIds, extra))
    return outcomes
  }

  async function streamGeneration (reply: FastifyReply, res: ServerResponse, parsed: GenerationRequest, head: ResponseHead, job: GenerationJob, promptIds: number[] | undefined,
    extra: DecoderExtra, signal: AbortSignal): Promise<GenerationOutcome[] | null> {
    reply.hijack()
    const sse = new SseWriter(res)
    const chunks = new ChunkMaker(parsed.endpoint, head, parsed.includeUsage)
    // Each choice's reply split as the chat format splits a whole one (none for a Jinja template).
    const splits = new Map<number, ReplyStreamer>()
    let outcomes: GenerationOutcome[]
    try {
      outcomes = await runChoices(parsed, job, (choice) => {
        const format = new LogprobsFormat(model.tokenizer)
        const split = parsed.prompt.kind === 'chat' ? ReplyStreamer.for(model.tokenizer.chatFormat, parsed.prompt.chat) : undefined
        if (split !== undefined) splits.set(choice, split)
        const formatted = (logprobs: Parameters<LogprobsFormat['format']>[1] | undefined): object | null => logprobs === undefined ? null : format.format(parsed.endpoint, logprobs)
        return {
          onStart: async ({ cachedTokens }) => {
            if (choice === 0) sse.open({ 'x-cached-tokens': String(cachedTokens) })
            // Prompt ids once, on the first choice's opening chunk.
            const first = chunks.first(choice === 0 ? promptIds : undefined, choice)
            if (first !== null) await sse.send(first)
          },
          onText: async (piece, logprobs) => {
            if (split === undefined) return sse.send(chunks.text(piece, choice, formatted(logprobs)))
            // Text the format may still claim (a tool-call block, </think>) waits; log-probabilities never do.
            const delta = split.push(piece)
            if (hasText(delta) || logprobs !== undefined) await sse.send(chunks.split(delta, choice, formatted(logprobs)))
          },
          // Between prefill chunks: `: prefill 2560/32768`, so the stream is never silent for long.
          onPrefill: ({ doneTokens, promptTokens }) => sse.comment(`prefill ${doneTokens}/${promptTokens}`),
        }
      }, signal, async (outcome, choice) => {
        const finish = outcome.finishReason as FinishedChoice['finish']
        const split = splits.get(choice)
        const end = split?.finish(outcome.text)
        if (end !== undefined) {
          if (hasText(end.delta)) await sse.send(chunks.split(end.delta, choice))
          for (const chunk of chunks.toolCalls(end.parts.tool_calls, choice)) await sse.send(chunk)
        }
        await sse.send(chunks.finish(chatFinishReason(finish, end?.parts), parsed.returnTokenIds ? outcome.completionIds : undefined, choice, extra))
      })
    } catch (e) {
      // The reply is hijacked: fastify's error handler cannot answer any more, so answer here.
      const api = redactedError(toApiError(e), redactorFor(reply.request))
      logger.error({ err: e, id: head.id }, 'generation failed')
      if (!res.headersSent) {
        res.writeHead(api.status, { 'content-type': 'application/json; charset=utf-8', ...api.headers })
        res.end(JSON.stringify(api.toBody()))
      } else await sse.fail(api)
      return null
    }
    if (outcomes.some((o) => o.finishReason === 'cancelled')) {
      if (closing && !sse.closed) {
        if (!res.headersSent) sse.open({})
        await sse.fail(shutdownError())
      } else sse.end()
      return outcomes
    }
    if (parsed.includeUsage) await sse.send(chunks.usage(usageOf(outcomes), timingsOf(requestTimings(outcomes)), extra))
    await sse.done()
    return outcomes
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

  const read = (endpoint: 'chat' | 'completion', request: FastifyRequest): GenerationRequest =>
    readGenerationRequest(endpoint, readJsonBody(request.headers['content-type'], request.body as Buffer | undefined))
  app.post('/v1/chat/completions', async (request, reply) => tracked(reply, read('chat', request)))
  app.post('/v1/completions', async (request, reply) => tracked(reply, read('completion', request)))

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
