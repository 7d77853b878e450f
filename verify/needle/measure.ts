// Token positions in a rendered chat prompt. With the deployment's tokenizer they are exact: the
// prompt is encoded once and every token's byte length is added up, so a character offset maps to
// the token that holds it. Without one they are an estimate from a characters-per-token ratio.
import { PdBridgeError } from '../../src/errors.ts'
import { tokenBytes } from '../../src/model/tokenizer/byte-level.ts'
import { renderChat, type Tokenizer } from '../../src/model/tokenizer/index.ts'

/** What measuring needs of a tokenizer. */
export type NeedleTokenizer = Pick<Tokenizer, 'encode' | 'idToToken'>

/** One user message rendered and measured. */
export interface MeasuredPrompt {
  /** Tokens of the whole prompt (chat template and generation prompt included). */
  total: number
  /** The index of the token holding the user content's character `offset`. */
  tokenAt: (offset: number) => number
  /** The prompt's token ids (exact measurement only). */
  tokens: number[] | null
}

/** How prompts are measured: exactly by a tokenizer, or by a characters-per-token estimate. */
export type Measurer =
  | { kind: 'exact', tokenizer: NeedleTokenizer }
  | { kind: 'approximate', charsPerToken: number }

/** Tokens an estimate assumes around the user content: bos and the user tag before, the assistant tag after. */
export const APPROXIMATE_TEMPLATE_TOKENS = { before: 2, after: 1 }

/** The rendered prompt's text before the user content (bos and the user tag). */
const CONTENT_START = renderChat([{ role: 'user', content: '' }], false).length

function exact (tokenizer: NeedleTokenizer, content: string): MeasuredPrompt {
  const text = renderChat([{ role: 'user', content }], true)
  const tokens = tokenizer.encode(text)
  // starts[i]: the byte offset where token i begins; one extra entry for the end.
  const starts = new Array<number>(tokens.length + 1)
  let at = 0
  for (let i = 0; i < tokens.length; i++) {
    starts[i] = at
    const token = tokenizer.idToToken(tokens[i])
    if (token === undefined) throw new PdBridgeError(`needle document: token id ${tokens[i]} at ${i} is not in the tokenizer's vocabulary`)
    at += tokenBytes(token).length
  }
  starts[tokens.length] = at
  const bytes = Buffer.byteLength(text, 'utf8')
  if (at !== bytes) throw new PdBridgeError(`needle document: the tokens spell ${at} bytes but the prompt has ${bytes}; the tokenizer changes the text, so positions cannot be measured`)
  const tokenAt = (offset: number): number => {
    const byte = Buffer.byteLength(text.slice(0, CONTENT_START + offset), 'utf8')
    // The last token starting at or before `byte`.
    let lo = 0
    let hi = tokens.length - 1
    while (lo < hi) {
      const mid = (lo + hi + 1) >> 1
      if (starts[mid] <= byte) lo = mid
      else hi = mid - 1
    }
    return lo
  }
  return { total: tokens.length, tokenAt, tokens }
}

function approximate (charsPerToken: number, content: string): MeasuredPrompt {
  const { before, after } = APPROXIMATE_TEMPLATE_TOKENS
  return {
    total: before + Math.ceil(content.length / charsPerToken) + after,
    tokenAt: (offset) => before + Math.floor(offset / charsPerToken),
    tokens: null,
  }
}

/** Measure the prompt of one user message holding `content`, with a generation prompt. */
export function measurePrompt (measurer: Measurer, content: string): MeasuredPrompt {
  return measurer.kind === 'exact' ? exact(measurer.tokenizer, content) : approximate(measurer.charsPerToken, content)
}
