// Watching one request on the prefill engine while its capture streams: GET /v1/prefill/{id}
// every pollMs. The share alone cannot tell a slow engine from a dead one (a killed engine leaves
// a `running` manifest behind, which the share keeps serving), so the watcher is what turns a
// dead or failed engine into a prompt fallback instead of a wait until the capture deadline.
import { callJson, joinUrl, LinkError } from './http.ts'

/** The engine's last answer about the request. */
export interface EngineStatus {
  state: string
  sealedLength?: number
  timings?: Record<string, number>
  error?: string
}

/** Options of `EngineWatch`. */
export interface EngineWatchOptions {
  url: string
  requestId: string
  pollMs: number
  /** Deadline of one poll. */
  linkMs: number
  /** Consecutive failed polls before the engine counts as down. */
  downPolls: number
  /** Called once with the reason when the engine failed the request or went away. */
  onFailure: (reason: string) => void
}

function isRecord (v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v)
}

/** Polls the engine until stopped, sealed, or failed. */
export class EngineWatch {
  private timer: NodeJS.Timeout | undefined
  private stopped = false
  private misses = 0
  private lastProblem = ''
  private resolveSealed!: (s: EngineStatus) => void
  /** The last status the engine gave. */
  last: EngineStatus | undefined
  /** Resolves when the engine reports the capture sealed (done or partial). */
  readonly sealed: Promise<EngineStatus>

  constructor (private readonly o: EngineWatchOptions) {
    this.sealed = new Promise((resolve) => { this.resolveSealed = resolve })
  }

  /** Start polling. */
  start (): void {
    this.schedule(0)
  }

  /** Stop polling (idempotent). */
  stop (): void {
    this.stopped = true
    if (this.timer !== undefined) clearTimeout(this.timer)
  }

  private schedule (ms: number): void {
    if (this.stopped) return
    this.timer = setTimeout(() => { void this.poll() }, ms)
  }

  private fail (reason: string): void {
    if (this.stopped) return
    this.stop()
    this.o.onFailure(reason)
  }

  private miss (problem: string): void {
    this.misses++
    this.lastProblem = problem
    if (this.misses >= this.o.downPolls) this.fail(`prefill engine unreachable during the prefill (${this.misses} status polls failed): ${this.lastProblem}`)
    else this.schedule(this.o.pollMs)
  }

  private async poll (): Promise<void> {
    const url = joinUrl(this.o.url, `/v1/prefill/${this.o.requestId}`)
    let answer
    try {
      answer = await callJson('prefill engine', url, { timeoutMs: this.o.linkMs })
    } catch (e) {
      this.miss(e instanceof LinkError ? e.problem : String(e))
      return
    }
    if (this.stopped) return
    if (answer.status === 404) {
      this.fail(`the prefill engine no longer knows request ${this.o.requestId} (was it restarted on another capture root?)`)
      return
    }
    if (answer.status !== 200 || !isRecord(answer.body) || typeof answer.body.state !== 'string') {
      this.miss(`status poll answered ${answer.status}`)
      return
    }
    this.misses = 0
    const b = answer.body
    const status: EngineStatus = {
      state: b.state as string,
      sealedLength: typeof b.sealed_length === 'number' ? b.sealed_length : undefined,
      timings: isRecord(b.timings) ? b.timings as Record<string, number> : undefined,
      error: typeof b.error === 'string' ? b.error : undefined,
    }
    this.last = status
    if (status.state === 'failed') {
      this.fail(`prefill engine failed the request: ${status.error ?? 'no reason given'}`)
      return
    }
    if (status.state === 'done' || status.state === 'partial') {
      this.stop()
      this.resolveSealed(status)
      return
    }
    this.schedule(this.o.pollMs)
  }
}
