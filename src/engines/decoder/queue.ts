// The engine is one synchronous, CPU-bound model: requests take it one at a time, first come first
// served, and at most `maxQueue` wait behind the running one. Past that a request is refused with
// 429 and a Retry-After estimated from how long recent requests held the engine.
import { ApiError } from './api-error.ts'

/** Counters and the current state, for /health. */
export interface QueueStats {
  running: number
  waiting: number
  maxQueue: number
  /** Requests that held the engine and gave it back. */
  served: number
  /** Requests refused because the queue was full. */
  refused: number
  /** Requests that left the queue before their turn (client gone). */
  abandoned: number
}

interface Waiter {
  grant: () => void
  fail: (err: Error) => void
}

/** Thrown to a waiter whose signal fired before its turn. */
export class QueueAbandoned extends Error {
  override name = 'QueueAbandoned'
}

/** A FIFO lease on the engine. */
export class EngineQueue {
  private busy = false
  private stopped = false
  private readonly waiters: Waiter[] = []
  private served = 0
  private refused = 0
  private abandoned = 0
  /** Exponential moving average of how long a request holds the engine, in ms. */
  private averageMs = 1000

  constructor (private readonly maxQueue: number) {}

  /** The current state and counters. */
  get stats (): QueueStats {
    return { running: this.busy ? 1 : 0, waiting: this.waiters.length, maxQueue: this.maxQueue, served: this.served, refused: this.refused, abandoned: this.abandoned }
  }

  /**
   * Wait for the engine. Resolves with `release` (call it exactly once when done). Throws a 429
   * ApiError when the queue is full, a 503 once stopping, QueueAbandoned if `signal` fires first.
   */
  async acquire (signal: AbortSignal): Promise<() => void> {
    if (this.stopped) throw new ApiError(503, 'service_unavailable_error', 'the decoder is shutting down and takes no new requests')
    if (signal.aborted) throw new QueueAbandoned('the client went away before the request was queued')
    if (this.busy && this.waiters.length >= this.maxQueue) {
      this.refused++
      const seconds = Math.max(1, Math.ceil(this.averageMs * (this.waiters.length + 1) / 1000))
      throw new ApiError(429, 'rate_limit_error',
        `the decoder is busy: ${this.waiters.length} requests already wait behind the running one (--max-queue ${this.maxQueue}); retry after ${seconds} s`,
        null, 'queue_full', { 'Retry-After': String(seconds) })
    }
    if (this.busy) {
      await new Promise<void>((resolve, reject) => {
        const waiter: Waiter = {
          grant: () => {
            signal.removeEventListener('abort', onAbort)
            resolve()
          },
          fail: (err) => {
            signal.removeEventListener('abort', onAbort)
            reject(err)
          },
        }
        const onAbort = (): void => {
          const i = this.waiters.indexOf(waiter)
          if (i >= 0) this.waiters.splice(i, 1)
          this.abandoned++
          waiter.fail(new QueueAbandoned('the client went away while the request was queued'))
        }
        signal.addEventListener('abort', onAbort, { once: true })
        this.waiters.push(waiter)
      })
    }
    this.busy = true
    const started = performance.now()
    let released = false
    return () => {
      if (released) return
      released = true
      this.served++
      this.averageMs = 0.8 * this.averageMs + 0.2 * (performance.now() - started)
      const next = this.waiters.shift()
      if (next === undefined) this.busy = false
      else next.grant()
    }
  }

  /** Refuse new requests and fail every waiting one with 503; the running one finishes on its own. */
  stop (): void {
    this.stopped = true
    for (const w of this.waiters.splice(0)) {
      w.fail(new ApiError(503, 'service_unavailable_error', 'the decoder is shutting down; the request was not started'))
    }
  }
}
