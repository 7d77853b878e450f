// Continuous batching on one engine. Every running request is a seat; a decode step feeds each
// seat's next token through the model in one pass over the weights (engine.decodeBatch), and
// seats join and leave between steps. Other engine work (a prefill chunk) runs between steps, at
// most one piece between two steps, first come first served, so a long prefill holds up the
// others' decoding for at most one chunk; a waiting chunk never splits a batch whose seats come
// back within their turns. A step's rows are bit-identical to solo decodes (batch-invariant kernels), so
// who else is in the batch never changes an answer.
import { performance } from 'node:perf_hooks'
import { setImmediate as nextTurn } from 'node:timers/promises'
import type { DeepseekV4Engine, ModelCache } from '../../model/engine/index.ts'

/**
 * Event-loop turns a step waits for seats still choosing their next token (a stream writing its
 * text) before it runs without them; they join the next step. Turns, not time: a seat usually
 * submits within one or two, and a slow reader slows only itself.
 */
export const STRAGGLER_TURNS = 8

/** Thrown to engine work whose request went away before its turn. */
export class BatcherCancelled extends Error {
  override name = 'BatcherCancelled'
}

/** Counters for /health and the load protocol. */
export interface BatcherStats {
  /** Seats decoding now. */
  seats: number
  /** Batched decode steps run, and the rows they fed (rows / steps is the mean batch). */
  steps: number
  rows: number
  /** The largest batch so far. */
  maxRows: number
  /** Pieces of other engine work (prefill chunks) run between steps. */
  chunks: number
  /**
   * Where the engine thread's time went, in ms since start (a difference of two readings is a
   * profile of the time between them): inside the batched steps' decodeBatch, inside the chunks,
   * choosing tokens (the samplers, summed over rows), and the wall time while at least one seat
   * decoded. The rest of seatedMs is the decode loop's own work (text, stream writes, other routes)
   * and waiting; the event loop's active time (loopActiveMs, the whole process) splits the two.
   */
  stepMs: number
  chunkMs: number
  pickMs: number
  seatedMs: number
  loopActiveMs: number
  /** Steps run without every seat because some were still busy after STRAGGLER_TURNS turns. */
  partialSteps: number
}

interface Pending {
  token: number
  resolve: (logits: Float32Array) => void
  reject: (err: unknown) => void
}

interface Job {
  work: () => void
  signal: AbortSignal | undefined
  cancel: (err: unknown) => void
}

/** One decoding sequence: its cache, fed one token per step. */
export class Seat {
  /** The token waiting for the next step, if any. */
  pending: Pending | null = null
  left = false

  constructor (private readonly batcher: DecodeBatcher, readonly cache: ModelCache) {}

  /** Feed `token` in the next batched step; resolves with the logits [vocab] that follow it. */
  step (token: number): Promise<Float32Array> {
    if (this.left) return Promise.reject(new Error('batcher: this seat has left the batch'))
    if (this.pending !== null) return Promise.reject(new Error('batcher: a seat feeds one token per step'))
    return new Promise<Float32Array>((resolve, reject) => {
      this.pending = { token, resolve, reject }
      this.batcher.wake()
    })
  }

  /** Leave the batch (at the end of the request, or when it is cancelled); idempotent. */
  leave (): void {
    this.batcher.remove(this)
  }
}

/** The scheduler of one engine: batched decode steps with other engine work between them. */
export class DecodeBatcher {
  private readonly seats = new Set<Seat>()
  private readonly jobs: Job[] = []
  private looping = false
  /** Pieces of other work run since the last step (at most one while seats wait for it). */
  private jobsSinceStep = 0
  private readonly counters = { steps: 0, rows: 0, maxRows: 0, chunks: 0, stepMs: 0, chunkMs: 0, pickMs: 0, seatedMs: 0, partialSteps: 0 }
  /** When the seats last went from none to some (performance.now()). */
  private seatedSince = 0

  /** `engine`: what the batcher calls of it, a batched decode step. */
  constructor (private readonly engine: Pick<DeepseekV4Engine, 'decodeBatch'>) {}

  get stats (): BatcherStats {
    const open = this.seats.size > 0 ? performance.now() - this.seatedSince : 0
    const loop = performance.eventLoopUtilization()
    return { seats: this.seats.size, ...this.counters, seatedMs: this.counters.seatedMs + open, loopActiveMs: loop.active }
  }

