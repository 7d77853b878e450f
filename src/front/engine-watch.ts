// Watching one request on the prefill engine while its capture streams: GET /v1/prefill/{id}
// every pollMs. The share alone cannot tell a slow engine from a dead one (a killed engine leaves
// a `running` manifest behind, which the share keeps serving), so the watcher is what turns a
// dead or failed engine into a prompt fallback instead of a wait until the capture deadline.
// Busy is not dead: a poll that gets no answer in time (a long chunk holds the engine's event
// loop) is not a failed poll; only refusals are. A poll waits for its answer as long as the progress
// deadline has left (at least linkMs): an engine whose chunks outlast linkMs answers between them,
// and a 1M-token bridge was declined when every poll gave up after 3 s on a loaded machine. What catches a wedged or stopped engine is the
// progress deadline: its status of the request (state, tokens prefilled, queue position, and the
// engine's own token count while the request waits, and the capture hook's rows where the engine
// reports them: a chunk of a long prompt can outlast the deadline, a layer does not) not changing for stallMs.
import { PD_ERR, type PdErrorCode } from '../errors.ts'
import { callJson, isNoAnswer, joinUrl, LinkError } from './http.ts'

/** The engine's last answer about the request. */
export interface EngineStatus {
  state: string
  sealedLength?: number
  /** Tokens the engine has run for this request. */
  prefilled?: number
  /** Requests ahead of this one, while it waits. */
  queuePosition?: number
  /** Tokens the engine has run for every request since it started (it moves while this one waits). */
  engineTokens?: number
  /** Attention-input rows the capture hook was fed, summed over layers (moves within a chunk; optional). */
  hookRows?: number
  timings?: Record<string, number>
  error?: string
}

/** Options of `EngineWatch`. */
export interface EngineWatchOptions {
  url: string
  requestId: string
  pollMs: number
  /** Shortest deadline of one poll (a poll may wait as long as the progress deadline has left). */
  linkMs: number
  /** Consecutive failed polls (refused, reset, an error status; not a slow answer) before the engine counts as down. */
  downPolls: number
  /** The status not changing (or no poll answered) for this long: the capture stalled. */
  stallMs: number
  /** Called once with the reason (and its code: ENGINE_FAILED, ENGINE_UNREACHABLE, ENGINE_STALL) when the engine failed the request or went away. */
  onFailure: (reason: string, code: PdErrorCode) => void
  /** Extra headers of every poll (the API key's Authorization). */
  headers?: Record<string, string>
  /** The clock of the progress deadline, in ms (performance.now unless a test drives it). */
  now?: () => number
}

function isRecord (v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v)
}

/** Polls the engine until stopped, sealed, or failed. */
export class EngineWatch {
  private timer: NodeJS.Timeout | undefined
  private stopped = false
  // Aborts the poll in flight when the watch stops (it may wait up to the whole progress deadline).
  private readonly control = new AbortController()
  private misses = 0
  private lastProblem = ''
  private progressKey = ''
  private readonly now: () => number
  private progressAt: number
  private resolveSealed!: (s: EngineStatus) => void
  /** The last status the engine gave. */
  last: EngineStatus | undefined
  /** Resolves when the engine reports the capture sealed (done or partial). */
  readonly sealed: Promise<EngineStatus>

  constructor (private readonly o: EngineWatchOptions) {
    this.sealed = new Promise((resolve) => { this.resolveSealed = resolve })
    this.now = o.now ?? (() => performance.now())
    this.progressAt = this.now()
  }

  /** Start polling. */
  start (): void {
    this.schedule(0)
  }

  /** Stop polling (idempotent). */
  stop (): void {
    this.stopped = true
    if (this.timer !== undefined) clearTimeout(this.timer)
    this.control.abort()
  }

  private schedule (ms: number): void {
    if (this.stopped) return
    this.timer = setTimeout(() => { void this.poll() }, ms)
  }

