// Shared pieces of the decoder-server suites: temp dirs, the tiny checkpoint, its tokenizer, and
// the decoder as a real child process (`pd-bridge decoder`, launched through StackChild by
// suites/support/launch.ts) with its ready line and log file.
import type { ChildProcess } from 'node:child_process'
import { readFileSync } from 'node:fs'
import { buildTokenizerFiles, Tokenizer } from '../../src/model/tokenizer/index.ts'
import { makeCheckpoint } from '../../src/model/checkpoint/index.ts'
import { jsonLines, launch } from '../support/launch.ts'
export { tempDir } from '../support/temp-dir.ts'

/** The tiny preset's tokenizer (vocab 512), built in memory. */
export function tinyTokenizer (): Tokenizer {
  return Tokenizer.fromJson(JSON.parse(buildTokenizerFiles(512, 32768)['tokenizer.json']))
}

/** Write the tiny checkpoint (seed 1) into `dir`. */
export async function makeTiny (dir: string): Promise<string> {
  await makeCheckpoint({ preset: 'tiny', seed: 1, out: dir })
  return dir
}

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

/** Start the decoder on port 0 and wait for its ready line (through suites/support/launch.ts). */
export async function startDecoderChild (args: string[], logFile: string, env: Record<string, string> = {}): Promise<DecoderChild> {
  const p = await launch(['decoder', '--port', '0', '--log', logFile, ...args], { env: { ...process.env, ...env } })
  return {
    child: p.child,
    url: p.url,
    ready: p.ready,
    logFile,
    output: p.output,
    log: () => jsonLines(readFileSync(logFile, 'utf8')),
    stop: async (signal = 'SIGTERM') => (await p.stop(signal)).code,
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
