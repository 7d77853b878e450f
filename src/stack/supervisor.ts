// The supervisor: starts children one after another (each waits for the previous one's URL),
// watches them, and stops them all, newest first, on request, on a child's unexpected death, and
// when this process exits. By default a child that dies after start-up is a death: its listeners
// (the demo) stop the whole stack. With restarts on (serve: restartOnDeath), a child that exits
// for any reason, code 0 included, is started again on the port it had, after a backoff, and only
// a child that keeps dying past the limit is a death. The limit's window is measured in the child's
// own up time (ready and running), not wall time: on a loaded machine a start-up or a backoff can
// take tens of seconds, and a child that is slow to start is not one that crashes more often.
import { restartsSchema } from '../config/front-config.ts'
import { StackError } from './errors.ts'
import { StackChild, describeExit, waitPortFree, type ChildExit, type ChildSpec } from './child.ts'
import type { ReadyInfo } from './ready-line.ts'

/** When and how often a dead child is started again. */
export interface RestartPolicy {
  /** Wait before the first restart; each further restart within the window waits twice as long. */
  firstDelayMs: number
  /** The longest wait. */
  maxDelayMs: number
  /** At most this many restarts of one child within `windowMs` of its up time; one more death is given up on. */
  limit: number
  /**
   * The window, in up time: the time the child was ready and running, summed over its lives. Time
   * in start-up (before the ready line) and in backoff does not count, so a crash loop is judged by
   * how long the child runs between deaths however slow the machine is; a life of at least this
   * long clears every earlier death.
   */
  windowMs: number
}

/** serve's restarts by default: the config's `restarts` defaults (0.5 s doubling to 8 s, at most 5 within 60 s of up time). */
export const DEFAULT_RESTART_POLICY: RestartPolicy = restartsSchema.parse({})

