// Stage 0 of a warm-extended bridge (docs/warm-extend.md): the decoder's store holds blocks for a
// prefix of the prompt; its cache at the last stored boundary P is restored (the decoder's own
// lookup, integrity checks included), encoded as a carry and sent to the prefill engine, which then
// prefills only [P, T). An engine that cannot continue exactly (another profile, no carry route) or a
// store that restores nothing is not a failure: the bridge goes on cold, from token 0, and says why.
import { encodeCarry } from '../../capture/carry.ts'
import type { ModelCache } from '../../model/engine/index.ts'
import { errorMessageOf, joinUrl, LinkError, callJson } from '../http.ts'
import type { DecoderTarget } from '../target.ts'
import type { BridgeRun } from './run.ts'
import { stopwatch } from './timings.ts'

/** What the carry stage settled: continue from P, or go cold and why. */
export type CarryOutcome =
  | { resume: true, carryId: string, startToken: number, bytes: number, ms: number }
  | { resume: false, reason: string, ms: number }

/** Ask the engine to remove carry `carryId` after a submit that failed; never throws. */
export async function dropCarry (run: BridgeRun, carryId: string): Promise<void> {
  try {
    await callJson('prefill engine', joinUrl(run.config.prefill.url as string, `/v1/carry/${encodeURIComponent(carryId)}`), {
      method: 'DELETE', timeoutMs: run.config.deadlines.linkMs, headers: run.auth,
    })
  } catch {
    // The engine removes leftovers when it next starts.
  }
}

/** Why the prefill engine cannot continue a carry (its /health's warm_extend), or undefined when it can. */
async function engineRefusal (run: BridgeRun): Promise<string | undefined> {
  let answer
  try {
    answer = await callJson('prefill engine', joinUrl(run.config.prefill.url as string, '/health'), { timeoutMs: run.config.deadlines.linkMs, headers: run.auth, signal: run.signal })
  } catch (e) {
    return `the prefill engine's /health did not answer: ${e instanceof LinkError ? e.problem : String(e)}`
  }
  const warm = (answer.body as { warm_extend?: { supported?: unknown, reason?: unknown } } | null)?.warm_extend
  if (warm?.supported === true) return undefined
  return warm === undefined ? 'the prefill engine does not serve warm-extended prompts (its /health has no warm_extend)' : `the prefill engine cannot continue the decoder's cache: ${String(warm.reason)}`
}

/** The decoder's cache at the last stored boundary of `tokens`, or why there is none to continue. */
async function restoredCache (target: DecoderTarget, tokens: number[]): Promise<ModelCache | string> {
  if (target.restore === undefined) return `the ${target.kind} store cannot hand its cache out`
  const cache = await target.restore(tokens)
  return cache ?? 'the decoder\'s store restored no cache for the prompt\'s prefix'
}

/**
 * Restore, encode and send the carry of `tokens` to the prefill engine under the bridge's request
 * id. Never throws for a refusal (the bridge then runs cold); a link failure is a refusal too.
 */
export async function sendCarry (run: BridgeRun, target: DecoderTarget, tokens: number[], sidecar: { fingerprint: string, profile: string }): Promise<CarryOutcome> {
  const time = stopwatch()
  // Asked first, so a carry is never sent to an engine that cannot continue it exactly.
  const refusal = await engineRefusal(run)
  if (refusal !== undefined) return { resume: false, reason: refusal, ms: time.ms() }
  const cache = await restoredCache(target, tokens)
  if (typeof cache === 'string') return { resume: false, reason: cache, ms: time.ms() }
  const bytes = encodeCarry(cache, sidecar)
  const carryId = run.requestId
  let answer
  try {
    answer = await callJson('prefill engine', joinUrl(run.config.prefill.url as string, `/v1/carry/${encodeURIComponent(carryId)}`), {
      method: 'PUT', bytes, timeoutMs: run.config.deadlines.submitMs + Math.ceil(bytes.length / 20_000), headers: run.auth, signal: run.signal,
    })
  } catch (e) {
    return { resume: false, reason: `the carry could not be sent: ${e instanceof LinkError ? e.problem : String(e)}`, ms: time.ms() }
  }
  if (answer.status !== 201) return { resume: false, reason: `the prefill engine did not take the carry (${answer.status}): ${errorMessageOf(answer.body)}`, ms: time.ms() }
  return { resume: true, carryId, startToken: cache.tokenCount, bytes: bytes.length, ms: time.ms() }
}
