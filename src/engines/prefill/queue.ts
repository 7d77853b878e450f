// The request queue: jobs run one at a time in arrival order (the engine is one synchronous model),
// at most `maxQueue` wait behind the running one, and settled jobs are remembered for status polls.
import { ApiError } from './api-error.ts'
import { isSettled, type PrefillJob } from './job.ts'

/** Runs one job to a settled state; must not throw (it records failures on the job). */
export type JobRunner = (job: PrefillJob) => Promise<void>

/** Options of a PrefillQueue. */
export interface QueueOptions {
  /** Most jobs waiting behind the running one; a submission past it is a 429. */
  maxQueue: number
  /** Settled jobs kept in memory for status polls (oldest forgotten first). Default 1024. */
  keepSettled?: number
  /** Estimated seconds until a slot frees, for Retry-After; default 1. */
  retryAfterSeconds?: () => number
}

/** A FIFO of prefill jobs with a single worker. */
export class PrefillQueue {
  private readonly waiting: PrefillJob[] = []
  private readonly jobs = new Map<string, PrefillJob>()
  private readonly settledOrder: string[] = []
  private current: PrefillJob | undefined
  private pump: Promise<void> = Promise.resolve()
  private stopped = false

  constructor (private readonly run: JobRunner, private readonly options: QueueOptions) {}

  /** The job now on the engine, if any. */
  get running (): PrefillJob | undefined {
    return this.current
  }

  /** How many jobs wait behind the running one. */
  get length (): number {
    return this.waiting.length
  }

  /** The running job and those waiting behind it, in order. */
  get unsettled (): PrefillJob[] {
    return this.current === undefined ? [...this.waiting] : [this.current, ...this.waiting]
  }

  /** A job by id, while it is queued, running or remembered. */
  get (requestId: string): PrefillJob | undefined {
    return this.jobs.get(requestId)
  }

  /** Drop a settled job from memory (its capture was deleted); false when it is unknown or not settled. */
  forget (requestId: string): boolean {
    const job = this.jobs.get(requestId)
    if (job === undefined || !isSettled(job.state)) return false
    this.jobs.delete(requestId)
    const i = this.settledOrder.indexOf(requestId)
    if (i >= 0) this.settledOrder.splice(i, 1)
    return true
  }

  /** How many jobs will run before `job` (the running one included); undefined unless it is queued. */
  positionOf (job: PrefillJob): number | undefined {
    const i = this.waiting.indexOf(job)
    return i < 0 ? undefined : i + (this.current === undefined ? 0 : 1)
  }

  /**
   * Accept a job: 409 if its id is known, 429 (with Retry-After) if the queue is full, 503 once
   * stopping. Returns the number of jobs ahead of it (0: it starts now); `onAccepted` hears it
   * first, before the job can start.
   */
  submit (job: PrefillJob, onAccepted?: (ahead: number) => void): number {
    if (this.stopped) throw new ApiError(503, 'service_unavailable_error', 'the engine is shutting down and takes no new requests')
    if (this.jobs.has(job.requestId)) {
      throw new ApiError(409, 'conflict_error', `request_id ${JSON.stringify(job.requestId)} is already in use by a ${this.jobs.get(job.requestId)?.state} request`, 'request_id')
    }
    const busy = this.current !== undefined
    if (busy && this.waiting.length >= this.options.maxQueue) {
      const seconds = Math.max(1, Math.ceil(this.options.retryAfterSeconds?.() ?? 1))
      throw new ApiError(429, 'rate_limit_error', `the queue is full: ${this.waiting.length} requests wait behind the running one (--max-queue ${this.options.maxQueue}); retry later`, undefined, { 'Retry-After': String(seconds) })
    }
    const ahead = (busy ? 1 : 0) + this.waiting.length
    this.jobs.set(job.requestId, job)
    this.waiting.push(job)
    onAccepted?.(ahead)
    if (!busy) this.pump = this.drain()
    return ahead
  }

  /** Every job that will still run, the running one first. */
  pending (): PrefillJob[] {
    return this.current === undefined ? [...this.waiting] : [this.current, ...this.waiting]
  }

  /**
   * Stop: refuse new submissions, settle every waiting job as failed with `reason`, and resolve
   * once the running job (if any) has settled. What the running job does is the runner's business.
   */
  async stop (reason: string): Promise<void> {
    this.stopped = true
    for (const job of this.waiting.splice(0)) {
      job.state = 'failed'
      job.error = reason
      this.remember(job)
    }
    await this.pump
  }

  private async drain (): Promise<void> {
    for (;;) {
      // stop() empties the wait list, so after a stop this ends with the running job.
      const job = this.waiting.shift()
      if (job === undefined) break
      this.current = job
      try {
        await this.run(job)
      }
      catch (e) {
        // The runner records its own failures; this is a last guard so the queue never wedges.
        job.state = 'failed'
        job.error = `internal error: ${(e as Error).message}`
      }
      if (!isSettled(job.state)) {
        job.state = 'failed'
        job.error = 'internal error: the runner returned without settling the request'
      }
      this.current = undefined
      this.remember(job)
    }
  }

  private remember (job: PrefillJob): void {
    this.settledOrder.push(job.requestId)
    const keep = this.options.keepSettled ?? 1024
    while (this.settledOrder.length > keep) {
      const old = this.settledOrder.shift()
      if (old !== undefined) this.jobs.delete(old)
    }
  }
}
