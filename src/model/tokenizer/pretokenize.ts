// GPT-2's pre-tokenizer split, written so JavaScript's regex engine matches exactly what
// Oniguruma (the engine Hugging Face tokenizers uses) matches.

// Oniguruma's Unicode \s is TAB..CR, U+0085 and the Zs/Zl/Zp categories. JavaScript's \s differs
// (it adds U+FEFF and lacks U+0085), so spell the class out instead of writing \s.
const WS = '\\t\\n\\v\\f\\r\\x85\\p{Zs}\\p{Zl}\\p{Zp}'

/** GPT-2's split pattern (`'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+`). */
export const GPT2_SPLIT = new RegExp(
  `'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^${WS}\\p{L}\\p{N}]+|[${WS}]+(?![^${WS}])|[${WS}]+`,
  'gu',
)

/**
 * Split text into pre-tokens: every match of the pattern is a piece, and so is any gap between
 * matches (tokenizers' "Isolated" behaviour; with this pattern there are none in practice).
 */
export function splitPretokens (text: string): string[] {
  const pieces: string[] = []
  let last = 0
  for (const m of text.matchAll(GPT2_SPLIT)) {
    const start = m.index ?? 0
    if (start > last) pieces.push(text.slice(last, start))
    pieces.push(m[0])
    last = start + m[0].length
  }
  if (last < text.length) pieces.push(text.slice(last))
  return pieces
}