/** What the supervisor reports as it goes (serve prints these; the demo feeds its progress display). */
export type SupervisorEvent =
  | { kind: 'starting', name: string }
  | { kind: 'ready', name: string, url: string, pid: number, ms: number }
  | { kind: 'died', name: string, exit: ChildExit, message: string }
  /** A child died and will be started again on `port` after `delayMs` (`attempt` of `limit` within the window of up time). */
  | { kind: 'restarting', name: string, pid: number, exit: ChildExit, port: number | undefined, attempt: number, limit: number, windowMs: number, delayMs: number, message: string }
  /** A restarted child is ready again. */
  | { kind: 'restarted', name: string, url: string, pid: number, ms: number, attempt: number }
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
  private restartPolicy: RestartPolicy | undefined
  /** Per child name: its up time so far, and the up time at each restart (within the policy's window). */
  private readonly upTime = new Map<string, { totalMs: number, restarts: number[] }>()
  /** Per child name: the port of its first ready URL, which every restart listens on again. */
  private readonly ports = new Map<string, number>()
  /** Wakes restarts that wait out their backoff when the stack stops. */
  private readonly stopWaiters = new Set<() => void>()

  constructor (readonly options: SupervisorOptions) {
    // Last line of defence: whatever ends this process, no child outlives it.
    process.on('exit', this.onExit)
  }

  /** The children started so far, oldest first. */
  get started (): readonly StackChild[] {
    return this.children
  }

  /**
   * From now on restart a ready child that exits without being asked to (any code, 0 included, or
   * any signal) instead of reporting its death; a child that dies more than `policy.limit` times
   * within the window of up time is reported to onDeath listeners as before (its message says so).
   */
  restartOnDeath (policy: RestartPolicy = DEFAULT_RESTART_POLICY): void {
    this.restartPolicy = policy
  }

  /** Call `fn` when a ready child dies without being asked to stop (at once for deaths already seen); with restarts on, when one is given up on. */
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
    const port = portOf(ready.url)
    if (port !== undefined) this.ports.set(spec.name, port)
    this.emit({ kind: 'ready', name: spec.name, url: ready.url, pid: child.pid ?? -1, ms: Date.now() - child.started })
    this.watch(child, Date.now())
    return ready
  }

  /** React to the death of a ready child: a restart, or (no restarts, or past the limit) a reported death. */
  private watch (child: StackChild, readyAt: number): void {
    void child.exited.then((exit) => {
      if (child.stopRequested) return
      this.addUpTime(child.spec.name, Date.now() - readyAt)
      const message = `${child.spec.name} (pid ${String(child.pid)}) ${describeExit(exit)} while the stack was running${child.tailText()}`
      if (this.restartPolicy !== undefined) {
        if (this.stopAllPromise !== undefined) return
        void this.restart(child, exit, message)
        return
      }
      this.reportDeath(child, exit, message)
    })
  }

  private reportDeath (child: StackChild, exit: ChildExit, message: string): void {
    this.deaths.push({ child, message })
    this.emit({ kind: 'died', name: child.spec.name, exit, message })
    for (const fn of this.deathListeners) fn(child, message)
  }

  /** Start `dead`'s spec again after its backoff, on its first port; a failed start counts as another death. */
  private async restart (dead: StackChild, exit: ChildExit, message: string): Promise<void> {
    const policy = this.restartPolicy as RestartPolicy
    const name = dead.spec.name
    // Whatever the dead process left in its group (it is its leader) must not hold the port.
    dead.killGroup()
    const up = this.upTime.get(name) ?? { totalMs: 0, restarts: [] }
    const times = up.restarts.filter((t) => t > up.totalMs - policy.windowMs)
    if (times.length >= policy.limit) {
      const windowS = Math.round(policy.windowMs / 1000)
      this.reportDeath(dead, exit, `${name} died ${times.length + 1} times within ${windowS} s of up time (at most ${policy.limit} restarts are allowed): giving up, the stack stops. Its last death: ${message}`)
      return
    }
    const delayMs = Math.min(policy.firstDelayMs * 2 ** times.length, policy.maxDelayMs)
    times.push(up.totalMs)
    this.upTime.set(name, { totalMs: up.totalMs, restarts: times })
    const port = this.ports.get(name)
    this.emit({ kind: 'restarting', name, pid: dead.pid ?? -1, exit, port, attempt: times.length, limit: policy.limit, windowMs: policy.windowMs, delayMs, message })
    await dead.log.close()
    await this.sleepUnlessStopping(delayMs)
    if (this.stopAllPromise !== undefined) return
    const host = hostOf(dead.ready?.url)
    if (port !== undefined && host !== undefined) await waitPortFree(host, port, 5000)
    if (this.stopAllPromise !== undefined) return
    const next = StackChild.spawn(withPort(dead.spec, port))
    const at = this.children.indexOf(dead)
    if (at >= 0) this.children[at] = next
    else this.children.push(next)
    let ready: ReadyInfo
    try {
      ready = await next.waitReady()
    }
    catch (err) {
      const e = await next.exited
      if (this.stopAllPromise !== undefined || this.restartPolicy === undefined) return
      await this.restart(next, e, (err as Error).message)
      return
    }
    if (this.stopAllPromise !== undefined) return
    this.emit({ kind: 'restarted', name, url: ready.url, pid: next.pid ?? -1, ms: Date.now() - next.started, attempt: times.length })
    this.watch(next, Date.now())
  }

  /** Add one life's up time (from its ready line to its exit) to `name`'s. */
  private addUpTime (name: string, ms: number): void {
    const up = this.upTime.get(name) ?? { totalMs: 0, restarts: [] }
    this.upTime.set(name, { totalMs: up.totalMs + ms, restarts: up.restarts })
  }

  private async sleepUnlessStopping (ms: number): Promise<void> {
    await new Promise<void>((resolve) => {
      const done = (): void => {
        clearTimeout(timer)
        this.stopWaiters.delete(done)
        resolve()
      }
      const timer = setTimeout(done, ms)
      this.stopWaiters.add(done)
    })
  }

  /** Stop every child, newest first, each with SIGTERM then SIGKILL after the grace period. */
  async stopAll (): Promise<void> {
    this.stopAllPromise ??= (async () => {
      for (const wake of [...this.stopWaiters]) wake()
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

/** The port of an http URL, if it names one. */
function portOf (url: string): number | undefined {
  try {
    const port = new URL(url).port
    return port === '' ? undefined : Number(port)
  }
  catch {
    return undefined
  }
}

function hostOf (url: string | undefined): string | undefined {
  if (url === undefined) return undefined
  try {
    return new URL(url).hostname.replace(/^\[(.*)\]$/, '$1')
  }
  catch {
    return undefined
  }
}

/**
 * `spec` to start again on `port`: the value after its last `--port` replaced (or `--port N`
 * appended: the front door takes its port from its config, and --port overrides it). A stand-in
 * (`argv`) gets the same replacement in its argv, and nothing appended.
 */
export function withPort<T extends { args: string[], argv?: string[] }> (spec: T, port: number | undefined): T {
  if (port === undefined) return spec
  const replace = (list: string[], append: boolean): string[] => {
    const at = list.lastIndexOf('--port')
    if (at >= 0 && at + 1 < list.length) return [...list.slice(0, at + 1), String(port), ...list.slice(at + 2)]
    return append ? [...list, '--port', String(port)] : list
  }
  if (spec.argv !== undefined) return { ...spec, argv: replace(spec.argv, false) }
  return { ...spec, args: replace(spec.args, true) }
}
