// Shared pieces of the prefill-engine suites: the tiny checkpoint and its sidecar (the run's shared
// ones), temporary directories, and a real `pd-bridge prefill-engine` child process (launched
// through StackChild by suites/support/launch.ts) with its ready line and logs.
import type { ChildProcess } from 'node:child_process'
import { existsSync } from 'node:fs'
import { providedSidecar, tinyCheckpoint as sharedTinyCheckpoint } from '../support/checkpoints.ts'
import { jsonLines, launch } from '../support/launch.ts'
export { tempDir } from '../support/temp-dir.ts'

/** The tiny preset, seed 1: the run's shared checkpoint (suites/support/checkpoints.ts). */
export async function tinyCheckpoint (): Promise<string> {
  return sharedTinyCheckpoint()
}

/** The decoder's sidecar of the tiny checkpoint (profile `decoder`, default block size): the run's shared one. */
export async function tinySidecar (): Promise<{ dir: string, fingerprint: string }> {
  const { dir, sidecar } = await providedSidecar('tinyDecoderSidecar')
  return { dir, fingerprint: sidecar.fingerprint }
}

/** True if a path exists. */
export function exists (path: string): boolean {
  return existsSync(path)
}

/** Sleep. */
export function sleep (msec: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, msec))
}

/** The CLI entry. */
export const BIN = new URL('../../bin/pd-bridge.mjs', import.meta.url).pathname

/** A running engine child process. */
export interface EngineProcess {
  child: ChildProcess
  url: string
  ready: Record<string, unknown>
  /** Everything written to stderr so far. */
  stderr: () => string
  /** Parsed JSON log lines from stderr so far. */
  events: () => Array<Record<string, unknown>>
  /** Resolves with the exit code (or the signal) once the process ends. */
  exited: Promise<{ code: number | null, signal: NodeJS.Signals | null }>
}

/** Start `pd-bridge prefill-engine` with `args` and wait for its ready line (through suites/support/launch.ts). */
export async function startEngine (args: string[], env: Record<string, string> = {}): Promise<EngineProcess> {
  const p = await launch(['prefill-engine', ...args], { env: { ...process.env, ...env } })
  return { child: p.child, url: p.url, ready: p.ready, stderr: p.stderr, events: () => jsonLines(p.stderr()), exited: p.exited }
}

/** JSON request helper: status, headers and parsed body. */
export async function call (url: string, init: RequestInit = {}): Promise<{ status: number, headers: Headers, body: any }> {
  const res = await fetch(url, init)
  const text = await res.text()
  return { status: res.status, headers: res.headers, body: text === '' ? undefined : JSON.parse(text) }
}

/** POST a JSON body to /v1/prefill. */
export function submit (base: string, body: unknown): Promise<{ status: number, headers: Headers, body: any }> {
  return call(`${base}/v1/prefill`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) })
}

/**
 * Poll /v1/prefill/{id} until its state is settled (or one of `until`, or `until` says so); returns
 * the last status.
 */
export async function pollUntil (base: string, id: string, until: string[] | ((status: any) => boolean) = ['done', 'partial', 'failed'], timeoutMs = 60_000): Promise<any> {
  const deadline = Date.now() + timeoutMs
  const reached = typeof until === 'function' ? until : (status: any) => until.includes(status.state)
  for (;;) {
    const r = await call(`${base}/v1/prefill/${id}`)
    if (r.status !== 200) throw new Error(`status poll of ${id}: HTTP ${r.status} ${JSON.stringify(r.body)}`)
    if (reached(r.body)) return r.body
    if (Date.now() > deadline) throw new Error(`status poll of ${id}: still ${r.body.state} after ${timeoutMs} ms`)
    await sleep(50)
  }
}