  /** A seat for a sequence whose cache holds its prompt. */
  join (cache: ModelCache): Seat {
    const seat = new Seat(this, cache)
    if (this.seats.size === 0) this.seatedSince = performance.now()
    this.seats.add(seat)
    return seat
  }

  /** Count `ms` spent choosing one token from a step's row (stats.pickMs). */
  notePick (ms: number): void {
    this.counters.pickMs += ms
  }

  /** @internal Seat.leave. */
  remove (seat: Seat): void {
    if (seat.left) return
    seat.left = true
    this.seats.delete(seat)
    if (this.seats.size === 0) this.counters.seatedMs += performance.now() - this.seatedSince
    seat.pending?.reject(new Error('batcher: the seat left with a token pending'))
    seat.pending = null
    this.wake()
  }

  /**
   * Run `work` (engine work of one request, such as a prefill chunk) between decode steps, in
   * arrival order, one piece per step. Rejects with BatcherCancelled if `signal` fires first.
   */
  exclusive<T> (work: () => T, signal?: AbortSignal): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      this.jobs.push({
        work: () => { resolve(work()) },
        signal,
        cancel: reject,
      })
      this.wake()
    })
  }

  /** @internal Start the loop if it sleeps. */
  wake (): void {
    if (this.looping) return
    this.looping = true
    void this.loop()
  }

  private ready (): Seat[] {
    return [...this.seats].filter((s) => s.pending !== null)
  }

  private async loop (): Promise<void> {
    // Turns since the last step while seats decode: stragglers get STRAGGLER_TURNS of them.
    let waited = 0
    try {
      // Seats that come back in the same turn (each had a turn of its own after the last step) share one step.
      await nextTurn()
      for (;;) {
        const ready = this.ready()
        let stepped = false
        // A partial batch steps once its stragglers had their turns, or once a piece of other work
        // ran while it waited: a ready seat waits for one chunk at most, never for a second.
        if (ready.length > 0 && (ready.length === this.seats.size || waited >= STRAGGLER_TURNS || (this.jobsSinceStep > 0 && this.jobs.length > 0))) {
          if (ready.length < this.seats.size && waited >= STRAGGLER_TURNS) this.counters.partialSteps++
          this.step(ready)
          stepped = true
          waited = 0
          this.jobsSinceStep = 0
        } else if (this.seats.size > 0) waited++
        // One piece of other work between two steps; back to back while no seat decodes (or all
        // of them are held by their clients past the straggler turns).
        let ran = false
        if (this.jobs.length > 0 && (this.jobsSinceStep === 0 || this.seats.size === 0 || waited >= STRAGGLER_TURNS)) {
          // A job whose request went away costs nothing and does not count.
          if (this.runJob(this.jobs.shift()!)) this.jobsSinceStep++
          ran = true
        }
        if (!stepped && !ran && ready.length === 0 && this.jobs.length === 0) return
        await nextTurn()
      }
    } finally {
      this.looping = false
      // Work that arrived as the loop decided to stop.
      if (this.jobs.length > 0 || this.ready().length > 0) this.wake()
    }
  }

  private step (ready: Seat[]): void {
    const pending = ready.map((s) => s.pending!)
    for (const s of ready) s.pending = null
    let out: Float32Array
    const t0 = performance.now()
    try {
      out = this.engine.decodeBatch(pending.map((p) => p.token), ready.map((s) => s.cache))
    } catch (e) {
      for (const p of pending) p.reject(e)
      return
    } finally {
      this.counters.stepMs += performance.now() - t0
    }
    this.counters.steps++
    this.counters.rows += ready.length
    this.counters.maxRows = Math.max(this.counters.maxRows, ready.length)
    const vocab = out.length / ready.length
    // Views, not copies: every reader of a row only reads it (the sampler copies what it changes).
    pending.forEach((p, i) => p.resolve(out.subarray(i * vocab, (i + 1) * vocab)))
  }

  /** Run `job`; false when its request had gone away (it is cancelled, nothing ran). */
  private runJob (job: Job): boolean {
    if (job.signal?.aborted === true) {
      job.cancel(new BatcherCancelled('the request went away before its engine work ran'))
      return false
    }
    const t0 = performance.now()
    try {
      job.work()
      this.counters.chunks++
    } catch (e) {
      job.cancel(e)
    } finally {
      this.counters.chunkMs += performance.now() - t0
    }
    return true
  }
}
