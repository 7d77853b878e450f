// Added tokens are found in the text before anything else, as tokenizers' AddedVocabulary does:
// first those with normalized=false on the raw text, then those with normalized=true on the
// normalized rest; leftmost-longest; single_word needs non-word characters around the match;
// lstrip/rstrip swallow the whitespace before/after it.

/** One added token, as tokenizer.json's added_tokens lists it. */
export interface AddedToken {
  id: number
  content: string
  special: boolean
  normalized: boolean
  lstrip: boolean
  rstrip: boolean
  singleWord: boolean
}

/** A piece of text: either an added token's id, or ordinary text for the model. */
export type Segment = { id: number } | { text: string }

// Rust's char::is_whitespace and char::is_alphanumeric (plus '_'), which tokenizers uses here.
const WHITESPACE = /^\p{White_Space}$/u
const WORD = /^[\p{Alphabetic}\p{N}_]$/u

function charBefore (text: string, at: number): string {
  if (at === 0) return ''
  const c = text.codePointAt(at - 1) as number
  return c >= 0xdc00 && c <= 0xdfff && at >= 2 ? String.fromCodePoint(text.codePointAt(at - 2) as number) : String.fromCodePoint(c)
}

/** Matches one group of added tokens (all normalized or all not) in a piece of text. */
export class AddedMatcher {
  // By first UTF-16 unit, longest first: leftmost-longest, as the aho-corasick automaton finds.
  private readonly byFirstUnit = new Map<string, AddedToken[]>()

  constructor (tokens: readonly AddedToken[]) {
    for (const t of [...tokens].sort((a, b) => b.content.length - a.content.length)) {
      const list = this.byFirstUnit.get(t.content[0]) ?? []
      list.push(t)
      this.byFirstUnit.set(t.content[0], list)
    }
  }

  /** Split text into added-token ids and the text between them (empty text dropped). */
  split (text: string): Segment[] {
    if (this.byFirstUnit.size === 0) return text === '' ? [] : [{ text }]
    const out: Segment[] = []
    let last = 0
    for (let i = 0; i < text.length;) {
      const hit = this.matchAt(text, i)
      if (hit === undefined) {
        i++
        continue
      }
      // A single_word token inside a word is no match, and the automaton goes on after it.
      if (hit.singleWord && !this.standsAlone(text, i, hit.content.length)) {
        i += hit.content.length
        continue
      }
      let start = i
      let stop = i + hit.content.length
      if (hit.lstrip) while (start > last && WHITESPACE.test(charBefore(text, start))) start -= charBefore(text, start).length
      if (hit.rstrip) {
        while (stop < text.length) {
          const c = String.fromCodePoint(text.codePointAt(stop) as number)
          if (!WHITESPACE.test(c)) break
          stop += c.length
        }
      }
      if (start > last) out.push({ text: text.slice(last, start) })
      out.push({ id: hit.id })
      last = stop
      i = stop
    }
    if (last < text.length) out.push({ text: text.slice(last) })
    return out
  }

  private matchAt (text: string, at: number): AddedToken | undefined {
    return this.byFirstUnit.get(text[at])?.find((t) => text.startsWith(t.content, at))
  }

  private standsAlone (text: string, at: number, length: number): boolean {
    const before = charBefore(text, at)
    const after = at + length < text.length ? String.fromCodePoint(text.codePointAt(at + length) as number) : ''
    return !(before !== '' && WORD.test(before)) && !(after !== '' && WORD.test(after))
  }
}
