// What the front door does with one completion before forwarding it: route it (tokenize once, the
// decoder's own context check, the store's cached prefix, the length rules), and when the rule
// says bridge, dispatch the bridge through the queue. Any bridge that does not happen becomes a
// declined verdict (the request is then served natively); only a full queue under
// `queue.whenFull: reject` is an error the client sees (429).
import type { CheckedRequest } from '../decoders/request-rules.ts'
import { errorCode, PD_ERR } from '../errors.ts'
import { FrontApiError } from './api-error.ts'
import { BridgeFailure, runBridge, type BridgeJob } from './bridge.ts'
import type { FrontState } from './door-state.ts'
import type { PdBridgeInfo } from './forward.ts'
import { linkReport } from './link-report.ts'
import type { FrontRequest } from './prompt.ts'
import type { QueueFull } from './queue.ts'
import { decideRoute } from './routing.ts'
import { missingForBridge, type BridgeSetup } from './setup.ts'
import { declined, VERDICT_HEADER, type BridgedPlan, type Verdict } from './verdict.ts'
import { deleteFailed } from './retention.ts'

/** A bridged request to confirm, or the declined verdict that stands. */
export type Planned = { bridged: BridgedPlan } | { verdict: Verdict }

/** Route one request and bridge it when the rule says so; fills `info`; returns what to confirm. */
export async function planRequest (state: FrontState, fr: FrontRequest, info: PdBridgeInfo, signal: AbortSignal, checked: CheckedRequest | undefined, bodyBytes: number): Promise<Planned> {
  const { config, logger } = state
  const off = missingForBridge(config)
  if (off !== undefined) return { verdict: declined(off) }
  if (fr.prompt.kind === 'opaque') return { verdict: declined(`prompt not tokenizable by the front door: ${fr.prompt.why}`) }
  let setup: BridgeSetup
  try {
    await state.learnDecoderFacts(checked !== undefined)
    setup = await state.setupFor(state.decoderModel)
  } catch (e) {
    return { verdict: declined(`bridge unavailable: ${(e as Error).message}`) }
  }
  // The decoder's own vocabulary check on ids as given, before they are routed.
  if (checked !== undefined && fr.prompt.kind === 'tokens') state.kind.requestRules.checkTokenIds(fr.prompt.tokens, setup.cfg.vocabSize)
  let tokens: number[] | null
  try {
    // Once per request: these ids are routed, looked up in the store and bridged.
    tokens = await state.tokenizer.tokenize({ prompt: fr.prompt, bodyBytes, modelDir: config.decoder.model as string, tokenizer: setup.tokenizer, vocabSize: setup.cfg.vocabSize })
  } catch (e) {
    logger.error({ err: e }, 'tokenizer failed')
    return { verdict: declined(`prompt not tokenizable by the front door: ${(e as Error).message}`) }
  }
  if (tokens === null) return { verdict: declined('prompt holds token ids outside the vocabulary') }
  const t = tokens.length
  info.prompt_tokens = t
  // The decoder's own context check, with the same ids, before any bridge work.
  if (checked !== undefined && state.decoderLimits !== undefined) checked.checkBudget(t, state.decoderLimits)
  const rules = config.routing
  // Only prompts the length rules let through are worth a look at the store.
  const probe = t >= rules.minTokens && t <= rules.maxBridgeTokens
  const stored = probe ? await setup.target.storedBlocks(tokens) : 0
  const route = decideRoute({ promptTokens: t, storedBlocks: stored, blockSize: setup.blockSize }, rules)
  info.stored_tokens_before = probe ? route.cachedTokens : null
  if (!route.bridge) return { verdict: declined(route.reason, route.stored === undefined ? undefined : { tokens: route.stored, promptTokens: t }) }
  const links = await linkReport(state)
  if (links.problems.length > 0) return { verdict: declined(links.problems[0]) }
  // Registered before anything else is awaited, so a prompt arriving next sees this bridge.
  const entered = state.prefixes.enter(tokens.slice(0, route.blocks * setup.blockSize), setup.blockSize)
  try {
    if (entered.waitFor === undefined) return await dispatchBridge(state, setup, { tokens, blocks: route.blocks, storedBlocks: stored }, info, signal)
    // A bridge in flight captures full blocks this prompt starts with: wait for it, then route again
    // over what it stored, so the shared blocks are prefilled once.
    const t0 = performance.now()
    await endOrGiveUp(entered.waitFor, config.deadlines.queueMs, signal)
    info.shared_prefix = { blocks: entered.sharedBlocks, waited_ms: Math.round(performance.now() - t0) }
    const again = await setup.target.storedBlocks(tokens)
    const rerouted = decideRoute({ promptTokens: t, storedBlocks: again, blockSize: setup.blockSize }, rules)
    info.stored_tokens_before = rerouted.cachedTokens
    if (!rerouted.bridge) return { verdict: declined(rerouted.reason, rerouted.stored === undefined ? undefined : { tokens: rerouted.stored, promptTokens: t }) }
    return await dispatchBridge(state, setup, { tokens, blocks: rerouted.blocks, storedBlocks: again }, info, signal)
  } finally {
    entered.release()
  }
}

