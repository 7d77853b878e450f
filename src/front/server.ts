// The front door: an OpenAI-compatible fastify server in front of the decoder. Completion
// requests are routed (short, warm, over the guard -> straight to the decoder; cold and long ->
// bridged first), forwarded, and answered with the verdict. Requests the embedded decoder would
// refuse are refused first, with its own rules. /health reports every link; the decoder's internal
// routes (/v1/cache/...) are a 404; every other route passes through to the decoder untouched. HTTP handling is concurrent; only bridge
// work is serialized, in a bounded queue.
import { mkdtemp, readdir, rm } from 'node:fs/promises'
import type { AddressInfo } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import Fastify, { type FastifyInstance, type FastifyReply, type FastifyRequest } from 'fastify'
import type { Logger } from 'pino'
import { request as undiciRequest, type Dispatcher } from 'undici'
import type { FrontConfig } from '../config/index.ts'
import type { PrefixCacheEvent } from '../decode/prefix-cache/index.ts'
// The embedded decoder's own request checks, run here before any bridge work (never copied).
import { completionBudget } from '../engines/decoder/prompt.ts'
import { parseChatRequest, parseCompletionRequest, type GenerationRequest } from '../engines/decoder/request.ts'
import { authHeaders, bearerMatches, isHealthPath, UNAUTHORIZED_MESSAGE } from '../http/api-key.ts'
import { FrontApiError, invalidRequest, toFrontApiError } from './api-error.ts'
import { BridgeFailure, runBridge } from './bridge.ts'
import { forwardGeneration, type ForwardPlan, type PdBridgeInfo } from './forward.ts'
import { passHeaders } from '../http/hop-by-hop.ts'
import { describeFailure, joinUrl } from './http.ts'
import { checkLink, decoderFacts, decoderModels, type LinkState } from './links.ts'
import { readFrontRequest, type Endpoint, type FrontRequest } from './prompt.ts'
import { BridgeQueue, QueueFull, QueueLeft } from './queue.ts'
import { pathRedactor, redactDeep } from './redact.ts'
import { decideRoute } from './routing.ts'
import { buildSetup, missingForBridge, type BridgeSetup } from './setup.ts'
import { PromptTokenizer } from './tokenize.ts'
import { declined, VERDICT_HEADER, verdictText, type BridgedPlan, type Verdict } from './verdict.ts'

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

const PASSTHROUGH_VERDICT = 'declined: passthrough (not a completion request)'
/** The decoder's internal routes (operators only): never passed through, a 404 from the front door. */
const INTERNAL_PREFIXES = ['/v1/cache']

function isInternal (url: string): boolean {
  const path = url.split('?')[0].replace(/\/+/g, '/').replace(/\/$/, '').toLowerCase()
  return INTERNAL_PREFIXES.some((p) => path === p || path.startsWith(p + '/'))
}
// Passed through to and from the decoder: host is the decoder's own, and undici frames the body itself.
const PASS_THROUGH_DROPS = ['host', 'content-length']

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

function newInfo (): PdBridgeInfo {
  return {
    verdict: '', route: 'native', prompt_tokens: null, stored_tokens_before: null, bridged_tokens: 0, cached_tokens: null,
    blocks: null, capture: null, rescan: null, timings_ms: {}, bytes: {},
  }
}

function isJsonType (type: string | undefined): boolean {
  return type === undefined || /^application\/([a-z0-9.+-]+\+)?json\s*(;|$)/i.test(type)
}

