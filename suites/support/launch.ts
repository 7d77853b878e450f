// A pd-bridge command as a child process of a test, started through the product's StackChild
// (src/stack/child.ts): the spawn, the ready-line parser (src/stack/ready-line.ts) and the parent
// watch are the embedded stack's own, so a test sees a child start the way `pd-bridge serve` does.
// On top of it the suites get what they assert on: everything the child printed, per stream and
// interleaved, and a stop that sends one signal to the process alone (as `child.kill` does), so a
// test that sends SIGTERM or SIGKILL sees exactly that signal's effect.
import type { ChildProcess } from 'node:child_process'
import { describeExit, StackChild, type ChildExit } from '../../src/stack/child.ts'
import { processTempDir } from './temp-dir.ts'

/**
 * Longer than any hook or test timeout (vitest.config.ts): the test's own timeout bounds the wait
 * for the ready line, as it did before the suites used StackChild.
 */
const READY_TIMEOUT_MS = 600_000

/** How to launch one command. */
export interface LaunchOptions {
  /** The child's whole environment (default this process's). */
  env?: NodeJS.ProcessEnv
  /** Where StackChild writes `<name>.log` (default a folder of this test worker, removed at its exit). */
  logDir?: string
}

/** A launched command that has printed its ready line. */
export interface Launched {
  /** The product's handle (its log, its ready info, its group stop). */
  stack: StackChild
  child: ChildProcess
  url: string
  /** The ready line's fields (a bare-URL ready line gives just `url`). */
  ready: Record<string, unknown>
  stdout: () => string
  stderr: () => string
  /** stdout and stderr as they arrived. */
  output: () => string
  /** Settles once the process has exited and its output is drained. */
  exited: Promise<ChildExit>
  /** Send `signal` to the process (if it still runs) and wait for its exit. */
  stop: (signal?: NodeJS.Signals) => Promise<ChildExit>
}

let launches = 0

/** Start `pd-bridge <args>` and wait for its ready line; a child that exits first rejects with all it printed. */
export async function launch (args: string[], opts: LaunchOptions = {}): Promise<Launched> {
  const name = `${args[0] ?? 'pd-bridge'}-${launches++}`
  const stack = StackChild.spawn({ name, args, logDir: opts.logDir ?? processTempDir('launch-logs'), env: opts.env ?? process.env, readyTimeoutMs: READY_TIMEOUT_MS })
  const child = stack.proc
  let stdout = ''
  let stderr = ''
  let output = ''
  // StackChild set both streams to utf8, so chunks are strings.
  child.stdout?.on('data', (c: string) => { stdout += c; output += c })
  child.stderr?.on('data', (c: string) => { stderr += c; output += c })
  const exited = stack.exited
  void exited.then(() => stack.log.close())
  try {
    await stack.waitReady()
  }
  catch (err) {
    if (stack.exit === undefined) throw err
    throw new Error(`pd-bridge ${args[0]} ${describeExit(stack.exit)} before it was ready:\n${output}`, { cause: err })
  }
  const info = stack.ready!
  return {
    stack,
    child,
    url: info.url,
    ready: { ...info.fields, url: info.url },
    stdout: () => stdout,
    stderr: () => stderr,
    output: () => output,
    exited,
    stop: async (signal = 'SIGTERM') => {
      if (child.exitCode === null && child.signalCode === null) child.kill(signal)
      return await exited
    },
  }
}

/** The JSON lines of `text` (pino records, ready lines), parsed. */
export function jsonLines (text: string): Array<Record<string, any>> {
  return text.split('\n').filter((l) => l.startsWith('{')).map((l) => JSON.parse(l) as Record<string, any>)
}
