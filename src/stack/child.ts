// One child process of the stack: `node --import parent-watch.mjs src/cli/pd-bridge.mjs <args>`,
// its stdout and stderr into its own log file, a ready line awaited under a deadline, and a stop
// that escalates from SIGTERM to SIGKILL. A child that dies before it is ready is an error naming
// it, with the last lines it printed.
import { spawn, type ChildProcess } from 'node:child_process'
import { createServer } from 'node:net'
import { fileURLToPath, pathToFileURL } from 'node:url'
import { StackError } from './errors.ts'
import { ProcessLog } from './log-file.ts'
import { parseReadyLine, type ReadyInfo } from './ready-line.ts'

/**
 * Set for the stack's own children only: parent-watch.mjs acts on it and removes it, so a process a
 * child forks in turn (node-llama-cpp forks one to test its binary, and fork passes --import on)
 * does not treat its IPC channel as the supervisor's.
 */
export const PARENT_WATCH_ENV = 'PD_STACK_CHILD'

/** The CLI every child runs: the deployment entry, the runtime commands without verify/'s (bin/pd-bridge.mjs adds those). */
export const CLI_PATH = fileURLToPath(new URL('../cli/pd-bridge.mjs', import.meta.url))
const PARENT_WATCH_URL = pathToFileURL(fileURLToPath(new URL('./parent-watch.mjs', import.meta.url))).href

/**
 * The command line a child runs `pd-bridge <args>` with: this node, the parent watch, the CLI. A
 * caller that wraps it (`ip netns exec NS ...` for a child on another host) passes the result as `argv`.
 */
export function childArgv (args: string[]): string[] {
  return [process.execPath, '--import', PARENT_WATCH_URL, CLI_PATH, ...args]
}

/** How to start one child. */
export interface ChildSpec {
  /** Short name: the log file is `<logDir>/<name>.log`. */
  name: string
  /** pd-bridge arguments (the command and its flags). */
  args: string[]
  logDir: string
  /** How long start-up may take until the ready line (default 120 s). */
  readyTimeoutMs?: number
  env?: NodeJS.ProcessEnv
  /** Replace the executable and arguments (tests: a child that is not pd-bridge). */
  argv?: string[]
}

/** How a child ended. */
export interface ChildExit {
  code: number | null
  signal: NodeJS.Signals | null
}

/** Render the end of a child for a message: "exited with code 2", "was killed by SIGKILL". */
export function describeExit (e: ChildExit): string {
  return e.signal !== null ? `was killed by ${e.signal}` : `exited with code ${String(e.code)}`
}

/** A started child: its pid, its log, its ready line (once printed) and its end. */
export class StackChild {
  readonly log: ProcessLog
  readonly proc: ChildProcess
  readonly started = Date.now()
  /** Settles once the process has exited. */
  readonly exited: Promise<ChildExit>
  private exitInfo: ChildExit | undefined
  private readyInfo: ReadyInfo | undefined
  private stopping = false
  private readonly readyWaiters: Array<() => void> = []

  private constructor (readonly spec: ChildSpec, readonly logPath: string) {
    this.log = new ProcessLog(logPath, spec.name)
    const argv = spec.argv ?? childArgv(spec.args)
    // Own process group: a terminal's Ctrl-C goes to the supervisor alone, which stops children in
    // order. The IPC channel is what parent-watch.mjs watches.
    this.proc = spawn(argv[0], argv.slice(1), { stdio: ['ignore', 'pipe', 'pipe', 'ipc'], detached: true, env: { ...(spec.env ?? process.env), [PARENT_WATCH_ENV]: '1' } })
    this.log.note({ event: 'spawn', pid: this.proc.pid, argv: argv.slice(1) }, `started ${spec.name}`)
    const onLine = (line: string): void => {
      if (this.readyInfo !== undefined) return
      const info = parseReadyLine(line)
      if (info === undefined) return
      this.readyInfo = info
      this.log.note({ event: 'ready', url: info.url, ms: Date.now() - this.started }, `${spec.name} ready at ${info.url}`)
      for (const waiter of this.readyWaiters) waiter()
    }
    this.proc.stdout?.setEncoding('utf8').on('data', (chunk: string) => this.log.feed(chunk, 'stdout', this.pid, onLine))
    this.proc.stderr?.setEncoding('utf8').on('data', (chunk: string) => this.log.feed(chunk, 'stderr', this.pid))
    this.exited = new Promise((resolve) => {
      // 'close' comes after 'exit' and after the pipes are drained, so the tail is complete.
      this.proc.once('close', (code, signal) => {
        this.exitInfo = { code, signal }
        this.log.flushPartial(this.pid)
        this.log.note({ event: 'exit', code, signal }, `${spec.name} ${describeExit(this.exitInfo)}`)
        resolve(this.exitInfo)
      })
      // spawn failing (no such executable) arrives as 'error' without 'exit'.
      this.proc.once('error', (err) => {
        if (this.proc.pid !== undefined) return
        this.log.feed(`spawn failed: ${err.message}\n`, 'stderr', undefined)
        this.exitInfo = { code: -1, signal: null }
        resolve(this.exitInfo)
      })
    })
  }

