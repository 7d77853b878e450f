// The verdict every response through the front door carries: `complete`, `partial B/T` or
// `declined: <reason>`. A bridged verdict is only ever given after the decoder confirmed it used
// the bridged blocks (cached_tokens), so a native fallback can never be recorded as bridged.

/** The response header that carries the verdict. */
export const VERDICT_HEADER = 'x-pd-bridge'

/** What happened to one request. */
export type Verdict =
  | { kind: 'complete', bridgedTokens: number, promptTokens: number, startToken?: number }
  | { kind: 'partial', bridgedTokens: number, promptTokens: number, startToken?: number }
  | { kind: 'declined', reason: string, /** The reason counts these stored tokens of a T-token prompt (what the front door saw). */ stored?: StoredCount }

/** What the front door saw stored when it declined (the decoder may restore otherwise). */
export interface StoredCount {
  tokens: number
  promptTokens: number
}

/** A declined verdict. */
export function declined (reason: string, stored?: StoredCount): Verdict {
  return stored === undefined ? { kind: 'declined', reason } : { kind: 'declined', reason, stored }
}

/**
 * A declined verdict as the decoder's answer leaves it: when its reason counts stored tokens and
 * the decoder reported restoring another number (`cached_tokens`: a block failed its integrity
 * check there, or was evicted or written since), the reason says what the decoder restored.
 */
export function restoredVerdict (v: Verdict, cached: number | undefined): Verdict {
  if (v.kind !== 'declined' || v.stored === undefined || cached === undefined || cached === v.stored.tokens) return v
  return declined(`${v.reason}; the decoder restored ${cached} of the ${v.stored.promptTokens} tokens (cached_tokens), not the ${v.stored.tokens} the front door saw stored`)
}

/**
 * A request refused with a 4xx, by the front door on the decoder's own rules before any work or by
 * the decoder itself: `request refused (<status>)`, and `after` when work was done before it.
 */
export function refused (status: number, after?: string): Verdict {
  return declined(`request refused (${status})${after === undefined ? '' : `: ${after}`}`)
}

/**
 * The verdict as text: `complete`, `partial B/T` or `declined: <reason>`. A warm-extended bridge
 * (tokens bridged from a stored boundary P, not from 0) adds how many and from where:
 * `complete (warm: N tokens bridged from boundary P)`, and its B is P + N.
 */
export function verdictText (v: Verdict): string {
  if (v.kind === 'declined') return `declined: ${v.reason}`
  const warm = v.startToken === undefined ? '' : ` (warm: ${v.bridgedTokens} tokens bridged from boundary ${v.startToken})`
  if (v.kind === 'complete') return `complete${warm}`
  return `partial ${(v.startToken ?? 0) + v.bridgedTokens}/${v.promptTokens}${warm}`
}

/** Longest header value sent; a reason past it is cut (the JSON field keeps it whole). */
export const MAX_HEADER_CHARS = 400

/**
 * The verdict as a header value: visible ASCII and spaces only (a reason quoting a file name or a
 * message with a newline must not break the response), at most MAX_HEADER_CHARS.
 */
export function verdictHeader (v: Verdict): string {
  const clean = verdictText(v).replace(/[^\x20-\x7e]/g, '?')
  return clean.length <= MAX_HEADER_CHARS ? clean : clean.slice(0, MAX_HEADER_CHARS - 3) + '...'
}

/** What the bridge achieved for a request, before the decoder confirms it. */
export interface BridgedPlan {
  /** done: every full block the decoder can use; partial: a memory budget sealed a shorter prefix. */
  state: 'done' | 'partial'
  /** Tokens in the bridged blocks (B). */
  bridgedTokens: number
  /** The prompt's tokens (T). */
  promptTokens: number
  /** A warm-extended bridge: the stored boundary P its bridged tokens start at. */
  startToken?: number
}

/**
 * The final verdict of a bridged request from what the decoder reported: `cached` must cover the
 * bridged tokens, or the decoder prefilled them itself and the request is declined, whatever the
 * bridge did. Undefined `cached` (the decoder said nothing) cannot confirm anything either.
 */
export function confirmBridge (plan: BridgedPlan, cached: number | undefined): Verdict {
  if (cached === undefined) return declined(`unconfirmed: the decoder reported no cached_tokens, so the ${plan.bridgedTokens} bridged tokens cannot be shown to have been used`)
  // A warm-extended bridge's blocks end at P + N: the decoder must have used them all.
  const reach = (plan.startToken ?? 0) + plan.bridgedTokens
  if (cached < reach) {
    const what = plan.startToken === undefined ? `the ${plan.bridgedTokens} bridged tokens` : `the ${reach} tokens of stored and bridged blocks (${plan.bridgedTokens} bridged from ${plan.startToken})`
    return declined(`the decoder reported cached_tokens ${cached}, fewer than ${what}: it prefilled them itself`)
  }
  const warm = plan.startToken === undefined ? {} : { startToken: plan.startToken }
  return plan.state === 'done'
    ? { kind: 'complete', bridgedTokens: plan.bridgedTokens, promptTokens: plan.promptTokens, ...warm }
    : { kind: 'partial', bridgedTokens: plan.bridgedTokens, promptTokens: plan.promptTokens, ...warm }
}
