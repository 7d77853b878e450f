// The supervisor: starts children one after another (each waits for the previous one's URL),
// watches them, and stops them all, newest first, on request, on a child's unexpected death, and
// when this process exits. A child that dies after start-up stops the whole stack: a bridge with
// a missing link would only answer with fallbacks, which is worse than saying so.
import { StackError } from './errors.ts'
import { StackChild, describeExit, type ChildExit, type ChildSpec } from './child.ts'
import type { ReadyInfo } from './ready-line.ts'

/** What the supervisor reports as it goes (serve prints these; the demo feeds its progress display). */
export type SupervisorEvent =
  | { kind: 'starting', name: string }
  | { kind: 'ready', name: string, url: string, pid: number, ms: number }
  | { kind: 'died', name: string, exit: ChildExit, message: string }
  | { kind: 'stopping', name: string }
  | { kind: 'stopped', name: string, exit: ChildExit }

/** Supervisor settings. */
export interface SupervisorOptions {
  logDir: string
  /** Time from SIGTERM to SIGKILL (default 10 s). */
  graceMs?: number
  onEvent?: (e: SupervisorEvent) => void
}

/** Starts, tracks and stops the stack's children. */
export class Supervisor {
  private readonly children: StackChild[] = []
  private stopAllPromise: Promise<void> | undefined
  private readonly onExit = (): void => this.killAllNow()
  private readonly deathListeners: Array<(child: StackChild, message: string) => void> = []
  private readonly deaths: Array<{ child: StackChild, message: string }> = []

  constructor (readonly options: SupervisorOptions) {
    // Last line of defence: whatever ends this process, no child outlives it.
    process.on('exit', this.onExit)
  }

  /** The children started so far, oldest first. */
  get started (): readonly StackChild[] {
    return this.children
  }

  /** Call `fn` when a ready child dies without being asked to stop (at once for deaths already seen). */
  onDeath (fn: (child: StackChild, message: string) => void): void {
    this.deathListeners.push(fn)
    for (const d of this.deaths) fn(d.child, d.message)
  }

  /** Spawn a child and wait for its ready line; on failure the child is stopped and the error names it. */
  async start (spec: Omit<ChildSpec, 'logDir'>): Promise<ReadyInfo> {
    if (this.stopAllPromise !== undefined) throw new StackError(`cannot start ${spec.name}: the stack is stopping`, spec.name)
    this.emit({ kind: 'starting', name: spec.name })
    const child = StackChild.spawn({ ...spec, logDir: this.options.logDir })
    this.children.push(child)
    const ready = await child.waitReady()
    this.emit({ kind: 'ready', name: spec.name, url: ready.url, pid: child.pid ?? -1, ms: Date.now() - child.started })
    void child.exited.then((exit) => {
      if (child.stopRequested) return
      const message = `${spec.name} (pid ${String(child.pid)}) ${describeExit(exit)} while the stack was running${child.tailText()}`
      this.deaths.push({ child, message })
      this.emit({ kind: 'died', name: spec.name, exit, message })
      for (const fn of this.deathListeners) fn(child, message)
    })
    return ready
  }

  /** Stop every child, newest first, each with SIGTERM then SIGKILL after the grace period. */
  async stopAll (): Promise<void> {
    this.stopAllPromise ??= (async () => {
      for (const child of [...this.children].reverse()) {
        if (child.exit === undefined) this.emit({ kind: 'stopping', name: child.spec.name })
        const exit = await child.stop(this.options.graceMs ?? 10_000)
        this.emit({ kind: 'stopped', name: child.spec.name, exit })
        await child.log.close()
      }
      process.off('exit', this.onExit)
    })()
    await this.stopAllPromise
  }

  /** SIGKILL every live child at once (a second Ctrl-C, or this process exiting). */
  killAllNow (): void {
    for (const child of this.children) child.killNow()
  }

  /** Pids of the children that have not exited. */
  livePids (): number[] {
    return this.children.filter((c) => c.exit === undefined && c.pid !== undefined).map((c) => c.pid as number)
  }

  private emit (e: SupervisorEvent): void {
    this.options.onEvent?.(e)
  }
}
