// Shared pieces of the stack suites: temp dirs, `pd-bridge` as a child process (one-shot or the
// long-running serve with its JSON ready line, launched through StackChild by
// suites/support/launch.ts), and process liveness.
import { spawn, type ChildProcess } from 'node:child_process'
import { isAlive } from '../../src/stack/record.ts'
import { launch } from '../support/launch.ts'
import { HANG_LIMIT_MS } from '../support/hang-limit.ts'
export { tempDir } from '../support/temp-dir.ts'

/** The CLI as `npx pd-bridge` runs it. */
export const BIN = new URL('../../bin/pd-bridge.mjs', import.meta.url).pathname

/** What a finished command printed. */
export interface CliRun {
  code: number | null
  signal: NodeJS.Signals | null
  stdout: string
  stderr: string
}

/** Run `pd-bridge ...args` to the end. */
export async function runCli (args: string[], env: NodeJS.ProcessEnv = process.env, timeoutMs = HANG_LIMIT_MS): Promise<CliRun> {
  const child = spawn(process.execPath, [BIN, ...args], { stdio: ['ignore', 'pipe', 'pipe'], env })
  let stdout = ''
  let stderr = ''
  child.stdout.on('data', (c: Buffer) => { stdout += c.toString() })
  child.stderr.on('data', (c: Buffer) => { stderr += c.toString() })
  const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs)
  const [code, signal] = await new Promise<[number | null, NodeJS.Signals | null]>((resolve) => child.once('close', (c, s) => resolve([c, s])))
  clearTimeout(timer)
  return { code, signal, stdout, stderr }
}

/** A running `pd-bridge serve`. */
export interface ServeChild {
  child: ChildProcess
  ready: Record<string, any>
  stdout: () => string
  stderr: () => string
  /** Resolves with the exit code and signal. */
  exited: Promise<[number | null, NodeJS.Signals | null]>
}

/** Start `pd-bridge serve ...args` (through suites/support/launch.ts); resolves at its ready line, rejects with its output if it exits first. */
export async function startServe (args: string[], env: NodeJS.ProcessEnv = process.env): Promise<ServeChild> {
  const p = await launch(['serve', ...args], { env })
  return { child: p.child, ready: p.ready, stdout: p.stdout, stderr: p.stderr, exited: p.exited.then((e) => [e.code, e.signal]) }
}

/** True when `pid` is a live process (zombies count as gone: see isAlive). */
export function alive (pid: number): boolean {
  return isAlive(pid)
}

/** Poll until `check()` is true or `ms` pass; returns whether it became true. */
export async function eventually (check: () => boolean | Promise<boolean>, ms = HANG_LIMIT_MS): Promise<boolean> {
  const end = Date.now() + ms
  while (Date.now() < end) {
    if (await check()) return true
    await new Promise((r) => setTimeout(r, 100))
  }
  return await check()
}

/** An environment for children with the state directory set and no PD_* leaking in from the shell. */
export function envWith (stateDir: string): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {}
  for (const [k, v] of Object.entries(process.env)) if (!k.startsWith('PD_')) env[k] = v
  env.PD_STATE_DIR = stateDir
  return env
}
