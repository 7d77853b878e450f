// The share's stall deadline: armed while the client waits on the share (a request in flight, a
// body being read), re-armed by every sign of life, and paused while the client itself sleeps
// (poll interval, backoff) or writes a layer, so that only the share's own silence counts.

/** What the client tells the stall deadline. */
export interface StallSignals {
  /** The client is waiting on the share, or the share just showed life (an answer, body bytes). */
  alive: () => void
  /** The client is not waiting on the share (its own sleep or work). */
  idle: () => void
}

/** A stall deadline of `ms` (undefined: off) that calls `onStall` once. */
export class StallWatch implements StallSignals {
  private timer: NodeJS.Timeout | undefined
  /** Whether the deadline passed. */
  fired = false

  constructor (private readonly ms: number | undefined, private readonly onStall: () => void) {}

  readonly alive = (): void => {
    if (this.ms === undefined || this.fired) return
    if (this.timer !== undefined) this.timer.refresh()
    else {
      this.timer = setTimeout(() => {
        this.fired = true
        this.onStall()
      }, this.ms)
    }
  }

  readonly idle = (): void => {
    clearTimeout(this.timer)
    this.timer = undefined
  }
}
