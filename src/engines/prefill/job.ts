// One prefill request's life inside the engine: queued -> running -> done | partial | failed.
import type { PromptSource } from './request.ts'

/** Where a request is. done and partial come from the sealed capture manifest. */
export type JobState = 'queued' | 'running' | 'done' | 'partial' | 'failed'

/** A request the engine accepted. Mutated only by the queue and the runner. */
export interface PrefillJob {
  requestId: string
  source: PromptSource
  tokens: Int32Array
  /** `tokenIdsSha256(tokens)`, when the request was parsed (the runner computes it otherwise). */
  tokensSha256?: string
  memoryBudgetBytes?: number
  state: JobState
  /** T' of the sealed capture: 0 until it is sealed, T when done, less when partial. */
  sealedLength: number
  /** Named durations in ms: queue, prefill, finish, total. */
  timings: Record<string, number>
  /** Why the request failed; set exactly when state is failed. */
  error?: string
  /** Tokens the engine has run so far. */
  prefilled: number
  /** performance.now() at submission. */
  submittedAt: number
  /** The capture directory, once the capture started. */
  captureDir?: string
  /** A warm-extended request: the carry it continues from (removed when the job ends) and its boundary P. */
  resume?: { carryId: string, path: string, startToken: number }
  /** Publish block segments after every chunk (the capture's `segments`). */
  streamBlocks?: boolean
}

/** True once a job will not change again. */
export function isSettled (state: JobState): boolean {
  return state === 'done' || state === 'partial' || state === 'failed'
}

/** Round a duration to 0.1 ms: enough for a report, and stable to print. */
export function ms (duration: number): number {
  return Math.round(duration * 10) / 10
}
