// One completion request (chat or text), end to end: the request checks (the decoder kind's own
// body reader and rules, from its record; else JSON and the model it names), the plan (routing and
// the bridge), then the forward to the decoder with the verdict. Hijacked once planned: fastify
// answers nothing after.
import type { FastifyReply, FastifyRequest } from 'fastify'
import type { CheckedRequest } from '../decoders/request-rules.ts'
import { FrontApiError, toFrontApiError } from './api-error.ts'
import type { FrontState } from './door-state.ts'
import { forwardGeneration, upstreamBody, type ForwardPlan, type PdBridgeInfo } from './forward.ts'
import { planRequest } from './plan.ts'
import { readFrontRequest, type Endpoint } from './prompt.ts'
import { declined, VERDICT_HEADER, verdictText } from './verdict.ts'

function newInfo (): PdBridgeInfo {
  return {
    verdict: '', route: 'native', prompt_tokens: null, stored_tokens_before: null, bridged_tokens: 0, cached_tokens: null,
    blocks: null, capture: null, rescan: null, timings_ms: {}, bytes: {},
  }
}

function isRecord (v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v)
}

/**
 * The decoder's checks of a parsed body (its kind's request rules), in its order: the body it would
 * receive over its `--max-body-bytes` (413), its request rules (400), a model it does not serve
 * (404). Each throws the error the decoder itself would answer.
 */
async function decoderChecks (state: FrontState, endpoint: Endpoint, body: unknown, served: () => Promise<string[]>): Promise<CheckedRequest> {
  const rules = state.kind.requestRules
  await state.learnDecoderFacts(true)
  const maxBody = state.decoderLimits?.maxBodyBytes
  const forwarded = upstreamBody(body, isRecord(body) && body.stream === true)
  if (maxBody !== undefined && Buffer.byteLength(JSON.stringify(forwarded)) > maxBody) throw rules.bodyTooLarge(maxBody)
  const checked = rules.check(endpoint, body)
  if (checked.model !== undefined) {
    const ids = await served()
    if (ids.length > 0 && !ids.includes(checked.model)) throw rules.unknownModel(checked.model, ids[0])
  }
  return checked
}

/** Answer one completion request on `path` (`endpoint` says how its body reads). */
export async function handleGeneration (state: FrontState, endpoint: Endpoint, path: string, request: FastifyRequest, reply: FastifyReply): Promise<void> {
  const { config, logger, redact, auth, counts } = state
  if (state.closing) throw new FrontApiError(503, 'service_unavailable_error', 'the front door is shutting down and takes no new requests', null, 'shutting_down')
  const rules = config.decoder.requestRules
  const auto = rules === 'auto' ? await state.servedModels() : undefined
  const servedIds = async (): Promise<string[]> => (auto ?? await state.servedModels()).ids
  // With the embedded decoder, its own reader and rules before any work: what it would refuse after
  // a bridge (a `__proto__` key, max_tokens 0, temperature 0.7) is refused now, in its words.
  const embedded = rules === 'embedded' || auto?.embedded === true
  const raw = request.body as Buffer | undefined
  const body = state.kind.requestRules.readBody(request.headers['content-type'], raw, embedded ? 'refuse' : 'keep')
  const checked = embedded ? await decoderChecks(state, endpoint, body, servedIds) : undefined
  const fr = readFrontRequest(body, endpoint)
  if (!embedded && fr.model !== undefined) {
    const served = await servedIds()
    if (served.length > 0 && !served.includes(fr.model)) {
      throw new FrontApiError(404, 'invalid_request_error', `the model '${fr.model}' does not exist; the decoder serves ${served.map((m) => `'${m}'`).join(', ')}`, 'model', 'model_not_found')
    }
  }
  counts.requests++
  const abort = new AbortController()
  const onClose = (): void => { if (!reply.raw.writableFinished) abort.abort() }
  reply.raw.on('close', onClose)
  const t0 = performance.now()
  const info = newInfo()
  try {
    const planned = await planRequest(state, fr, info, abort.signal, checked, raw?.length ?? 0)
    // Client-facing reasons name files relative to the configured roots, never by absolute path.
    const outcome = 'verdict' in planned && planned.verdict.kind === 'declined' ? { verdict: declined(redact(planned.verdict.reason), planned.verdict.stored) } : planned
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
