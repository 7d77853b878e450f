// Scoring a needle answer. A hit: the answer holds the expected word as a whole word (any case).
// A bridged leg is a bridged pass only when the front door's verdict is exactly `complete`: a
// `partial` or `declined` answer came (at least in part) from the decoder's own prefill, so it is
// recorded with its verdict and its hit, and never counted as a pass through the bridge.
import { ConfigError } from '../../src/errors.ts'

/** The verdict's first word: what the scoring rule looks at. */
export type VerdictKind = 'complete' | 'partial' | 'declined'

/** How a bridged leg counts: pass and miss only with a complete verdict. */
export type BridgedOutcome = 'pass' | 'miss' | 'not-bridged'

/** How a native leg counts. */
export type NativeOutcome = 'pass' | 'miss'

/**
 * The kind of a verdict as the front door writes it (`complete`, `partial B/T`, `declined: why`).
 * Anything else, or no verdict at all, is `declined`: it cannot show that the bridge was used.
 */
export function verdictKind (verdict: string | undefined): VerdictKind {
  if (verdict === 'complete') return 'complete'
  if (verdict !== undefined && /^partial(\s|$)/.test(verdict)) return 'partial'
  return 'declined'
}

function escapeRegExp (s: string): string {
  return s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')
}

/** Whether `answer` holds `expected` (trimmed) as a whole word, case-insensitively. */
export function answerHits (answer: string, expected: string): boolean {
  const word = expected.trim()
  if (word === '') throw new ConfigError('expected', 'must hold a word, got an empty string')
  return new RegExp(`(?<![\\p{L}\\p{N}])${escapeRegExp(word)}(?![\\p{L}\\p{N}])`, 'iu').test(answer.trim())
}

/** A bridged leg's score. */
export function scoreBridged (verdict: string | undefined, answer: string, expected: string): { verdictKind: VerdictKind, hit: boolean, outcome: BridgedOutcome } {
  const kind = verdictKind(verdict)
  const hit = answerHits(answer, expected)
  return { verdictKind: kind, hit, outcome: kind !== 'complete' ? 'not-bridged' : hit ? 'pass' : 'miss' }
}

/** A native leg's score. */
export function scoreNative (answer: string, expected: string): { hit: boolean, outcome: NativeOutcome } {
  const hit = answerHits(answer, expected)
  return { hit, outcome: hit ? 'pass' : 'miss' }
}