/** Wait for `ended`, at most `ms`, or until the client leaves: the bridge then goes on either way. */
async function endOrGiveUp (ended: Promise<void>, ms: number, signal: AbortSignal): Promise<void> {
  let timer: NodeJS.Timeout | undefined
  let onAbort: (() => void) | undefined
  await Promise.race([
    ended,
    new Promise<void>((resolve) => { timer = setTimeout(resolve, ms) }),
    new Promise<void>((resolve) => {
      onAbort = () => resolve()
      signal.addEventListener('abort', onAbort, { once: true })
    }),
  ])
  clearTimeout(timer)
  if (onAbort !== undefined) signal.removeEventListener('abort', onAbort)
}

/** Run the bridge of `blocks` full blocks of `tokens` in the queue; fills `info` either way. */
async function dispatchBridge (state: FrontState, setup: BridgeSetup, job: BridgeJob, info: PdBridgeInfo, signal: AbortSignal): Promise<Planned> {
  const { logger } = state
  const { tokens } = job
  info.route = 'bridge'
  try {
    let window = { start: 0, end: 0 }
    const { result, waitedMs } = await state.queue.run(async () => {
      const start = Date.now()
      try {
        return await runBridge(state.effective, setup, job, state.auth)
      } finally {
        window = { start, end: Date.now() }
      }
    }, state.config.deadlines.queueMs, signal)
    info.window_ms = window
    state.bridgeMsAverage = state.bridgeMsAverage === 0 ? result.timings.bridge_total : 0.7 * state.bridgeMsAverage + 0.3 * result.timings.bridge_total
    info.timings_ms = { queue: Math.round(waitedMs), ...result.timings }
    info.bytes = result.bytes
    info.bridged_tokens = result.bridgedTokens
    if (result.startToken > 0) info.resumed_from = result.startToken
    if (result.warmDeclined !== undefined) info.warm_extend_declined = result.warmDeclined
    info.blocks = { bridged: result.report.blocks, written: result.report.written, reused: result.report.reused }
    if (result.stream !== undefined) info.stream = { blocks_before_seal: result.stream.blocksBeforeSeal }
    info.capture = { request_id: result.requestId, state: result.state, token_count: result.captureTokens, sealed_length: result.sealedLength, tokens_sha256: result.tokensSha256, retention: result.retention }
    info.rescan = result.rescan.ok ? { ok: true } : { ok: false, error: result.rescan.error }
    logger.info({
      event: 'bridge', request_id: result.requestId, state: result.state, blocks: result.report.blocks, ...(info.stream === undefined ? {} : { stream: info.stream }), bridged_tokens: result.bridgedTokens, timings: info.timings_ms, bytes: info.bytes, rescan: info.rescan, capture_retention: result.retention,
      ...(result.startToken > 0 ? { resumed_from: result.startToken } : {}), ...(result.warmDeclined === undefined ? {} : { warm_extend_declined: result.warmDeclined }),
    }, 'bridged')
    if (deleteFailed(result.retention)) state.retireLater(result.requestId)
    return { bridged: { state: result.state, bridgedTokens: result.bridgedTokens, promptTokens: tokens.length, ...(result.startToken > 0 ? { startToken: result.startToken } : {}) } }
  } catch (e) {
    info.route = 'native'
    return notBridged(state, e, info)
  }
}

/** The verdict of a bridge that did not happen (the queue, the bridge, or a crash), by its code. */
export function notBridged (state: FrontState, e: unknown, info: PdBridgeInfo): Planned {
  const { config, logger } = state
  switch (errorCode(e)) {
    case PD_ERR.QUEUE_FULL: {
      const waiting = (e as QueueFull).waiting
      if (config.queue.whenFull === 'reject') {
        const seconds = Math.max(1, Math.ceil(((waiting + 1) * (state.bridgeMsAverage || 1000)) / 1000))
        throw new FrontApiError(429, 'rate_limit_error', `${(e as Error).message}; retry later (queue.whenFull is reject)`, null, 'bridge_queue_full', {
          'retry-after': String(seconds), [VERDICT_HEADER]: `declined: bridge queue full (${waiting} waiting), request refused`,
        })
      }
      return { verdict: declined(`bridge queue full (${waiting} waiting behind the running bridge)`) }
    }
    case PD_ERR.QUEUE_LEFT: return { verdict: declined((e as Error).message) }
  }
  if (e instanceof BridgeFailure) {
    info.timings_ms = { ...e.timings }
    // A failed bridge's capture is never deleted: it is the record of what went wrong.
    logger.warn({ event: 'bridge-failed', stage: e.stage, code: e.pdCode, reason: e.reason, timings: e.timings, ...(e.requestId === undefined ? {} : { capture_kept: e.requestId }) }, `bridge failed at ${e.stage}`)
    return { verdict: declined(e.reason) }
  }
  logger.error({ err: e }, 'bridge crashed')
  return { verdict: declined(`bridge failed: ${(e as Error).message}`) }
}
