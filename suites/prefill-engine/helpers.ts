// Shared pieces of the prefill-engine suites: the tiny checkpoint (made once per worker), temporary
// directories, and a real `pd-bridge prefill-engine` child process with its ready line and logs.
import { spawn, type ChildProcess } from 'node:child_process'
import { existsSync, mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { exportWeights } from '../../src/capture/index.ts'
import { makeCheckpoint } from '../../src/model/checkpoint/index.ts'

/** A fresh temporary directory and its remover. */
export function tempDir (prefix: string): { dir: string, remove: () => void } {
  const dir = mkdtempSync(join(tmpdir(), `pd-bridge-${prefix}-`))
  return { dir, remove: () => rmSync(dir, { recursive: true, force: true }) }
}

let tiny: Promise<string> | undefined

/** The tiny preset, seed 1, written once per test worker into a temporary directory. */
export function tinyCheckpoint (): Promise<string> {
  tiny ??= (async () => {
    const dir = join(mkdtempSync(join(tmpdir(), 'pd-bridge-prefill-tiny-')), 'tiny')
    await makeCheckpoint({ preset: 'tiny', seed: 1, out: dir })
    process.once('exit', () => rmSync(join(dir, '..'), { recursive: true, force: true }))
    return dir
  })()
  return tiny
}

let sidecar: Promise<{ dir: string, fingerprint: string }> | undefined

/** The decoder's sidecar of the tiny checkpoint (profile `decoder`), exported once per test worker. */
export function tinySidecar (): Promise<{ dir: string, fingerprint: string }> {
  sidecar ??= (async () => {
    const model = await tinyCheckpoint()
    const dir = join(model, '..', 'sidecar')
    const s = await exportWeights({ model, profile: 'decoder', out: dir })
    return { dir, fingerprint: s.fingerprint }
  })()
  return sidecar
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

/** Start `pd-bridge prefill-engine` with `args` and wait for its ready line. */
export async function startEngine (args: string[], env: Record<string, string> = {}): Promise<EngineProcess> {
  const child = spawn(process.execPath, [BIN, 'prefill-engine', ...args], { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, ...env } })
  let stdout = ''
  let stderr = ''
  child.stderr?.on('data', (c: Buffer) => { stderr += c.toString() })
  const exited = new Promise<{ code: number | null, signal: NodeJS.Signals | null }>((resolve) => {
    child.once('exit', (code, signal) => resolve({ code, signal }))
  })
  const ready = await new Promise<Record<string, unknown>>((resolve, reject) => {
    child.stdout?.on('data', (c: Buffer) => {
      stdout += c.toString()
      const nl = stdout.indexOf('\n')
      if (nl >= 0) resolve(JSON.parse(stdout.slice(0, nl)) as Record<string, unknown>)
    })
    void exited.then(({ code }) => reject(new Error(`prefill-engine exited (${code}) before it was ready:\n${stderr}`)))
  })
  return {
    child,
    url: ready.url as string,
    ready,
    stderr: () => stderr,
    events: () => stderr.split('\n').filter((l) => l.startsWith('{')).map((l) => JSON.parse(l) as Record<string, unknown>),
    exited,
  }
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
