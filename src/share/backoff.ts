// Bounded retries: how many failures in a row the client tolerates, and how long it waits between.

/** Retry bounds for transient failures (network errors, 408/425/429/5xx, dropped bodies). */
export interface RetryPolicy {
  /** Failures in a row (without progress) after which the client gives up. */
  attempts: number
  /** Wait after the first failure, in ms; doubled after each further one. */
  baseDelayMs: number
  /** Upper bound of a single wait, in ms. */
  maxDelayMs: number
}

/** 6 failures in a row, waits of 50, 100, 200, 400, 800 ms (cap 2 s). */
export const DEFAULT_RETRY: RetryPolicy = { attempts: 6, baseDelayMs: 50, maxDelayMs: 2000 }

/** The wait after the `failure`-th failure in a row (1-based): base * 2^(failure-1), capped. */
export function backoffDelay (policy: RetryPolicy, failure: number): number {
  return Math.min(policy.maxDelayMs, policy.baseDelayMs * 2 ** Math.max(0, failure - 1))
}

/** HTTP statuses worth retrying: the server or something in front of it may recover. */
export function isTransientStatus (status: number): boolean {
  return status === 408 || status === 425 || status === 429 || (status >= 500 && status <= 599)
}

/** Wait `ms`, or reject with the signal's reason as soon as it aborts. */
export function sleep (ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal.aborted) {
      reject(signal.reason)
      return
    }
    const onAbort = (): void => {
      clearTimeout(timer)
      reject(signal.reason)
    }
    const timer = setTimeout(() => {
      signal.removeEventListener('abort', onAbort)
      resolve()
    }, ms)
    signal.addEventListener('abort', onAbort, { once: true })
  })
}

/** A short description of whatever fetch threw (undici hides the socket error in `cause`). */
export function describeFailure (e: unknown): string {
  const err = e as { message?: string, cause?: { code?: string, message?: string } }
  const cause = err?.cause?.code ?? err?.cause?.message
  return `${err?.message ?? String(e)}${cause ? ` (${cause})` : ''}`
}