/** Start the front door; resolves once it listens. */
export async function startFrontDoor (options: FrontDoorOptions): Promise<FrontDoor> {
  const { config, logger, apiKey } = options
  const d = config.deadlines
  // What every request to the decoder, the prefill engine and the share carries.
  const auth = authHeaders(apiKey)
  const ownSpool = config.share.url !== undefined && config.capture.spoolDir === undefined
  const spoolDir = ownSpool ? await mkdtemp(join(tmpdir(), 'pd-bridge-front-spool-')) : config.capture.spoolDir
  const effective: FrontConfig = { ...config, capture: { ...config.capture, spoolDir } }
  const queue = new BridgeQueue(config.queue.maxWaiting)
  const tokenizer = new PromptTokenizer(config.limits.tokenizeWorkerBytes)
  const redact = pathRedactor(config, spoolDir)
  /** The decoder's completion limits, from its /health (the embedded decoder reports them). */
  let decoderLimits: { maxTokens: number, maxPositions: number } | undefined
  const noteFacts = (facts: ReturnType<typeof decoderFacts>): void => {
    if (facts.model !== undefined) decoderModel = facts.model
    if (facts.maxTokens !== undefined && facts.maxPositions !== undefined) decoderLimits = { maxTokens: facts.maxTokens, maxPositions: facts.maxPositions }
  }
  const setups = new Map<string, Promise<BridgeSetup>>()
  let modelIds: { at: number, ids: string[], embedded: boolean } | undefined
  // The model the decoder last said it serves: block keys are hashed with it.
  let decoderModel: string | undefined
  let bridgeMsAverage = 0
  let closing = false
  const counts = { requests: 0, bridged: 0, declined: 0 }

  const storeLog = (event: PrefixCacheEvent): void => {
    if (event.kind === 'refused' || event.kind === 'unreadable' || event.kind === 'restore-rejected' || event.kind === 'geometry-miss') logger.warn({ event: `store.${event.kind}`, detail: event }, `store: ${event.kind}`)
  }

  /** The setup for the decoder's model name (configured, or what the decoder says it serves). */
  async function setupFor (decoderModel: string | undefined): Promise<BridgeSetup> {
    const name = config.decoder.modelName ?? decoderModel
    if (name === undefined) throw new Error('the decoder did not say which model it serves (its /health has no model); set decoder.modelName (PD_MODEL_NAME)')
    let setup = setups.get(name)
    if (setup === undefined) {
      setup = buildSetup(effective, name, storeLog)
      setups.set(name, setup)
      // A failed setup (a file not there yet) is tried again on the next request.
      setup.catch(() => setups.delete(name))
    }
    return await setup
  }

  /** The decoder's served model ids and whether it is the embedded decoder, cached for 5 s (empty when it cannot be asked). */
  async function servedModels (): Promise<{ ids: string[], embedded: boolean }> {
    if (modelIds !== undefined && Date.now() - modelIds.at < 5000) return modelIds
    try {
      modelIds = { at: Date.now(), ...await decoderModels(config.decoder.url, d.linkMs, auth) }
    } catch {
      return { ids: [], embedded: false }
    }
    return modelIds
  }

  interface LinkReport {
    decoder: LinkState
    prefill?: LinkState
    share?: LinkState
    /** Everything that stops a bridge, in the order a request would meet it. */
    problems: string[]
    setup?: BridgeSetup
  }

  /** Check every link and the geometry each reports; `problems` is empty when a bridge can run. */
  async function linkReport (): Promise<LinkReport> {
    const [decoder, prefill, share] = await Promise.all([
      checkLink('decoder', config.decoder.url, d.linkMs, auth),
      config.prefill.url !== undefined ? checkLink('prefill engine', config.prefill.url, d.linkMs, auth) : undefined,
      config.share.url !== undefined ? checkLink('share', config.share.url, d.linkMs, auth) : undefined,
    ])
    const report: LinkReport = { decoder, prefill, share, problems: [] }
    const off = missingForBridge(config)
    if (off !== undefined) {
      report.problems.push(off)
      return report
    }
    if (!decoder.ok) report.problems.push(`decoder ${decoder.busy === true ? 'not answering' : 'unreachable'}: ${decoder.error}`)
    // A busy engine (connected, no answer in time) is not a problem: the bridge waits its turn and
    // the submit decides (202, or `prefill engine busy`); the capture manifest still pins the sidecar.
    if (prefill !== undefined && !prefill.ok && prefill.busy !== true) report.problems.push(`prefill engine unreachable: ${prefill.error}`)
    if (share !== undefined && !share.ok) report.problems.push(`share ${share.busy === true ? 'not answering' : 'unreachable'}: ${share.error}`)
    const facts = decoderFacts(decoder.health)
    noteFacts(facts)
    let setup: BridgeSetup | undefined
    try {
      setup = await setupFor(facts.model)
      report.setup = setup
    } catch (e) {
      report.problems.push(`bridge unavailable: ${(e as Error).message}`)
      return report
    }
    if (setup.problem !== undefined) report.problems.push(setup.problem)
    if (facts.model !== undefined && facts.model !== setup.modelName) report.problems.push(`model mismatch: the decoder serves '${facts.model}', the front door keys blocks under '${setup.modelName}' (decoder.modelName)`)
    if (facts.blockSize !== undefined && facts.blockSize !== setup.blockSize) report.problems.push(`geometry mismatch: the decoder's block size is ${facts.blockSize}, the front door's ${setup.blockSize} (decoder.blockSize, PD_BLOCK_SIZE)`)
    if (facts.geometryFingerprint !== undefined && facts.geometryFingerprint !== setup.target.geometryFingerprint) {
      report.problems.push(`geometry mismatch: the decoder's store geometry is ${facts.geometryFingerprint}, the front door computes ${setup.target.geometryFingerprint} from ${config.decoder.model} under ${config.decoder.engine === 'llama.cpp' ? 'llama.cpp\'s context settings' : `profile ${config.decoder.profile}`}; bridged caches would never be served`)
    }
    const engineSidecar = prefill?.health?.sidecar_fingerprint
    if (typeof engineSidecar === 'string' && engineSidecar !== setup.sidecar.fingerprint) {
      report.problems.push(`geometry mismatch: the prefill engine captures under sidecar ${engineSidecar}, the front door expects ${setup.sidecar.fingerprint} (${config.sidecar})`)
    }
    return report
  }

  /** Route one request and bridge it when the rule says so; fills `info`; returns what to confirm. */
  async function plan (fr: FrontRequest, info: PdBridgeInfo, signal: AbortSignal, checked: GenerationRequest | undefined, bodyBytes: number): Promise<{ bridged: BridgedPlan } | { verdict: Verdict }> {
    const off = missingForBridge(config)
    if (off !== undefined) return { verdict: declined(off) }
    if (fr.prompt.kind === 'opaque') return { verdict: declined(`prompt not tokenizable by the front door: ${fr.prompt.why}`) }
    let setup: BridgeSetup
    try {
      if ((config.decoder.modelName === undefined && decoderModel === undefined) || (checked !== undefined && decoderLimits === undefined)) {
        noteFacts(decoderFacts((await checkLink('decoder', config.decoder.url, d.linkMs, auth)).health))
      }
      setup = await setupFor(decoderModel)
    } catch (e) {
      return { verdict: declined(`bridge unavailable: ${(e as Error).message}`) }
    }
    let tokens: number[] | null
    try {
      // Once per request: these ids are routed, looked up in the store and bridged.
      tokens = await tokenizer.tokenize({ prompt: fr.prompt, bodyBytes, modelDir: config.decoder.model as string, tokenizer: setup.tokenizer, vocabSize: setup.cfg.vocabSize })
    } catch (e) {
      logger.error({ err: e }, 'tokenizer failed')
      return { verdict: declined(`prompt not tokenizable by the front door: ${(e as Error).message}`) }
    }
    if (tokens === null) return { verdict: declined('prompt holds token ids outside the vocabulary') }
    const t = tokens.length
    info.prompt_tokens = t
    // The decoder's own context check, with the same ids, before any bridge work.
    if (checked !== undefined && decoderLimits !== undefined) completionBudget(t, checked, decoderLimits)
    const rules = config.routing
    // Only prompts the length rules let through are worth a look at the store.
    const probe = t >= rules.minTokens && t <= rules.maxBridgeTokens
    const stored = probe ? await setup.target.storedBlocks(tokens) : 0
    const route = decideRoute({ promptTokens: t, storedBlocks: stored, blockSize: setup.blockSize }, rules)
    info.stored_tokens_before = probe ? route.cachedTokens : null
    if (!route.bridge) return { verdict: declined(route.reason) }
    const links = await linkReport()
    if (links.problems.length > 0) return { verdict: declined(links.problems[0]) }
    info.route = 'bridge'
    try {
      const { result, waitedMs } = await queue.run(() => runBridge(effective, setup, { tokens, blocks: route.blocks }, auth), d.queueMs, signal)
      bridgeMsAverage = bridgeMsAverage === 0 ? result.timings.bridge_total : 0.7 * bridgeMsAverage + 0.3 * result.timings.bridge_total
      info.timings_ms = { queue: Math.round(waitedMs), ...result.timings }
      info.bytes = result.bytes
      info.bridged_tokens = result.bridgedTokens
      info.blocks = { bridged: result.report.blocks, written: result.report.written, reused: result.report.reused }
      info.capture = { request_id: result.requestId, state: result.state, token_count: result.captureTokens, sealed_length: result.sealedLength, tokens_sha256: result.tokensSha256, retention: result.retention }
      info.rescan = result.rescan.ok ? { ok: true } : { ok: false, error: result.rescan.error }
      logger.info({ event: 'bridge', request_id: result.requestId, state: result.state, blocks: result.report.blocks, bridged_tokens: result.bridgedTokens, timings: info.timings_ms, bytes: info.bytes, rescan: info.rescan, capture_retention: result.retention }, 'bridged')
      return { bridged: { state: result.state, bridgedTokens: result.bridgedTokens, promptTokens: t } }
    } catch (e) {
      info.route = 'native'
      if (e instanceof QueueFull) {
        if (config.queue.whenFull === 'reject') {
          const seconds = Math.max(1, Math.ceil(((e.waiting + 1) * (bridgeMsAverage || 1000)) / 1000))
          throw new FrontApiError(429, 'rate_limit_error', `${e.message}; retry later (queue.whenFull is reject)`, null, 'bridge_queue_full', {
            'retry-after': String(seconds), [VERDICT_HEADER]: `declined: bridge queue full (${e.waiting} waiting), request refused`,
          })
        }
        return { verdict: declined(`bridge queue full (${e.waiting} waiting behind the running bridge)`) }
      }
      if (e instanceof QueueLeft) return { verdict: declined(e.message) }
      if (e instanceof BridgeFailure) {
        info.timings_ms = { ...e.timings }
        // A failed bridge's capture is never deleted: it is the record of what went wrong.
        logger.warn({ event: 'bridge-failed', stage: e.stage, reason: e.reason, timings: e.timings, ...(e.requestId === undefined ? {} : { capture_kept: e.requestId }) }, `bridge failed at ${e.stage}`)
        return { verdict: declined(e.reason) }
      }
      logger.error({ err: e }, 'bridge crashed')
      return { verdict: declined(`bridge failed: ${(e as Error).message}`) }
    }
  }

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

  app.get('/health', async (request, reply) => {
    const links = await linkReport()
    const setup = links.setup
    const ok = links.decoder.ok
    const status = closing ? 'shutting_down' : !ok ? 'down' : links.problems.length > 0 ? 'degraded' : 'ok'
    // Without the key: liveness only, no URL, path, problem or count.
    if (anonymous.has(request)) return reply.code(ok ? 200 : 503).send({ ok, status })
    const view = (l: LinkState | undefined): object | null => l === undefined ? null : { ok: l.ok, url: l.url, ms: l.ms, ...(l.busy === true ? { busy: true } : {}), ...(l.error !== undefined ? { error: l.error } : {}) }
    let spoolEntries: number | null = null
    if (spoolDir !== undefined) spoolEntries = await readdir(spoolDir).then((l) => l.length, () => null)
    return reply.code(ok ? 200 : 503).send(redactDeep({
      ok,
      front: 'pd',
      status,
      bridge: { ready: links.problems.length === 0, problems: links.problems },
      links: {
        decoder: { ...view(links.decoder), ...decoderFacts(links.decoder.health) },
        prefill: view(links.prefill),
        share: view(links.share),
        store: setup === undefined
          ? { ok: false, dir: config.decoder.cacheDir ?? null }
          : { ok: true, dir: config.decoder.cacheDir, model_name: setup.modelName, block_size: setup.blockSize, geometry_fingerprint: setup.target.geometryFingerprint,
            engine: setup.target.kind, blocks: setup.target.size(), bytes: setup.target.totalBytes() },
        sidecar: setup === undefined
          ? { ok: false, dir: config.sidecar ?? null }
          : { ok: true, dir: setup.sidecar.dir, fingerprint: setup.sidecar.fingerprint, block_size: setup.sidecar.json.blockSize, profile: setup.sidecar.json.profile.name },
        capture: { mode: config.share.url !== undefined ? 'share' : config.capture.dir !== undefined ? 'local' : 'none', dir: config.capture.dir ?? null, spool_dir: spoolDir ?? null, spool_entries: spoolEntries },
      },
      queue: { ...queue.view, when_full: config.queue.whenFull },
      routing: { min_tokens: config.routing.minTokens, min_tail: config.routing.minTail, max_bridge_tokens: config.routing.maxBridgeTokens, block_size: config.decoder.blockSize },
      requests: counts,
      tokenize: tokenizer.stats,
    }, redact))
  })

  async function generation (endpoint: Endpoint, path: string, request: FastifyRequest, reply: FastifyReply): Promise<void> {
    if (closing) throw new FrontApiError(503, 'service_unavailable_error', 'the front door is shutting down and takes no new requests', null, 'shutting_down')
    if (!isJsonType(request.headers['content-type'])) throw new FrontApiError(415, 'unsupported_media_type_error', 'the request body must be JSON (Content-Type: application/json)', null, 'unsupported_media_type')
    const raw = request.body as Buffer | undefined
    if (raw === undefined || raw.length === 0) throw invalidRequest('the request body is empty; send a JSON object', null, 'invalid_json')
    let body: unknown
    try {
      body = JSON.parse(raw.toString('utf8'))
    } catch (e) {
      throw invalidRequest(`the request body is not valid JSON: ${(e as Error).message}`, null, 'invalid_json')
    }
    const fr = readFrontRequest(body, endpoint)
    const rules = config.decoder.requestRules
    const decoder = fr.model !== undefined || rules === 'auto' ? await servedModels() : undefined
    if (fr.model !== undefined && decoder !== undefined) {
      const served = decoder.ids
      if (served.length > 0 && !served.includes(fr.model)) {
        throw new FrontApiError(404, 'invalid_request_error', `the model '${fr.model}' does not exist; the decoder serves ${served.map((m) => `'${m}'`).join(', ')}`, 'model', 'model_not_found')
      }
    }
    // The embedded decoder's own request checks, before any bridge work: what it would refuse 8 s
    // later (max_tokens 0, temperature 0.7) is refused now with the same status and error body.
    const embedded = rules === 'embedded' || (rules === 'auto' && decoder?.embedded === true)
    const checked = embedded ? (endpoint === 'chat' ? parseChatRequest(body) : parseCompletionRequest(body)) : undefined
    counts.requests++
    const abort = new AbortController()
    const onClose = (): void => { if (!reply.raw.writableFinished) abort.abort() }
    reply.raw.on('close', onClose)
    const t0 = performance.now()
    const info = newInfo()
    try {
      const planned = await plan(fr, info, abort.signal, checked, raw.length)
      // Client-facing reasons name files relative to the configured roots, never by absolute path.
      const outcome = 'verdict' in planned && planned.verdict.kind === 'declined' ? { verdict: declined(redact(planned.verdict.reason)) } : planned
      if (info.rescan?.error !== undefined) info.rescan = { ...info.rescan, error: redact(info.rescan.error) }
      if (abort.signal.aborted) {
        logger.info({ event: 'request', endpoint, cancelled: true, pd_bridge: info }, 'client left before the answer')
        reply.hijack()
        reply.raw.destroy()
        return
      }
      reply.hijack()
      const forward: ForwardPlan = { path, body: body as Record<string, unknown>, stream: fr.stream, includeUsage: fr.includeUsage, outcome, info }
      let result
      try {
        result = await forwardGeneration(config, forward, reply.raw, abort.signal, auth)
      } catch (e) {
        // Hijacked: fastify cannot answer for us any more.
        logger.error({ err: e }, 'forward failed')
        const api = toFrontApiError(e)
        if (!reply.raw.headersSent) {
          reply.raw.writeHead(api.status, { 'content-type': 'application/json; charset=utf-8', [VERDICT_HEADER]: `declined: front door error (${api.status})` })
          reply.raw.end(JSON.stringify(new FrontApiError(api.status, api.type, redact(api.message), api.param, api.code).toBody()))
        } else reply.raw.end()
        return
      }
      info.timings_ms.total = Math.round(performance.now() - t0)
      if (result.verdict.kind === 'declined') counts.declined++
      else counts.bridged++
      logger.info({ event: 'request', endpoint, stream: fr.stream, status: result.status, verdict: verdictText(result.verdict), pd_bridge: info }, 'answered')
    } finally {
      reply.raw.off('close', onClose)
    }
  }

  app.post('/v1/chat/completions', async (request, reply) => { await generation('chat', '/v1/chat/completions', request, reply) })
  app.post('/v1/completions', async (request, reply) => { await generation('completion', '/v1/completions', request, reply) })

  // Everything else is the decoder's: passed through as sent, answered as it answers.
  app.all('/*', async (request, reply) => {
    if (isInternal(request.url)) {
      throw new FrontApiError(404, 'not_found_error', `no route ${request.method} ${request.url.split('?')[0]}`, null, 'unknown_route')
    }
    const headers = passHeaders(request.headers, PASS_THROUGH_DROPS)
    // With a key, the decoder gets ours (the client's was checked above and is the same secret).
    Object.assign(headers, auth)
    const body = request.body as Buffer | undefined
    let upstream
    try {
      upstream = await undiciRequest(joinUrl(config.decoder.url, request.url), {
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
  })

  await app.listen({ host: config.listen.host, port: config.listen.port })
  const address = app.server.address() as AddressInfo
  const host = address.family === 'IPv6' ? `[${address.address}]` : address.address
  return {
    url: `http://${host}:${address.port}`,
    app,
    queue,
    tokenizer,
    close: async () => {
      closing = true
      await app.close()
      await tokenizer.close()
      if (ownSpool && spoolDir !== undefined) await rm(spoolDir, { recursive: true, force: true })
    },
  }
}

