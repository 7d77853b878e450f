// One bridge's shared state, which every stage reads: its request id, the config and the key, the
// bridge deadline (an abort signal, with the first reason it was stopped for), the timings so far,
// and what must be cleaned up whatever the outcome (the engine watch, the spool directory).
import { randomUUID } from 'node:crypto'
import { rm } from 'node:fs/promises'
import type { FrontConfig } from '../../config/index.ts'
import { PD_ERR } from '../../errors.ts'
import type { EngineWatch } from '../engine-watch.ts'
import { clearInflight, markInflight } from '../reconcile.ts'
import { BridgeFailure, type Cause } from './failure.ts'
import { round, type BridgeTimings } from './timings.ts'

export class BridgeRun {
  readonly requestId = `pd-${randomUUID()}`
  readonly timings: Partial<BridgeTimings> = {}
  readonly bytes: Record<string, number> = {}
  /** The engine watch of the capture stage, stopped when the bridge ends. */
  watch: EngineWatch | undefined
  /** The spool directory of this request (ours), removed when the bridge ends. */
  spoolDir: string | undefined
  private readonly t0 = performance.now()
  private readonly control = new AbortController()
  private stoppedBy: Cause | undefined
  private accepted = false
  private keepMark = false
  private readonly timer: NodeJS.Timeout

  constructor (readonly config: FrontConfig, readonly auth: Record<string, string>) {
    const ms = config.deadlines.bridgeMs
    this.timer = setTimeout(() => this.abandon({ reason: `timeout: the bridge took longer than ${ms} ms`, code: PD_ERR.BRIDGE_DEADLINE }), ms)
  }

  /** Aborts when the bridge is abandoned (its deadline, the engine watch). */
  get signal (): AbortSignal {
    return this.control.signal
  }

  /** The first reason the bridge was abandoned for, if it was. */
  get abandoned (): Cause | undefined {
    return this.stoppedBy
  }

  /** Stop the bridge for `cause` (the first cause given is kept). */
  abandon (cause: Cause): void {
    this.stoppedBy ??= cause
    this.control.abort()
  }

  /** The engine accepted the request: from now on a failure keeps (and names) its capture. */
  accept (): void {
    this.accepted = true
  }

  /** Mark the bridge in flight in the spool (before its submit), so a front door that dies mid-bridge leaves a record the next one reconciles. */
  async begin (): Promise<void> {
    const root = this.config.capture.spoolDir
    if (root !== undefined) await markInflight(root, this.requestId)
  }

  /**
   * The capture's delete did not reach the engine: the in-flight mark stays when the bridge ends,
   * until the capture is retired later (FrontState.retireLater), so a front door that dies first
   * leaves the next one the record to retire it by.
   */
  keepInflightMark (): void {
    this.keepMark = true
  }

  /** Milliseconds since the bridge started, rounded. */
  elapsed (): number {
    return round(performance.now() - this.t0)
  }

  /** The failure of `stage` for `cause`, with the timings so far. */
  fail (cause: Cause, stage: string): BridgeFailure {
    return new BridgeFailure(cause.reason, stage, cause.code, { ...this.timings, bridge_total: this.elapsed() }, this.accepted ? this.requestId : undefined)
  }

  /**
   * Whatever the outcome: stop the deadline and the watch, and remove the spool. The capture on
   * the prefill side is the engine's, deleted (retention) only through its API and only once its
   * blocks were verified.
   */
  async end (): Promise<void> {
    clearTimeout(this.timer)
    this.watch?.stop()
    if (this.spoolDir !== undefined) await rm(this.spoolDir, { recursive: true, force: true })
    const root = this.config.capture.spoolDir
    if (root !== undefined && !this.keepMark) await clearInflight(root, this.requestId)
  }
}
