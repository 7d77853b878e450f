// Shared pieces of the stack suites: temp dirs, `pd-bridge` as a child process (one-shot or the
// long-running serve with its JSON ready line), and process liveness.
import { spawn, type ChildProcess } from 'node:child_process'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { isAlive } from '../../src/stack/record.ts'

/** A fresh temporary directory and its remover. */
export function tempDir (prefix: string): { dir: string, remove: () => void } {
  const dir = mkdtempSync(join(tmpdir(), `pd-bridge-${prefix}-`))
  return { dir, remove: () => rmSync(dir, { recursive: true, force: true }) }
}

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
export async function runCli (args: string[], env: NodeJS.ProcessEnv = process.env, timeoutMs = 240_000): Promise<CliRun> {
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

/** Start `pd-bridge serve ...args`; resolves at its ready line, rejects with its output if it exits first. */
export async function startServe (args: string[], env: NodeJS.ProcessEnv = process.env): Promise<ServeChild> {
  const child = spawn(process.execPath, [BIN, 'serve', ...args], { stdio: ['ignore', 'pipe', 'pipe'], env })
  let out = ''
  let err = ''
  child.stderr.on('data', (c: Buffer) => { err += c.toString() })
  const exited = new Promise<[number | null, NodeJS.Signals | null]>((resolve) => child.once('close', (c, s) => resolve([c, s])))
  const ready = await new Promise<Record<string, any>>((resolve, reject) => {
    child.stdout.on('data', (c: Buffer) => {
      out += c.toString()
      const line = out.split('\n').find((l) => l.startsWith('{"event":"ready"'))
      if (line !== undefined) resolve(JSON.parse(line))
    })
    void exited.then(([code]) => reject(new Error(`pd-bridge serve exited with ${code} before it was ready:\n${err}`)))
  })
  return { child, ready, stdout: () => out, stderr: () => err, exited }
}

/** True when `pid` is a live process (zombies count as gone: see isAlive). */
export function alive (pid: number): boolean {
  return isAlive(pid)
}

/** Poll until `check()` is true or `ms` pass; returns whether it became true. */
export async function eventually (check: () => boolean | Promise<boolean>, ms = 15_000): Promise<boolean> {
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
