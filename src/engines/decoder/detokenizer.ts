// Turning generated token ids into text one token at a time, so that the pieces a stream sends
// concatenate to exactly the text a non-streaming answer gives: tokenizer.decode of all the ids.
import type { Tokenizer } from '../../model/tokenizer/index.ts'

const REPLACEMENT = '\uFFFD'

/**
 * Incremental, special-token-skipping decoder. A byte-level token can end inside a multi-byte
 * UTF-8 character, which decodes to a trailing U+FFFD until the next token completes it; so text
 * ending in U+FFFD is held back until a later token or finish(). Decoding restarts after the last
 * point where all text was final (a clean character boundary), so each step decodes only the tail.
 */
export class IncrementalDetokenizer {
  private readonly ids: number[] = []
  /** ids[0, settled) decode to settledText and end on a character boundary. */
  private settled = 0
  private settledText = ''
  /** Characters of the text already handed out. */
  private sent = 0

  constructor (private readonly tokenizer: Tokenizer) {}

  /** Add one generated id; returns the text that became final (possibly ''). */
  push (id: number): string {
    this.ids.push(id)
    const tail = this.tokenizer.decode(this.ids.slice(this.settled), { skipSpecialTokens: true })
    let stable = tail
    while (stable.endsWith(REPLACEMENT)) stable = stable.slice(0, -1)
    const final = this.settledText + stable
    if (stable.length === tail.length) {
      this.settledText = final
      this.settled = this.ids.length
    }
    return this.take(final)
  }

  /** The rest of the text, replacement characters included; call once, after the last push. */
  finish (): string {
    const tail = this.tokenizer.decode(this.ids.slice(this.settled), { skipSpecialTokens: true })
    return this.take(this.settledText + tail)
  }

  /** Every id pushed so far. */
  get tokenIds (): readonly number[] {
    return this.ids
  }

  private take (text: string): string {
    const piece = text.slice(this.sent)
    this.sent = text.length
    return piece
  }
}