  /** Spawn the child; `ready` then resolves with its ready line or rejects with a StackError. */
  static spawn (spec: ChildSpec): StackChild {
    return new StackChild(spec, `${spec.logDir}/${spec.name}.log`)
  }

  /** The process id (undefined only if spawning failed). */
  get pid (): number | undefined {
    return this.proc.pid
  }

  /** The ready line, once printed. */
  get ready (): ReadyInfo | undefined {
    return this.readyInfo
  }

  /** The exit, once it happened. */
  get exit (): ChildExit | undefined {
    return this.exitInfo
  }

  /** Wait for the ready line; reject if the child exits first or the deadline passes (then stop it). */
  async waitReady (): Promise<ReadyInfo> {
    const timeoutMs = this.spec.readyTimeoutMs ?? 120_000
    const name = this.spec.name
    if (this.readyInfo !== undefined) return this.readyInfo
    return await new Promise<ReadyInfo>((resolve, reject) => {
      let settled = false
      const settle = (fn: () => void): void => {
        if (settled) return
        settled = true
        clearTimeout(timer)
        fn()
      }
      this.readyWaiters.push(() => settle(() => resolve(this.readyInfo as ReadyInfo)))
      const timer = setTimeout(() => {
        settle(() => reject(new StackError(`${name} was not ready within ${Math.round(timeoutMs / 1000)} s${this.tailText()}`, name)))
        void this.stop()
      }, timeoutMs)
      void this.exited.then((e) => {
        settle(() => reject(new StackError(`${name} ${describeExit(e)} before it was ready${this.tailText()}`, name)))
      })
    })
  }

  /** "; last lines of <log>:" and the tail, indented, or "" when it printed nothing. */
  tailText (): string {
    const lines = this.log.lastLines()
    if (lines.length === 0) return ` (it printed nothing; log: ${this.logPath})`
    return `; last lines of ${this.logPath}:\n${lines.map((l) => `  ${l}`).join('\n')}`
  }

  /** True from the first stop() on: an exit after that was asked for. */
  get stopRequested (): boolean {
    return this.stopping
  }

  /**
   * Stop the child: SIGTERM, then SIGKILL to its whole process group if it is still alive after
   * `graceMs`. Resolves once it has exited. Safe to call more than once.
   */
  async stop (graceMs = 10_000): Promise<ChildExit> {
    this.stopping = true
    if (this.exitInfo !== undefined || this.pid === undefined) return await this.exited
    this.signal('SIGTERM')
    const timer = setTimeout(() => this.signal('SIGKILL'), graceMs)
    const e = await this.exited
    clearTimeout(timer)
    return e
  }

  /** Kill the whole group now, synchronously (for process 'exit' handlers). */
  killNow (): void {
    this.stopping = true
    if (this.exitInfo === undefined) this.signal('SIGKILL')
  }

  /**
   * SIGKILL what is left of the process group of a child that has exited (its leader is gone, but
   * a process it started may still hold its port). Nothing when it never started.
   */
  killGroup (): void {
    if (this.pid === undefined) return
    try {
      process.kill(-this.pid, 'SIGKILL')
    }
    catch {
      // No process is left in the group.
    }
  }

  private signal (sig: NodeJS.Signals): void {
    if (this.pid === undefined || this.exitInfo !== undefined) return
    try {
      process.kill(-this.pid, sig)
    }
    catch {
      // The group is already gone; the 'exit' event is on its way.
    }
  }
}

/** Whether host:port can be listened on right now. */
async function portFree (host: string, port: number): Promise<boolean> {
  return await new Promise<boolean>((resolve) => {
    const probe = createServer()
    probe.once('error', () => resolve(false))
    probe.listen({ host, port, exclusive: true }, () => probe.close(() => resolve(true)))
  })
}

/**
 * Wait until host:port is free (a dead child's socket is released by the kernel as its process
 * goes), polling for at most `ms`; resolves either way: a port still busy makes the restarted
 * child fail its start, which counts as another death.
 */
export async function waitPortFree (host: string, port: number, ms: number): Promise<boolean> {
  const end = Date.now() + ms
  for (;;) {
    if (await portFree(host, port)) return true
    if (Date.now() >= end) return false
    await new Promise((resolve) => setTimeout(resolve, 100))
  }
}
