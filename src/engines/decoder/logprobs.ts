// Log-probabilities in OpenAI's response shapes. Chat: `{content: [{token, logprob, bytes,
// top_logprobs: [{token, logprob, bytes}]}], refusal: null}`. Completions: `{tokens,
// token_logprobs, top_logprobs: [{token: logprob}], text_offset}`, where text_offset counts the
// characters of the tokens before (vLLM's way: it equals the offset in the text except after a token
// that ends inside a UTF-8 character). A token's string is the tokenizer's decode of it alone.
import { tokenBytes } from '../../model/tokenizer/byte-level.ts'
import type { Tokenizer } from '../../model/tokenizer/index.ts'
import type { TokenLogprobs } from './generate.ts'
import type { TokenLogprob } from './sampling/index.ts'

/** Formats one choice's entries; keeps the text offset, so streamed pieces continue where the last ended. */
export class LogprobsFormat {
  private offset = 0

  constructor (private readonly tokenizer: Tokenizer) {}

  private text (token: number): string {
    return this.tokenizer.decode([token])
  }

  private bytes (token: number): number[] {
    const piece = this.tokenizer.idToToken(token)
    return piece === undefined ? [] : Array.from(tokenBytes(piece))
  }

  private entry (e: TokenLogprob): { token: string, logprob: number, bytes: number[] } {
    return { token: this.text(e.token), logprob: e.logprob, bytes: this.bytes(e.token) }
  }

  /** Chat's `logprobs` object. */
  chat (entries: readonly TokenLogprobs[]): object {
    return {
      content: entries.map((e) => ({ ...this.entry(e.chosen), top_logprobs: e.top.map((t) => this.entry(t)) })),
      refusal: null,
    }
  }

  /** The completion endpoint's `logprobs` object. */
  completion (entries: readonly TokenLogprobs[]): object {
    const tokens: string[] = []
    const textOffset: number[] = []
    for (const e of entries) {
      const text = this.text(e.chosen.token)
      tokens.push(text)
      textOffset.push(this.offset)
      this.offset += text.length
    }
    return {
      tokens,
      token_logprobs: entries.map((e) => e.chosen.logprob),
      top_logprobs: entries.map((e) => Object.fromEntries(e.top.map((t) => [this.text(t.token), t.logprob]))),
      text_offset: textOffset,
    }
  }

  /** The shape of `endpoint`. */
  format (endpoint: 'chat' | 'completion', entries: readonly TokenLogprobs[]): object {
    return endpoint === 'chat' ? this.chat(entries) : this.completion(entries)
  }
}
