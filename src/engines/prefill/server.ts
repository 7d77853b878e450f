// The prefill engine: one model loaded under the `prefill` profile, a FIFO of requests run one at a
// time with the capture hook on, and an HTTP API to submit prompts and poll them. It stands in for
// vLLM with the capture hook on a CUDA box, so it behaves like one: 202 + status polling, 4xx with
// a reason, 429 with Retry-After when the queue is full, and crash-safe capture manifests.
import { randomUUID } from 'node:crypto'
import { mkdir, stat } from 'node:fs/promises'
import { createServer, type IncomingMessage, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import { basename, resolve } from 'node:path'
import { captureDir, readManifest, type CaptureManifest } from '../../wire/manifest.ts'
import { ConfigError } from '../../errors.ts'
import { loadCheckpoint } from '../../model/checkpoint/index.ts'
import type { DeepseekV4Config } from '../../model/config.ts'
import { DeepseekV4Engine } from '../../model/engine/index.ts'
import { bearerMatches, isHealthPath, UNAUTHORIZED_MESSAGE } from '../../http/api-key.ts'
import { refuseOversizedContinue } from '../../http/expect-continue.ts'
import { pathRedactor, redactDeep } from '../../http/redact.ts'
import { parseCarryMeta } from '../../capture/carry.ts'
import { SafetensorsFile } from '../../formats/safetensors/index.ts'
import { ApiError, badRequest } from './api-error.ts'
import { readJsonBody } from './body.ts'
import { carryPath, findCarry, receiveCarry, removeCarry, sweepCarries } from './carry-store.ts'
import { deleteCapture, sweepDeletions } from './delete-capture.ts'
import { ms, type PrefillJob } from './job.ts'
import { resolveOptions, type PrefillEngineOptions, type ResolvedOptions } from './options.ts'
import { PrefillQueue } from './queue.ts'
import { failOrphanedCaptures, type RecoveryReport } from './recover.ts'
import { parsePrefillRequest, type RequestLimits } from './request.ts'
import { acquireRootLock, type RootLock } from './root-lock.ts'
import { dispatch, sendJson, type JsonReply, type Route } from './router.ts'
import { makeCaptureRunner, type StartCapture } from './runner.ts'

/** The capture side of the engine: the sidecar's fingerprint and a way to open a capture. */
export interface CaptureBackend {
  /** The decoder sidecar's geometry fingerprint, reported by /health and written in manifests. */
  fingerprint: string
  /** The decoder's numerics profile (the sidecar's): a carry continues exactly only under it. */
  profile?: string
  /** The sidecar's block size: carries stand at its multiples. */
  blockSize?: number
  startCapture: StartCapture
}

/** Opens the capture backend once the model is loaded (loads and checks the sidecar). */
export type OpenCaptureBackend = (opts: { sidecarDir: string, captureRoot: string, config: DeepseekV4Config, modelDir: string, profile: string, spill?: boolean }) => Promise<CaptureBackend>

/** A running prefill engine. */
export interface PrefillEngineServer {
  /** Base URL, e.g. http://127.0.0.1:40123 (no trailing slash). */
  url: string
  port: number
  /** The served model's name (the checkpoint directory's base name). */
  model: string
  profile: string
  sidecarFingerprint: string
  /** Effective prompt limit: --max-tokens, at most max_position_embeddings. */
  maxTokens: number
  /** What start-up recovery did under the capture root. */
  recovery: RecoveryReport
  /**
   * Stop: refuse new requests, fail the queued ones, abandon the running prefill at its next
   * chunk boundary (its capture is sealed failed; one already finishing completes), release the
   * root lock. `reason` goes into the failures, e.g. 'SIGTERM'.
   */
  close (reason?: string): Promise<void>
}

/** A status poll answered from a manifest on disk. */
function statusFromManifest (m: CaptureManifest): Record<string, unknown> {
  return {
    request_id: m.requestId,
    state: m.state,
    token_count: m.tokenCount,
    ...(m.tokensSha256 === undefined ? {} : { tokens_sha256: m.tokensSha256 }),
    sealed_length: m.sealedLength,
    timings: m.timings,
    ...(m.error === undefined ? {} : { error: m.error }),
  }
}

function listen (server: Server, host: string, port: number): Promise<void> {
  return new Promise((resolvePromise, reject) => {
    const onError = (e: NodeJS.ErrnoException): void => {
      reject(new ConfigError('--port', `cannot listen on ${host}:${port}: ${e.code ?? e.message}`))
    }
    server.once('error', onError)
    server.listen(port, host, () => {
      server.off('error', onError)
      resolvePromise()
    })
  })
}

function closeServer (server: Server, graceMs: number): Promise<void> {
  return new Promise((resolvePromise) => {
    const cut = setTimeout(() => server.closeAllConnections(), graceMs)
    server.close(() => {
      clearTimeout(cut)
      resolvePromise()
    })
    server.closeIdleConnections()
  })
}

async function ensureDirectory (dir: string): Promise<void> {
  await mkdir(dir, { recursive: true }).catch((e: NodeJS.ErrnoException) => {
    throw new ConfigError('--capture-root', `cannot create ${dir}: ${e.code ?? e.message}`)
  })
  const s = await stat(dir)
  if (!s.isDirectory()) throw new ConfigError('--capture-root', `${dir} is not a directory`)
}

async function isDirectory (dir: string): Promise<boolean> {
  try {
    return (await stat(dir)).isDirectory()
  }
  catch {
    return false
  }
}

/**
 * Start a prefill engine: take the capture root's lock, seal orphaned `running` captures as
 * failed ('engine restarted'), load the model and the capture backend, and listen. Start-up
 * problems are ConfigErrors (or the loaders' errors) naming the flag or file.
 */
export async function createPrefillEngine (options: PrefillEngineOptions, openBackend: OpenCaptureBackend): Promise<PrefillEngineServer> {
  const o = resolveOptions(options)
  const log = (event: Record<string, unknown>): void => { o.log(JSON.stringify({ time: new Date().toISOString(), ...event })) }
  await ensureDirectory(o.captureRoot)
  const lock = await acquireRootLock(o.captureRoot)
  try {
    const previous = lock.staleFrom === undefined ? 'a previous engine' : `the previous engine (pid ${lock.staleFrom.pid})`
    const recovery = await failOrphanedCaptures(o.captureRoot, `engine restarted: ${previous} stopped while this capture was running`)
    for (const id of recovery.markedFailed) log({ event: 'recovered', request_id: id, state: 'failed' })
    for (const id of recovery.removed) log({ event: 'recovered', request_id: id, state: 'removed', why: 'the capture never started (no manifest)' })
    for (const u of recovery.unreadable) log({ event: 'recovery-skipped', request_id: u.requestId, problem: u.problem })
    for (const name of await sweepDeletions(o.captureRoot)) log({ event: 'deletion-finished', dir: name })
    for (const name of await sweepCarries(o.captureRoot)) log({ event: 'carry-removed', file: name, why: 'left by an earlier engine' })

    const ckpt = await loadCheckpoint(o.model)
    const engine = DeepseekV4Engine.fromCheckpoint(ckpt, o.profile)
    const config = ckpt.config
    if (o.maxTokens !== undefined && o.maxTokens > config.maxPositionEmbeddings) {
      throw new ConfigError('--max-tokens', `${o.maxTokens} is more than the model's max_position_embeddings (${config.maxPositionEmbeddings})`)
    }
    const maxTokens = o.maxTokens ?? config.maxPositionEmbeddings
    const backend = await openBackend({ sidecarDir: o.sidecar, captureRoot: o.captureRoot, config, modelDir: o.model, profile: engine.profile.name, spill: o.spillCapture })
    return await serve({ o, log, lock, recovery, engine, backend, maxTokens, limits: {
      vocabSize: config.vocabSize, maxTokens, maxPositionEmbeddings: config.maxPositionEmbeddings, tokenizer: ckpt.tokenizer,
    } })
  }
  catch (e) {
    await lock.release()
    throw e
  }
}

interface ServeParts {
  o: ResolvedOptions
  log: (event: Record<string, unknown>) => void
  lock: RootLock
  recovery: RecoveryReport
  engine: DeepseekV4Engine
  backend: CaptureBackend
  maxTokens: number
  limits: RequestLimits
}

async function serve (p: ServeParts): Promise<PrefillEngineServer> {
  const { o, log, engine, backend, limits } = p
  const model = basename(resolve(o.model))
  const created = Math.floor(Date.now() / 1000)
  const bodyLimit = o.maxBodyBytes ?? 1024 * 1024 + 16 * p.maxTokens
  let stopping: string | undefined
  let baseUrl = ''

  // Engine throughput (tokens per ms), smoothed, for Retry-After.
  let rate = 0
  // Tokens run for every request since start: a waiting request's client sees the engine move.
  let prefilledTotal = 0
  // Submits answered 202 since start: what a caller that must not have started work checks.
  let acceptedTotal = 0
  const queue: PrefillQueue = new PrefillQueue(makeCaptureRunner({
    engine,
    startCapture: backend.startCapture,
    maxChunk: o.maxChunk,
    stopReason: () => (stopping === undefined ? undefined : `engine shut down (${stopping})`),
    onChunk: (tokens, elapsed) => {
      const r = tokens / Math.max(elapsed, 1e-3)
      rate = rate === 0 ? r : 0.7 * rate + 0.3 * r
      prefilledTotal += tokens
      const job = queue.running
      if (job !== undefined) job.prefilled += tokens
    },
    log,
  }), {
    maxQueue: o.maxQueue,
    // A slot frees when the running request finishes: its remaining tokens at the measured rate.
    retryAfterSeconds: (): number => {
      const job = queue.running
      if (job === undefined || rate === 0) return 1
      return (job.tokens.length - job.prefilled) / rate / 1000
    },
  })

  function statusOf (job: PrefillJob): Record<string, unknown> {
    const position = queue.positionOf(job)
    return {
      request_id: job.requestId,
      state: job.state,
      token_count: job.tokens.length,
      ...(job.tokensSha256 === undefined ? {} : { tokens_sha256: job.tokensSha256 }),
      sealed_length: job.sealedLength,
      prefilled_tokens: job.prefilled,
      engine_prefilled_tokens: prefilledTotal,
      timings: job.timings,
      ...(job.resume === undefined ? {} : { start_token: job.resume.startToken }),
      ...(position === undefined ? {} : { queue_position: position }),
      ...(job.error === undefined ? {} : { error: job.error }),
    }
  }

  async function submit (req: IncomingMessage): Promise<JsonReply> {
    const body = await readJsonBody(req, bodyLimit)
    if (stopping !== undefined) throw new ApiError(503, 'service_unavailable_error', `the engine is shutting down (${stopping}) and takes no new requests`)
    const request = parsePrefillRequest(body, limits)
    const requestId = request.requestId ?? `prefill-${randomUUID()}`
    if (request.requestId !== undefined && queue.get(requestId) === undefined && await isDirectory(captureDir(o.captureRoot, requestId))) {
      throw new ApiError(409, 'conflict_error', `request_id ${JSON.stringify(requestId)} was already used: its capture directory exists under the capture root`, 'request_id')
    }
    const resume = request.resume === undefined ? undefined : await resumeOf(request.resume.carryId, request.tokens.length)
    const job: PrefillJob = {
      requestId,
      source: request.source,
      tokens: request.tokens,
      tokensSha256: request.tokensSha256,
      memoryBudgetBytes: request.memoryBudgetBytes ?? o.memoryBudgetBytes,
      state: 'queued',
      sealedLength: 0,
      prefilled: 0,
      timings: {},
      submittedAt: performance.now(),
      ...(resume === undefined ? {} : { resume }),
      ...(request.streamBlocks === true ? { streamBlocks: true } : {}),
    }
    const ahead = queue.submit(job, (position) => {
      log({ event: 'queued', request_id: requestId, source: request.source, token_count: job.tokens.length, queue_position: position, ...(resume === undefined ? {} : { start_token: resume.startToken }) })
    })
    acceptedTotal++
    const statusPath = `/v1/prefill/${encodeURIComponent(requestId)}`
    return {
      status: 202,
      headers: { Location: statusPath },
      body: { request_id: requestId, status_url: baseUrl + statusPath, token_count: job.tokens.length, queue_position: ahead },
    }
  }

  // Why this engine cannot continue a carry exactly, or undefined when it can: its forward must be
  // the decoder's own (the same numerics profile), or the cache it continues is not its own.
  function resumeRefusal (): string | undefined {
    if (backend.profile === undefined || backend.blockSize === undefined) return 'the capture backend does not say its profile and block size'
    if (backend.profile !== engine.profile.name) {
      return `this engine prefills under profile ${engine.profile.name} and the decoder's cache is under ${backend.profile}: continuing from the decoder's cache would not be this engine's own prefill`
    }
    return undefined
  }

  function carryExpectations () {
    return { fingerprint: backend.fingerprint, numLayers: engine.config.layerTypes.length, blockSize: backend.blockSize as number, maxPositionEmbeddings: limits.maxPositionEmbeddings }
  }

  async function putCarry (req: IncomingMessage, id: string): Promise<JsonReply> {
    if (stopping !== undefined) {
      req.resume()
      throw new ApiError(503, 'service_unavailable_error', `the engine is shutting down (${stopping}) and takes no new requests`)
    }
    const refusal = resumeRefusal()
    if (refusal !== undefined) {
      req.resume()
      throw new ApiError(409, 'conflict_error', `warm-extended prompts are not served here: ${refusal}`)
    }
    const carry = await receiveCarry(req, o.captureRoot, id, o.maxCarryBytes, carryExpectations())
    log({ event: 'carry-received', carry_id: id, tokens: carry.meta.tokens, bytes: carry.bytes })
    return { status: 201, body: { carry_id: id, tokens: carry.meta.tokens, bytes: carry.bytes } }
  }

  // The job's resume for carry `id`: refused when this engine cannot continue exactly, or the carry does not fit the prompt.
  async function resumeOf (id: string, tokenCount: number): Promise<NonNullable<PrefillJob['resume']>> {
    const refusal = resumeRefusal()
    if (refusal !== undefined) throw new ApiError(409, 'conflict_error', `warm-extended prompts are not served here: ${refusal}`, 'resume')
    const { path } = await findCarry(o.captureRoot, id)
    const file = await SafetensorsFile.open(path)
    let startToken: number
    try {
      startToken = parseCarryMeta(file.metadata, path).tokens
    } finally {
      await file.close()
    }
    if (startToken >= tokenCount) throw badRequest(`resume: carry ${JSON.stringify(id)} stands at token ${startToken}, not below the prompt's ${tokenCount} tokens`, 'resume.carry_id')
    return { carryId: id, path, startToken }
  }

  // A carry no request will use (its submit failed): removed, unless a queued or running job holds it.
  async function dropCarry (id: string): Promise<JsonReply> {
    const path = carryPath(o.captureRoot, id)
    const user = queue.unsettled.find((j) => j.resume?.path === path)
    if (user !== undefined) throw new ApiError(409, 'conflict_error', `carry ${JSON.stringify(id)} is in use by request ${JSON.stringify(user.requestId)}; it goes when that request ends`)
    await removeCarry(o.captureRoot, id)
    log({ event: 'carry-removed', carry_id: id, why: 'deleted by the client' })
    return { status: 200, body: { carry_id: id, deleted: true } }
  }

  async function status (id: string): Promise<JsonReply> {
    const job = queue.get(id)
    if (job !== undefined) return { status: 200, body: statusOf(job) }
    // Not in memory (an earlier engine's request, or forgotten): the manifest on disk answers.
    let dir: string | undefined
    try {
      dir = captureDir(o.captureRoot, id)
    }
    catch {
      dir = undefined
    }
    if (dir !== undefined && await isDirectory(dir)) {
      try {
        return { status: 200, body: statusFromManifest(await readManifest(dir)) }
      }
      catch (e) {
        return { status: 200, body: { request_id: id, state: 'failed', token_count: 0, sealed_length: 0, timings: {}, error: `the capture manifest cannot be read: ${(e as Error).message}` } }
      }
    }
    throw new ApiError(404, 'not_found_error', `no prefill request ${JSON.stringify(id)} (not queued, running, remembered, or under the capture root)`)
  }

  async function remove (id: string): Promise<JsonReply> {
    const { deleted } = await deleteCapture(o.captureRoot, id, queue.get(id))
    queue.forget(id)
    log({ event: 'deleted', request_id: id, files: deleted })
    return { status: 200, body: { request_id: id, deleted: true } }
  }

  function health (): JsonReply {
    return {
      status: 200,
      body: {
        status: stopping === undefined ? 'ok' : 'stopping',
        model,
        profile: engine.profile.name,
        sidecar_fingerprint: backend.fingerprint,
        queue_length: queue.length,
        running: queue.running?.requestId ?? null,
        engine_prefilled_tokens: prefilledTotal,
        accepted_requests: acceptedTotal,
        max_queue: o.maxQueue,
        max_tokens: p.maxTokens,
        prefix_caching: false,
        warm_extend: resumeRefusal() === undefined ? { supported: true } : { supported: false, reason: resumeRefusal() },
        // Takes `stream_blocks`: block segments published after every chunk (docs/prefill-engine.md).
        stream_blocks: true,
      },
    }
  }

  const routes: Route[] = [
    { methods: ['GET'], path: '/health', handler: health },
    {
      methods: ['GET'],
      path: '/v1/models',
      handler: () => ({
        status: 200,
        body: { object: 'list', data: [{ id: model, object: 'model', created, owned_by: 'pd-bridge', max_model_len: limits.maxPositionEmbeddings }] },
      }),
    },
    { methods: ['POST'], path: '/v1/prefill', handler: submit },
    { methods: ['PUT'], path: '/v1/carry/:id', handler: (req, [id]) => putCarry(req, id) },
    { methods: ['DELETE'], path: '/v1/carry/:id', handler: (_req, [id]) => dropCarry(id) },
    { methods: ['GET'], path: '/v1/prefill/:id', handler: (_req, [id]) => status(id) },
    { methods: ['DELETE'], path: '/v1/prefill/:id', handler: (_req, [id]) => remove(id) },
  ]

  /** With a key: a 401 for a request without it; a bare /health still answers, with its status alone. */
  function authorize (req: IncomingMessage): JsonReply | undefined {
    if (o.apiKey === undefined || bearerMatches(req.headers.authorization, o.apiKey)) return undefined
    if (req.method === 'GET' && isHealthPath(req.url)) return { status: 200, body: { status: stopping === undefined ? 'ok' : 'stopping' } }
    const e = new ApiError(401, 'authentication_error', UNAUTHORIZED_MESSAGE, undefined, { 'WWW-Authenticate': 'Bearer' })
    return { status: 401, body: e.toBody(), headers: e.headers }
  }

  // Absolute paths are the key holder's: with no key configured nobody holds it, and every answer is redacted.
  const redact = pathRedactor([[o.captureRoot, 'captureRoot'], [o.model, 'model'], [o.sidecar, 'sidecar']])
  const shown = (req: IncomingMessage, reply: JsonReply): JsonReply => o.apiKey !== undefined && bearerMatches(req.headers.authorization, o.apiKey)
    ? reply
    : { ...reply, body: redactDeep(reply.body, redact), ...(reply.headers === undefined ? {} : { headers: redactDeep(reply.headers, redact) }) }

  const server = createServer((req, res) => {
    const t0 = performance.now()
    const refused = authorize(req)
    // A refused request's body is drained unread.
    if (refused !== undefined) req.resume()
    void (refused !== undefined ? Promise.resolve(refused) : dispatch(routes, req)).then((reply) => {
      sendJson(res, shown(req, reply))
      const err = (reply.body as { error?: { message?: string } }).error
      log({ event: 'http', method: req.method, target: req.url, status: reply.status, ms: ms(performance.now() - t0), ...(err?.message === undefined ? {} : { reason: err.message }) })
    }).catch((e: unknown) => {
      // Only a broken socket gets here (dispatch never throws); drop the connection, keep serving.
      log({ event: 'http-error', method: req.method, target: req.url, error: (e as Error).message })
      res.destroy()
    })
  })
  // A carry has its own limit; every other body the JSON one.
  refuseOversizedContinue(server, (req) => req.method === 'PUT' ? o.maxCarryBytes : bodyLimit, (declared, limit) => {
    return { body: JSON.stringify(new ApiError(413, 'request_too_large_error', `the request body is ${declared} bytes, more than the limit of ${limit} bytes`).toBody()) }
  })
  server.on('clientError', (err: NodeJS.ErrnoException, socket) => {
    if (err.code === 'ECONNRESET' || !socket.writable) {
      socket.destroy()
      return
    }
    const body = JSON.stringify({ error: { message: `unparsable request: ${err.code ?? err.message}`, type: 'invalid_request_error' } })
    socket.end(`HTTP/1.1 400 Bad Request\r\nConnection: close\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`)
  })
  await listen(server, o.host, o.port)
  const address = server.address() as AddressInfo
  const shownHost = address.family === 'IPv6' ? `[${address.address}]` : address.address
  baseUrl = `http://${shownHost}:${address.port}`

  let closing: Promise<void> | undefined
  async function close (reason = 'close'): Promise<void> {
    stopping = reason
    log({ event: 'stopping', reason, running: queue.running?.requestId ?? null, queued: queue.length })
    const closed = closeServer(server, 2000)
    await queue.stop(`engine shut down (${reason}) before this request ran`)
    await closed
    await p.lock.release()
    log({ event: 'stopped', reason })
  }

  return {
    url: baseUrl,
    port: address.port,
    model,
    profile: engine.profile.name,
    sidecarFingerprint: backend.fingerprint,
    maxTokens: p.maxTokens,
    recovery: p.recovery,
    close: (reason?: string) => (closing ??= close(reason)),
  }
}
