// The llama.cpp decoder's prefix cache on disk: one sequence-state file per block boundary, named by
// the block-key chain of the tokens before it (the same SHA-256 chain oMLX keys its blocks by, so a
// prompt finds its longest stored prefix the same way). Each file is the whole state at its
// boundary (llama.cpp restores a sequence from one file), written atomically, checked against the
// context's geometry and the prompt's own tokens before llama.cpp sees it. With a block key, each
// file also has its keyed digest beside it (state-auth.ts), written with it and checked before use.
import type { KeyObject } from 'node:crypto'
import { mkdirSync, readdirSync, readFileSync, renameSync, rmSync, statSync, writeFileSync } from 'node:fs'
import { basename, join } from 'node:path'
import { blockKeyHex, computeBlockHash } from '../../../decode/store/block-key.ts'
import { PdBridgeError } from '../../../errors.ts'
import { LlamaCppStateError } from '../state/errors.ts'
import type { LlamaCppState } from '../state/format.ts'
import type { LlamaCppStateGeometry } from '../state/geometry.ts'
import { checkLlamaCppState } from '../state/guard.ts'
import { parseLlamaCppState } from '../state/reader.ts'
import { serializeLlamaCppState } from '../state/writer.ts'
import { authenticateState, macPath, stateMac, writeStateMac } from './state-auth.ts'

/** A state file's name: `<block key hex>.llstate`. */
export const STATE_SUFFIX = '.llstate'

/** Where refused files go (kept for a look, never listed again). */
export const QUARANTINE_DIR = 'quarantine'

/** What a lookup found: the longest stored boundary of the prompt, checked. */
export interface StateHit {
  /** Tokens the state holds (a multiple of the block size); 0 on a miss. */
  cachedTokens: number
  /** The checked state file, or null on a miss. */
  path: string | null
  /** Why the hit is shorter than the prompt's full blocks, or why there is none. */
  reason?: string
}

/** Options of `LlamaCppStateStore.open`. */
export interface StateStoreOptions {
  dir: string
  /** Hashed into every key, as the block store does. */
  modelName: string
  blockSize: number
  /** The decoder context's geometry: a state of any other is refused. */
  geometry: LlamaCppStateGeometry
  /** Told about every refused file (it is then treated as absent). */
  onRefused?: (file: string, why: string) => void
  /**
   * The deployment's block key (src/config/block-key.ts): every state written gets its keyed digest,
   * and a state without the right one is refused and quarantined like a foreign one. Absent: not authenticated.
   */
  authKey?: KeyObject
}

/** Counters since open, for /health. */
export interface StateStoreStats {
  lookups: number
  hits: number
  refused: number
  written: number
  writeFailures: number
}

export class LlamaCppStateStore {
  readonly stats: StateStoreStats = { lookups: 0, hits: 0, refused: 0, written: 0, writeFailures: 0 }
  private files = new Map<string, number>()

  private constructor (readonly options: StateStoreOptions) {}

  static open (options: StateStoreOptions): LlamaCppStateStore {
    if (!Number.isSafeInteger(options.blockSize) || options.blockSize < 1) throw new PdBridgeError(`state store: block size must be a positive integer, got ${options.blockSize}`)
    mkdirSync(options.dir, { recursive: true })
    const store = new LlamaCppStateStore(options)
    store.rescan()
    return store
  }

  get dir (): string { return this.options.dir }
  /** Whether states are authenticated (a block key is set). */
  get authenticated (): boolean { return this.options.authKey !== undefined }
  get blockSize (): number { return this.options.blockSize }
  get size (): number { return this.files.size }
  get totalBytes (): number {
    let n = 0
    for (const b of this.files.values()) n += b
    return n
  }

  /** The chain keys (hex) of every full block of `tokens`, in order. */
  keysOf (tokens: ArrayLike<number>): string[] {
    const bs = this.options.blockSize
    const keys: string[] = []
    let parent: Uint8Array | null = null
    for (let b = 0; (b + 1) * bs <= tokens.length; b++) {
      const block = Array.prototype.slice.call(tokens, b * bs, (b + 1) * bs) as number[]
      parent = computeBlockHash(parent, block, undefined, this.options.modelName)
      keys.push(blockKeyHex(parent))
    }
    return keys
  }

  /** The file of the boundary after `blocks` full blocks whose last key is `key`. */
  pathOf (key: string): string {
    return join(this.options.dir, key + STATE_SUFFIX)
  }

  /** Whether a state for the boundary after tokens[0, n) (n a multiple of the block size) is stored. */
  has (prefix: ArrayLike<number>): boolean {
    const keys = this.keysOf(prefix)
    return keys.length > 0 && keys.length * this.blockSize === prefix.length && this.files.has(keys[keys.length - 1])
  }

  /** Full blocks of `tokens` up to the longest boundary with a state file (present, not yet read or checked). */
  storedBlocks (tokens: ArrayLike<number>): number {
    const keys = this.keysOf(tokens)
    for (let b = keys.length; b >= 1; b--) if (this.files.has(keys[b - 1])) return b
    return 0
  }