  private fail (reason: string, code: PdErrorCode): void {
    if (this.stopped) return
    this.stop()
    this.o.onFailure(reason, code)
  }

  /** Fail when nothing moved for stallMs; true when it did. */
  private stalled (): boolean {
    const still = this.now() - this.progressAt
    if (still < this.o.stallMs) return false
    const last = this.last
    const seen = last === undefined ? 'no status seen' : `last status: ${last.state}${last.prefilled !== undefined ? `, ${last.prefilled} tokens prefilled` : ''}${last.hookRows !== undefined ? `, ${last.hookRows} hook rows` : ''}${last.queuePosition !== undefined ? `, queue position ${last.queuePosition}` : ''}`
    const polls = this.lastProblem === '' ? '' : `; last poll: ${this.lastProblem}`
    this.fail(`capture stalled: the prefill engine's status of the request did not change for ${this.o.stallMs} ms (${seen}${polls})`, PD_ERR.ENGINE_STALL)
    return true
  }

  private miss (problem: string): void {
    this.misses++
    this.lastProblem = problem
    // A dead engine is named as dead, even when it also stopped moving some time ago.
    if (this.misses >= this.o.downPolls) this.fail(`prefill engine unreachable during the prefill (${this.misses} status polls failed): ${this.lastProblem}`, PD_ERR.ENGINE_UNREACHABLE)
    else if (!this.stalled()) this.schedule(this.o.pollMs)
  }

  private async poll (): Promise<void> {
    const url = joinUrl(this.o.url, `/v1/prefill/${this.o.requestId}`)
    let answer
    try {
      const left = this.progressAt + this.o.stallMs - this.now()
      answer = await callJson('prefill engine', url, { timeoutMs: Math.max(this.o.linkMs, Math.ceil(left)), headers: this.o.headers, signal: this.control.signal })
    } catch (e) {
      if (this.stopped) return
      if (isNoAnswer(e)) {
        // Busy or stopped, not gone: the progress deadline decides.
        this.lastProblem = (e as LinkError).problem
        if (!this.stalled()) this.schedule(this.o.pollMs)
        return
      }
      this.miss(e instanceof LinkError ? e.problem : String(e))
      return
    }
    if (this.stopped) return
    if (answer.status === 404) {
      this.fail(`the prefill engine no longer knows request ${this.o.requestId} (was it restarted on another capture root?)`, PD_ERR.ENGINE_FAILED)
      return
    }
    if (answer.status !== 200 || !isRecord(answer.body) || typeof answer.body.state !== 'string') {
      this.miss(`status poll answered ${answer.status}`)
      return
    }
    this.misses = 0
    this.lastProblem = ''
    const b = answer.body
    const num = (v: unknown): number | undefined => typeof v === 'number' ? v : undefined
    const status: EngineStatus = {
      state: b.state as string,
      sealedLength: num(b.sealed_length),
      prefilled: num(b.prefilled_tokens),
      queuePosition: num(b.queue_position),
      engineTokens: num(b.engine_prefilled_tokens),
      hookRows: num(b.hook_rows),
      timings: isRecord(b.timings) ? b.timings as Record<string, number> : undefined,
      error: typeof b.error === 'string' ? b.error : undefined,
    }
    this.last = status
    const key = JSON.stringify([status.state, status.sealedLength, status.prefilled, status.queuePosition, status.engineTokens, status.hookRows])
    if (key !== this.progressKey) {
      this.progressKey = key
      this.progressAt = this.now()
    }
    if (status.state === 'failed') {
      this.fail(`prefill engine failed the request: ${status.error ?? 'no reason given'}`, PD_ERR.ENGINE_FAILED)
      return
    }
    if (status.state === 'done' || status.state === 'partial') {
      this.stop()
      this.resolveSealed(status)
      return
    }
    if (this.stalled()) return
    this.schedule(this.o.pollMs)
  }
}
