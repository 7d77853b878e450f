// One completion request (chat or text), end to end: the front door's own request checks (JSON,
// the model it names, the embedded decoder's rules), the plan (routing and the bridge), then the
// forward to the decoder with the verdict. Hijacked once planned: fastify answers nothing after.
import type { FastifyReply, FastifyRequest } from 'fastify'
// The embedded decoder's own request checks, run here before any bridge work (never copied).
import { parseChatRequest, parseCompletionRequest } from '../engines/decoder/request.ts'
import { FrontApiError, invalidRequest, toFrontApiError } from './api-error.ts'
import type { FrontState } from './door-state.ts'
import { forwardGeneration, type ForwardPlan, type PdBridgeInfo } from './forward.ts'
import { planRequest } from './plan.ts'
import { readFrontRequest, type Endpoint } from './prompt.ts'
import { declined, VERDICT_HEADER, verdictText } from './verdict.ts'

function newInfo (): PdBridgeInfo {
  return {
    verdict: '', route: 'native', prompt_tokens: null, stored_tokens_before: null, bridged_tokens: 0, cached_tokens: null,
    blocks: null, capture: null, rescan: null, timings_ms: {}, bytes: {},
  }
}

function isJsonType (type: string | undefined): boolean {
  return type === undefined || /^application\/([a-z0-9.+-]+\+)?json\s*(;|$)/i.test(type)
}

/** The request's JSON body, or the error its client gets. */
function readJsonBody (request: FastifyRequest): { raw: Buffer, body: unknown } {
  if (!isJsonType(request.headers['content-type'])) throw new FrontApiError(415, 'unsupported_media_type_error', 'the request body must be JSON (Content-Type: application/json)', null, 'unsupported_media_type')
  const raw = request.body as Buffer | undefined
  if (raw === undefined || raw.length === 0) throw invalidRequest('the request body is empty; send a JSON object', null, 'invalid_json')
  try {
    return { raw, body: JSON.parse(raw.toString('utf8')) }
  } catch (e) {
    throw invalidRequest(`the request body is not valid JSON: ${(e as Error).message}`, null, 'invalid_json')
  }
}

/** Answer one completion request on `path` (`endpoint` says how its body reads). */
export async function handleGeneration (state: FrontState, endpoint: Endpoint, path: string, request: FastifyRequest, reply: FastifyReply): Promise<void> {
  const { config, logger, redact, auth, counts } = state
  if (state.closing) throw new FrontApiError(503, 'service_unavailable_error', 'the front door is shutting down and takes no new requests', null, 'shutting_down')
  const { raw, body } = readJsonBody(request)
  const fr = readFrontRequest(body, endpoint)
  const rules = config.decoder.requestRules
  const decoder = fr.model !== undefined || rules === 'auto' ? await state.servedModels() : undefined
  if (fr.model !== undefined && decoder !== undefined) {
    const served = decoder.ids
    if (served.length > 0 && !served.includes(fr.model)) {
      throw new FrontApiError(404, 'invalid_request_error', `the model '${fr.model}' does not exist; the decoder serves ${served.map((m) => `'${m}'`).join(', ')}`, 'model', 'model_not_found')
    }
  }
  // The embedded decoder's own request checks, before any bridge work: what it would refuse 8 s
  // later (max_tokens 0, temperature 2.5) is refused now with the same status and error body.
  const embedded = rules === 'embedded' || (rules === 'auto' && decoder?.embedded === true)
  const checked = embedded ? (endpoint === 'chat' ? parseChatRequest(body) : parseCompletionRequest(body)) : undefined
  counts.requests++
  const abort = new AbortController()
  const onClose = (): void => { if (!reply.raw.writableFinished) abort.abort() }
  reply.raw.on('close', onClose)
  const t0 = performance.now()
  const info = newInfo()
  try {
    const planned = await planRequest(state, fr, info, abort.signal, checked, raw.length)
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
