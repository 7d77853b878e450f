// Shared pieces of the decoder-server suites: temp dirs, the tiny checkpoint, its tokenizer, and
// the decoder as a real child process (`pd-bridge decoder`) with its ready line and log file.
import { spawn, type ChildProcess } from 'node:child_process'
import { once } from 'node:events'
import { mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { buildTokenizerFiles, Tokenizer } from '../../src/model/tokenizer/index.ts'
import { makeCheckpoint } from '../../src/model/checkpoint/index.ts'

/** A fresh temporary directory and its remover. */
export function tempDir (prefix: string): { dir: string, remove: () => void } {
  const dir = mkdtempSync(join(tmpdir(), `pd-bridge-${prefix}-`))
  return { dir, remove: () => rmSync(dir, { recursive: true, force: true }) }
}

/** The tiny preset's tokenizer (vocab 512), built in memory. */
export function tinyTokenizer (): Tokenizer {
  return Tokenizer.fromJson(JSON.parse(buildTokenizerFiles(512, 32768)['tokenizer.json']))
}

/** Write the tiny checkpoint (seed 1) into `dir`. */
export async function makeTiny (dir: string): Promise<string> {
  await makeCheckpoint({ preset: 'tiny', seed: 1, out: dir })
  return dir
}

const bin = new URL('../../bin/pd-bridge.mjs', import.meta.url).pathname

/** A running `pd-bridge decoder`. */
export interface DecoderChild {
  child: ChildProcess
  url: string
  ready: Record<string, unknown>
  logFile: string
  /** stdout and stderr so far. */
  output: () => string
  /** Parsed JSON log lines so far. */
  log: () => Array<Record<string, unknown>>
  /** Send a signal and wait for the exit code. */
  stop: (signal?: NodeJS.Signals) => Promise<number | null>
}

/** Start the decoder on port 0 and wait for its ready line. */
export async function startDecoderChild (args: string[], logFile: string, env: Record<string, string> = {}): Promise<DecoderChild> {
  const child = spawn(process.execPath, [bin, 'decoder', '--port', '0', '--log', logFile, ...args], { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, ...env } })
  let out = ''
  child.stdout.on('data', (c: Buffer) => { out += c.toString() })
  child.stderr.on('data', (c: Buffer) => { out += c.toString() })
  const ready = await new Promise<Record<string, unknown>>((resolve, reject) => {
    const look = (): void => {
      const line = out.split('\n').find((l) => l.startsWith('{"event":"ready"'))
      if (line !== undefined) resolve(JSON.parse(line) as Record<string, unknown>)
    }
    child.stdout.on('data', look)
    child.once('exit', (code) => reject(new Error(`pd-bridge decoder exited with ${code} before it was ready:\n${out}`)))
  })
  const exited = once(child, 'exit') as Promise<[number | null]>
  return {
    child,
    url: ready.url as string,
    ready,
    logFile,
    output: () => out,
    log: () => readFileSync(logFile, 'utf8').split('\n').filter((l) => l.startsWith('{')).map((l) => JSON.parse(l) as Record<string, unknown>),
    stop: async (signal = 'SIGTERM') => {
      if (child.exitCode === null && child.signalCode === null) child.kill(signal)
      const [code] = await exited
      return code
    },
  }
}

/**
 * Poll `check` until it returns a value (not undefined). No deadline of its own: how long the
 * server takes depends on the machine, so only the test's timeout bounds the wait.
 */
export async function waitFor<T> (check: () => Promise<T | undefined>): Promise<T> {
  for (;;) {
    const v = await check()
    if (v !== undefined) return v
    await new Promise((r) => setTimeout(r, 50))
  }
}

/** The greedy continuation, cut after the first end-of-sentence token (as the server stops there). */
export function cutAtEos (ids: number[], eos: number | number[] | null): number[] {
  const stops = eos === null ? [] : Array.isArray(eos) ? eos : [eos]
  const at = ids.findIndex((id) => stops.includes(id))
  return at < 0 ? ids : ids.slice(0, at + 1)
}
