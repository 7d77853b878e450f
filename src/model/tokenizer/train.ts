// A small deterministic byte-level BPE trainer: the merges of the synthetic tokenizer.
import { splitPretokens } from './pretokenize.ts'
import { BYTE_TO_CHAR, toByteLevel } from './byte-level.ts'

/** A merge: two adjacent symbols that become one. */
export type Merge = readonly [string, string]

/** The fewest occurrences a pair needs before it is merged. */
export const MIN_PAIR_COUNT = 2

/**
 * Learn up to `maxMerges` merges from `text`. Rules, in order:
 * 1. Pre-tokenize with the GPT-2 split and map to byte-level strings; count each distinct word.
 * 2. Each step counts adjacent symbol pairs over all words (weighted by word count) and picks
 *    the highest count; ties go to the smallest pair, comparing the left symbol and then the
 *    right one by UTF-16 code units (all byte-level characters are in the BMP, so this is
 *    code point order).
 * 3. A pair whose concatenation is already a symbol is skipped (so every merge makes a new
 *    token and no two merges produce the same string), as is any pair seen fewer than
 *    MIN_PAIR_COUNT times.
 * 4. The chosen pair is merged in every word, left to right, without overlaps.
 * Stops when `maxMerges` are learned or no pair qualifies.
 */
export function trainMerges (text: string, maxMerges: number): Merge[] {
  const wordCounts = new Map<string, number>()
  for (const piece of splitPretokens(text)) {
    const word = toByteLevel(piece)
    wordCounts.set(word, (wordCounts.get(word) ?? 0) + 1)
  }
  const words: string[][] = []
  const counts: number[] = []
  for (const [word, count] of wordCounts) {
    words.push(Array.from(word))
    counts.push(count)
  }
  const known = new Set<string>(BYTE_TO_CHAR)
  const merges: Merge[] = []
  while (merges.length < maxMerges) {
    const best = bestPair(words, counts, known)
    if (best === undefined) break
    const [left, right] = best
    const joined = left + right
    for (const symbols of words) mergeInPlace(symbols, left, right, joined)
    known.add(joined)
    merges.push([left, right])
  }
  return merges
}

// Pair keys join the two symbols with a plain space: byte-level symbols never contain one.
function bestPair (words: string[][], counts: number[], known: Set<string>): [string, string] | undefined {
  const pairCounts = new Map<string, number>()
  for (let w = 0; w < words.length; w++) {
    const symbols = words[w]
    for (let i = 0; i + 1 < symbols.length; i++) {
      const key = symbols[i] + ' ' + symbols[i + 1]
      pairCounts.set(key, (pairCounts.get(key) ?? 0) + counts[w])
    }
  }
  let best: [string, string] | undefined
  let bestCount = 0
  for (const [key, count] of pairCounts) {
    if (count < MIN_PAIR_COUNT || count < bestCount) continue
    const space = key.indexOf(' ')
    const left = key.slice(0, space)
    const right = key.slice(space + 1)
    if (known.has(left + right)) continue
    if (best === undefined || count > bestCount || left < best[0] || (left === best[0] && right < best[1])) {
      best = [left, right]
      bestCount = count
    }
  }
  return best
}

function mergeInPlace (symbols: string[], left: string, right: string, joined: string): void {
  let out = 0
  for (let i = 0; i < symbols.length; i++) {
    if (i + 1 < symbols.length && symbols[i] === left && symbols[i + 1] === right) {
      symbols[out++] = joined
      i++
    }
    else symbols[out++] = symbols[i]
  }
  symbols.length = out
}
