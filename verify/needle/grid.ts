// The depth x length grid of a needle invocation. Every cell (and every repeat of it) gets its own
// document seed, derived from the invocation's seed by hashing, so one invocation never reuses a
// document and two invocations with the same --seed make the same documents. The seed decides the
// needles too: distinct keys, distinct random values, random depths for the distractors, and which
// needle the question asks for (that one sits at the cell's depth).
import { createHash, randomBytes } from 'node:crypto'
import { ConfigError } from '../../src/errors.ts'
import { streamFor, type Xoshiro128 } from '../../src/model/checkpoint/index.ts'
import type { NeedleSpec } from './document.ts'
import { NEEDLE_KEYS, NEEDLE_VALUES } from '../../src/model/checkpoint/needle/words.ts'

/** Default document lengths: below and past the tiny/needle presets' original window of 1024. */
export const DEFAULT_LENGTHS: readonly number[] = Object.freeze([512, 2048, 4096, 8192])

/** Default depths of the asked needle. */
export const DEFAULT_DEPTHS: readonly number[] = Object.freeze([0, 0.25, 0.5, 0.75, 1])

/** The most needles a document can hold: one per key. */
export const MAX_NEEDLES = NEEDLE_KEYS.length

/** What the grid is made of. */
export interface GridOptions {
  lengths?: readonly number[]
  depths?: readonly number[]
  /** Needles per document, 1..MAX_NEEDLES (default 1). */
  needles?: number
  /** Runs per cell (default 1), each with its own seed. */
  repeats?: number
  /** The invocation's seed: every document seed is derived from it. */
  seed: number
}

/** One run of the grid: a cell, a repeat, its document seed and its needles. */
export interface GridRun {
  /** 0-based, in run order (lengths outer, depths inner, repeats innermost). */
  index: number
  targetTokens: number
  /** The asked needle's depth. */
  depth: number
  repeat: number
  seed: number
  needles: NeedleSpec[]
  /** The key the question asks for. */
  ask: number
}

/** A fresh invocation seed (48 bits) from the system's random source. */
export function freshInvocationSeed (): number {
  return randomBytes(6).readUIntLE(0, 6)
}

/** The document seed of one run: 48 bits of SHA-256 over the invocation seed and the run's place. */
export function runSeed (invocationSeed: number, targetTokens: number, depth: number, repeat: number): number {
  const digest = createHash('sha256').update(`pd-bridge/needle-grid/v1\0${invocationSeed}\0${targetTokens}\0${depth}\0${repeat}`).digest()
  return digest.readUIntLE(0, 6)
}

function shuffled<T> (rng: Xoshiro128, list: readonly T[]): T[] {
  const out = [...list]
  for (let i = out.length - 1; i > 0; i--) {
    const j = rng.nextInt(i + 1)
    const t = out[i]
    out[i] = out[j]
    out[j] = t
  }
  return out
}

/**
 * The needles of a document of `seed`: `count` distinct keys with distinct values; the asked one
 * (chosen at random) at `depth`, the others at random depths in [0, 1] (two decimals).
 */
export function planNeedles (seed: number, count: number, depth: number): { needles: NeedleSpec[], ask: number } {
  if (!Number.isInteger(count) || count < 1 || count > MAX_NEEDLES) throw new ConfigError('needles', `must be an integer 1..${MAX_NEEDLES} (one per key), got ${String(count)}`)
  if (!(depth >= 0 && depth <= 1)) throw new ConfigError('depth', `must be in [0, 1], got ${String(depth)}`)
  const rng = streamFor(seed, 'needle-plan')
  const keys = shuffled(rng, NEEDLE_KEYS.map((_, k) => k)).slice(0, count)
  const values = shuffled(rng, NEEDLE_VALUES).slice(0, count)
  const asked = rng.nextInt(count)
  const needles = keys.map((key, i) => ({ key, value: values[i], depth: i === asked ? depth : Math.round(rng.nextUniform() * 100) / 100 }))
  return { needles, ask: keys[asked] }
}

function checkList (name: string, list: readonly number[], ok: (x: number) => boolean, what: string): void {
  if (list.length === 0) throw new ConfigError(name, 'must not be empty')
  for (const x of list) if (!ok(x)) throw new ConfigError(name, `${what}, got ${String(x)}`)
  if (new Set(list).size !== list.length) throw new ConfigError(name, `lists a value twice: ${list.join(', ')}`)
}

/** Every run of the grid, in order. */
export function needleGrid (options: GridOptions): GridRun[] {
  const lengths = options.lengths ?? DEFAULT_LENGTHS
  const depths = options.depths ?? DEFAULT_DEPTHS
  const repeats = options.repeats ?? 1
  const count = options.needles ?? 1
  checkList('lengths', lengths, (x) => Number.isSafeInteger(x) && x > 0, 'must be positive integers')
  checkList('depths', depths, (x) => x >= 0 && x <= 1, 'must be numbers in [0, 1]')
  if (!Number.isSafeInteger(repeats) || repeats < 1) throw new ConfigError('repeats', `must be a positive integer, got ${String(repeats)}`)
  if (!Number.isSafeInteger(options.seed) || options.seed < 0) throw new ConfigError('seed', `must be a non-negative integer, got ${String(options.seed)}`)
  const runs: GridRun[] = []
  for (const targetTokens of lengths) {
    for (const depth of depths) {
      for (let repeat = 0; repeat < repeats; repeat++) {
        const seed = runSeed(options.seed, targetTokens, depth, repeat)
        runs.push({ index: runs.length, targetTokens, depth, repeat, seed, ...planNeedles(seed, count, depth) })
      }
    }
  }
  return runs
}
