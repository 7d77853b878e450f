// A prompt into the cleared sequence: restore the longest stored boundary (checked again on the
// bytes llama.cpp will read), evaluate block by block to each further boundary, saving the state
// there, then the rest for the last logits.
import { rmSync } from 'node:fs'
import { setImmediate as nextTurn } from 'node:timers/promises'
import type { LlamaCppSampleOptions, LlamaCppSession } from '../runner.ts'
import type { ServedStateStore } from './served-store.ts'

/** What the prefill did. */
export interface PrefillResult {
  /** Tokens restored from a state file. */
  cachedTokens: number
  /** Logits after the prompt's last token (empty when llama.cpp sampled); null when cancelled. */
  logits: Float32Array | null
  /** With `sample`: the first completion token, llama.cpp's pick. */
  token?: number
  storedBlocks: number
  reusedBlocks: number
  failedBlocks: number
}

/** Empty the sequence and restore the longest usable stored boundary of `tokens`; returns the tokens restored. */
export async function restore (session: LlamaCppSession, store: ServedStateStore | undefined, tokens: number[]): Promise<number> {
  await session.clear()
  if (store === undefined) return 0
  const hit = store.store.lookup(tokens)
  if (hit.path === null) return 0
  const prefix = tokens.slice(0, hit.cachedTokens)
  const path = hit.path
  let copy: string | undefined
  try {
    // The file may have changed since the lookup read it: llama.cpp reads a private copy of the
    // bytes verified now (keyed digest, geometry, tokens), checked again as it loads them.
    copy = store.verifiedCopy(path, prefix)
    await session.loadState(copy, (bytes) => { store.store.check(bytes, prefix, path) })
  } catch (e) {
    store.restoreFailed(path, e instanceof Error ? e.message : String(e))
    await session.clear()
    return 0
  } finally {
    if (copy !== undefined) rmSync(copy, { force: true })
  }
  return session.tokenCount === hit.cachedTokens ? hit.cachedTokens : await restoreMismatch(session, store, path, hit.cachedTokens)
}

async function restoreMismatch (session: LlamaCppSession, store: ServedStateStore, path: string, expected: number): Promise<number> {
  store.restoreFailed(path, `llama.cpp restored ${session.tokenCount} tokens, the file's key says ${expected}`)
  await session.clear()
  return 0
}

/** Evaluate tokens[from, end) after a restore of `from` tokens, saving each block boundary on the way. */
export async function prefillFrom (session: LlamaCppSession, store: ServedStateStore | undefined, tokens: number[], from: number, blockSize: number, signal: AbortSignal,
  sample?: LlamaCppSampleOptions): Promise<PrefillResult> {
  const result: PrefillResult = { cachedTokens: from, logits: null, storedBlocks: 0, reusedBlocks: 0, failedBlocks: 0 }
  let at = from
  while (at < tokens.length) {
    // With a store, stop at the next boundary; without one, the rest in one call (llama.cpp batches it).
    const next = store === undefined ? tokens.length : Math.min(tokens.length, (Math.floor(at / blockSize) + 1) * blockSize)
    // llama.cpp's sampler (when asked) picks only after the prompt's last token.
    const { logits, token } = await session.evaluate(tokens.slice(at, next), 1, next === tokens.length ? sample : undefined)
    at = next
    if (store !== undefined && at % blockSize === 0) {
      const saved = await store.save(session, tokens.slice(0, at))
      if (saved === 'written') result.storedBlocks++
      else if (saved === 'reused') result.reusedBlocks++
      else result.failedBlocks++
    }
    if (at === tokens.length) {
      result.logits = logits
      if (token !== undefined) result.token = token
    }
    else {
      await nextTurn()
      if (signal.aborted) return result
    }
  }
  return result
}