  /**
   * The longest stored boundary of `tokens`, checked (geometry, and that it holds exactly those
   * tokens). `exactPromptRule` (default on) leaves out a boundary at the prompt's very end, so the
   * decoder has a token to evaluate for the first logits. A refused file is counted and skipped.
   */
  lookup (tokens: readonly number[], exactPromptRule = true): StateHit {
    this.stats.lookups++
    const keys = this.keysOf(tokens)
    let usable = keys.length
    let reason: string | undefined
    if (exactPromptRule && usable * this.blockSize === tokens.length && usable > 0) {
      usable--
      reason = 'the block ending at the prompt\'s last token is left out (a token must be evaluated for the first logits)'
    }
    for (let b = usable; b >= 1; b--) {
      const key = keys[b - 1]
      if (!this.files.has(key)) continue
      const path = this.pathOf(key)
      const n = b * this.blockSize
      try {
        this.verify(new Uint8Array(readFileSync(path)), tokens.slice(0, n), path)
      } catch (e) {
        const why = e instanceof Error ? e.message : String(e)
        this.stats.refused++
        this.files.delete(key)
        this.quarantine(path)
        this.options.onRefused?.(path, why)
        reason = `a stored state was refused: ${why}`
        continue
      }
      this.stats.hits++
      return { cachedTokens: n, path, reason: b < keys.length ? reason ?? `blocks ${b + 1}..${keys.length} are not stored` : reason }
    }
    return { cachedTokens: 0, path: null, reason: reason ?? (keys.length === 0 ? 'the prompt is shorter than one block' : 'no stored state for this prompt\'s first block') }
  }

  /** Throw unless `bytes` are a state of this geometry holding exactly `tokens`. */
  check (bytes: Uint8Array, tokens: readonly number[], file?: string): LlamaCppState {
    const state = parseLlamaCppState(bytes, file)
    checkLlamaCppState(state, this.options.geometry, file)
    if (state.tokens.length !== tokens.length || state.tokens.some((t, i) => t !== tokens[i])) {
      const at = state.tokens.findIndex((t, i) => t !== tokens[i])
      throw new LlamaCppStateError('tokens', `the state holds ${state.tokens.length} tokens${at >= 0 ? ` differing at position ${at}` : ''}, its key says the ${tokens.length} of this prompt`, file)
    }
    return state
  }

  /**
   * `check`, and first, with a block key, that the keyed digest beside `path` is the HMAC of `bytes`
   * (state-auth.ts): what every state read from the store passes before it is used or kept.
   */
  verify (bytes: Uint8Array, tokens: readonly number[], path: string): LlamaCppState {
    const authKey = this.options.authKey
    if (authKey !== undefined) authenticateState(authKey, this.keysOf(tokens).at(-1) ?? '', bytes, path)
    return this.check(bytes, tokens, path)
  }

  /**
   * Store the state after `prefix` (a whole number of blocks) under its chain key, atomically; a
   * state (or its bytes, as llama.cpp saved them) is checked first. With a block key its keyed
   * digest is written first, so a reader never finds the new state without it. Returns the file's size.
   */
  put (prefix: readonly number[], state: LlamaCppState | Uint8Array): { path: string, bytes: number } {
    const keys = this.keysOf(prefix)
    if (keys.length === 0 || keys.length * this.blockSize !== prefix.length) {
      throw new PdBridgeError(`state store: a state is stored at a block boundary; ${prefix.length} tokens is not a multiple of ${this.blockSize}`)
    }
    const bytes = state instanceof Uint8Array ? state : serializeLlamaCppState(state)
    const path = this.pathOf(keys[keys.length - 1])
    try {
      this.check(bytes, prefix, path)
    } catch (e) {
      this.stats.writeFailures++
      throw e
    }
    const tmp = `${path}.tmp-${process.pid}`
    try {
      if (this.options.authKey !== undefined) writeStateMac(path, stateMac(this.options.authKey, keys[keys.length - 1], bytes))
      writeFileSync(tmp, bytes, { flush: true })
      renameSync(tmp, path)
    } catch (e) {
      // A full disk leaves half a temporary file: remove it, or rescan would skip it forever.
      rmSync(tmp, { force: true })
      this.stats.writeFailures++
      throw e
    }
    this.files.set(keys[keys.length - 1], bytes.length)
    this.stats.written++
    return { path, bytes: bytes.length }
  }

  /**
   * Move a refused file (and its keyed digest, if any) out of the way (into `quarantine/`), so a
   * rescan does not list it again and it is kept for a look; best-effort: a file that cannot be
   * moved is only forgotten until rescan.
   */
  private quarantine (path: string): void {
    const stamp = Date.now()
    try {
      mkdirSync(join(this.options.dir, QUARANTINE_DIR), { recursive: true })
      renameSync(path, join(this.options.dir, QUARANTINE_DIR, `${basename(path)}.${stamp}`))
    } catch {}
    try {
      renameSync(macPath(path), join(this.options.dir, QUARANTINE_DIR, `${basename(macPath(path))}.${stamp}`))
    } catch {}
  }

  /**
   * Re-read the directory (a writer outside this process may have added files). Temporary files
   * are skipped, never removed: another process (the front's writer) may be writing one right now.
   */
  rescan (): { files: number, bytes: number, partial: number } {
    const files = new Map<string, number>()
    let partial = 0
    for (const name of readdirSync(this.options.dir)) {
      const path = join(this.options.dir, name)
      if (name.includes(`${STATE_SUFFIX}.tmp-`)) {
        partial++
        continue
      }
      if (!name.endsWith(STATE_SUFFIX)) continue
      const key = name.slice(0, -STATE_SUFFIX.length)
      if (!/^[0-9a-f]{64}$/.test(key)) continue
      // A file removed between readdir and stat (another process evicting) is simply not there.
      const size = (() => { try { return statSync(path).size } catch { return undefined } })()
      if (size !== undefined) files.set(key, size)
    }
    this.files = files
    return { files: files.size, bytes: this.totalBytes, partial }
  }
}
