// The bridge queue: up to `concurrency` bridges for one decoder run at once (1 by default: each
// bridge writes into the decoder's store and asks the one prefill engine, which prefills one capture
// at a time; with more, one bridge's block writes overlap the next one's prefill), at most
// `maxWaiting` wait behind the running ones, and a waiter gives up after a deadline or when its client goes away. Requests that are not
// bridged never enter it, so they are never blocked behind a long bridge.
import { PD_ERR, PdBridgeError } from '../errors.ts'

/** The queue had no room. */
export class QueueFull extends PdBridgeError {
  override name = 'QueueFull'
  constructor (readonly waiting: number) {
    super(`the bridge queue is full (${waiting} waiting behind the running bridge)`, { code: PD_ERR.QUEUE_FULL })
  }
}

/** A waiter that left before its turn: `why` is 'deadline' or 'aborted'. */
export class QueueLeft extends PdBridgeError {
  override name = 'QueueLeft'
  constructor (readonly why: 'deadline' | 'aborted', readonly waitedMs: number) {
    super(why === 'deadline' ? `waited ${Math.round(waitedMs)} ms in the bridge queue without getting a turn` : 'the client went away while the bridge was queued', { code: PD_ERR.QUEUE_LEFT })
  }
}

/** Counters and the current state. */
export interface QueueView {
  running: boolean
  /** Bridges running now, and how many may run at once. */
  active: number
  concurrency: number
  waiting: number
  maxWaiting: number
  /** Bridges run to the end (either way), refused for room, left while waiting. */
  ran: number
  full: number
  left: number
}

interface Waiter {
  start: () => void
  leave: (why: QueueLeft) => void
}

/** A FIFO of bridge tasks, up to `concurrency` running at a time. */
export class BridgeQueue {
  private active = 0
  private readonly waiters: Waiter[] = []
  private counts = { ran: 0, full: 0, left: 0 }

  constructor (readonly maxWaiting: number, readonly concurrency = 1) {}

  /** The state, for /health. */
  get view (): QueueView {
    return { running: this.active > 0, active: this.active, concurrency: this.concurrency, waiting: this.waiters.length, maxWaiting: this.maxWaiting, ...this.counts }
  }

  /**
   * Run `task` when its turn comes. Throws QueueFull at once when `maxWaiting` already wait, and
   * QueueLeft when `waitMs` pass or `signal` aborts before the turn. Resolves with the task's
   * result (waitedMs: the time spent waiting).
   */
  async run<T> (task: () => Promise<T>, waitMs: number, signal?: AbortSignal): Promise<{ result: T, waitedMs: number }> {
    const t0 = performance.now()
    if (this.active >= this.concurrency) {
      if (this.waiters.length >= this.maxWaiting) {
        this.counts.full++
        throw new QueueFull(this.waiters.length)
      }
      // A waiter that gets its turn inherits the slot of the bridge that ended.
      await this.wait(waitMs, signal, t0)
    } else {
      this.active++
    }
    const waitedMs = performance.now() - t0
    try {
      return { result: await task(), waitedMs }
    } finally {
      this.counts.ran++
      this.next()
    }
  }

  private wait (waitMs: number, signal: AbortSignal | undefined, t0: number): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      const waiter: Waiter = {
        start: () => {
          cleanup()
          resolve()
        },
        leave: (why) => {
          cleanup()
          const at = this.waiters.indexOf(waiter)
          if (at >= 0) this.waiters.splice(at, 1)
          this.counts.left++
          reject(why)
        },
      }
      const timer = setTimeout(() => waiter.leave(new QueueLeft('deadline', performance.now() - t0)), waitMs)
      const onAbort = (): void => waiter.leave(new QueueLeft('aborted', performance.now() - t0))
      const cleanup = (): void => {
        clearTimeout(timer)
        signal?.removeEventListener('abort', onAbort)
      }
      signal?.addEventListener('abort', onAbort, { once: true })
      this.waiters.push(waiter)
      if (signal?.aborted === true) onAbort()
    })
  }

  private next (): void {
    const waiter = this.waiters.shift()
    if (waiter === undefined) this.active--
    else waiter.start()
  }
}
