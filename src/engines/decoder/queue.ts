// Admission to the engine: up to `slots` requests run at once (our engine batches their decode
// steps; llama.cpp's runner takes one), their estimated memory within `budgetBytes`, first come
// first served, and at most `maxQueue` wait. Past that a request is refused with 429 and a
// Retry-After estimated from how long recent requests held a slot; a request that could never fit
// the budget is refused at once (400), since waiting would not help it.
import { ApiError } from './api-error.ts'

/** Counters and the current state, for /health. */
export interface QueueStats {
  running: number
  waiting: number
  maxQueue: number
  /** Requests that may run at once. */
  slots: number
  /** Estimated bytes the running requests hold, and the budget (null: none). */
  usedBytes: number
  budgetBytes: number | null
  /** Requests that held a slot and gave it back. */
  served: number
  /** Requests refused because the queue was full. */
  refused: number
  /** Requests refused because they alone would exceed the memory budget. */
  tooLarge: number
  /** Requests that left the queue before their turn (client gone). */
  abandoned: number
}

/** How many may run at once and within what memory. */
export interface AdmissionLimits {
  /** Requests running at once; default 1. */
  slots?: number
  /** Bound on the running requests' estimated bytes; default none. */
  budgetBytes?: number
}

interface Waiter {
  bytes: number
  grant: () => void
  fail: (err: Error) => void
}

/** Thrown to a waiter whose signal fired before its turn. */
export class QueueAbandoned extends Error {
  override name = 'QueueAbandoned'
}

function mib (bytes: number): string {
  return `${(bytes / 2 ** 20).toFixed(1)} MiB`
}

/** A FIFO lease on a share of the engine: a slot and an estimated number of bytes. */
export class EngineQueue {
  private running = 0
  private usedBytes = 0
  private stopped = false
  private readonly waiters: Waiter[] = []
  private served = 0
  private refused = 0
  private tooLarge = 0
  private abandoned = 0
  private readonly slots: number
  private readonly budgetBytes: number
  /** Exponential moving average of how long a request holds a slot, in ms. */
  private averageMs = 1000

  constructor (private readonly maxQueue: number, limits: AdmissionLimits = {}) {
    this.slots = limits.slots ?? 1
    this.budgetBytes = limits.budgetBytes ?? Infinity
  }

  /** The current state and counters. */
  get stats (): QueueStats {
    return {
      running: this.running, waiting: this.waiters.length, maxQueue: this.maxQueue, slots: this.slots,
      usedBytes: this.usedBytes, budgetBytes: Number.isFinite(this.budgetBytes) ? this.budgetBytes : null,
      served: this.served, refused: this.refused, tooLarge: this.tooLarge, abandoned: this.abandoned,
    }
  }

  private fits (bytes: number): boolean {
    return this.running < this.slots && this.usedBytes + bytes <= this.budgetBytes
  }

  /**
   * Wait for a slot and `bytes` of the budget. Resolves with `release` (call it exactly once when
   * done). Throws a 429 ApiError when the queue is full, a 400 when `bytes` alone exceeds the
   * budget, a 503 once stopping, QueueAbandoned if `signal` fires first.
   */
  async acquire (signal: AbortSignal, bytes = 0): Promise<() => void> {
    if (this.stopped) throw new ApiError(503, 'service_unavailable_error', 'the decoder is shutting down and takes no new requests')
    if (signal.aborted) throw new QueueAbandoned('the client went away before the request was queued')
    if (bytes > this.budgetBytes) {
      this.tooLarge++
      throw new ApiError(400, 'invalid_request_error',
        `this request needs about ${mib(bytes)} of cache and step buffers (its prompt + max_tokens), more than the decoder's whole batch memory budget of ${mib(this.budgetBytes)} (--batch-memory-bytes); ask for fewer max_tokens or a shorter prompt`,
        'max_tokens', 'memory_budget_exceeded')
    }
    // First come first served: nobody overtakes a waiter, even one that needs more memory.
    if (this.waiters.length > 0 || !this.fits(bytes)) {
      if (this.waiters.length >= this.maxQueue) {
        this.refused++
        const ahead = this.waiters.length + 1
        const seconds = Math.max(1, Math.ceil(this.averageMs * Math.ceil(ahead / this.slots) / 1000))
        throw new ApiError(429, 'rate_limit_error',
          `the decoder is busy: ${this.running} requests run and ${this.waiters.length} requests already wait (--max-queue ${this.maxQueue}); retry after ${seconds} s`,
          null, 'queue_full', { 'Retry-After': String(seconds) })
      }
      await new Promise<void>((resolve, reject) => {
        const waiter: Waiter = {
          bytes,
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
          // The head may have been what held the others back.
          this.grantWaiters()
        }
        signal.addEventListener('abort', onAbort, { once: true })
        this.waiters.push(waiter)
      })
    } else this.take(bytes)
    const started = performance.now()
    let released = false
    return () => {
      if (released) return
      released = true
      this.served++
      this.running--
      this.usedBytes -= bytes
      this.averageMs = 0.8 * this.averageMs + 0.2 * (performance.now() - started)
      this.grantWaiters()
    }
  }

  private take (bytes: number): void {
    this.running++
    this.usedBytes += bytes
  }

  /** Grant waiters in order while the head fits. */
  private grantWaiters (): void {
    while (this.waiters.length > 0 && this.fits(this.waiters[0].bytes)) {
      const next = this.waiters.shift()!
      this.take(next.bytes)
      next.grant()
    }
  }

  /** Refuse new requests and fail every waiting one with 503; the running ones finish on their own. */
  stop (): void {
    this.stopped = true
    for (const w of this.waiters.splice(0)) {
      w.fail(new ApiError(503, 'service_unavailable_error', 'the decoder is shutting down; the request was not started'))
    }
  }
}
