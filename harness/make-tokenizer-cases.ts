// Regenerates harness/tokenizer-cases.json: test strings and the ids our tokenizer gives them, for
// checking against Hugging Face `tokenizers` on the tokenizer.json of `make-checkpoint --preset tiny`.
// Run: npx tsx harness/make-tokenizer-cases.ts
import { writeFileSync } from 'node:fs'
import { fileURLToPath } from 'node:url'
import { presetConfig } from '../src/model/checkpoint/presets.ts'
import { buildTokenizerFiles, renderChat, Tokenizer, type ChatMessage } from '../src/model/tokenizer/index.ts'

/** The strings to encode: ordinary prose, edge cases of the GPT-2 split, unicode, specials. */
export const TEXT_CASES: readonly string[] = [
  '',
  'Hello world',
  'Hello, world! How are you today?',
  'The harbour town woke slowly on winter mornings.',
  "I'm sure it's fine, isn't it? We'll see; they'd know, you've said, I've been.",
  "UPPERCASE CONTRACTIONS: IT'S DON'T WE'LL I'M",
  "'s 's 'S 'll'll '' ' 't",
  'Numbers: 0 1 12 123 1234 12345 3.14159 -42 1e10 1,000,000',
  'Year 2024, room 101, call 555-0199.',
  '   leading spaces',
  'trailing spaces   ',
  'a  b   c    d     e',
  ' ',
  'tabs\tand\t\tmore\ttabs',
  'line one\nline two\n\nline four\n',
  '\r\n windows line endings \r\n',
  '\n\n\n',
  'Mixed   \n  whitespace \t\n end',
  'Punctuation!!! ??? ... --- ((())) [] {} <> @#$%^&*',
  'Email: someone@example.com, url: https://example.org/path?q=1&x=2',
  'code: def f(x):\n    return x**2 + 1  # comment',
  'JSON {"key": [1, 2, 3], "ok": true}',
  'Café naïve résumé façade coöperate',
  'Ελληνικά κείμενο και русский текст',
  '日本語のテキストと中文文本',
  '한국어 텍스트',
  'Emoji: 😀😃😄 👍🏽 ❤️ 👨‍👩‍👧‍👦',
  'Flags 🇫🇷🇯🇵 and math 𝔘𝔫𝔦𝔠𝔬𝔡𝔢 ∑∫√∞ ≠ ≤',
  'Arabic العربية and Hebrew עברית',
  'Devanagari हिन्दी and Thai ภาษาไทย',
  'Superscripts ² ³ ¹ fractions ½ ¾ roman Ⅻ',
  'nbsp\u00a0here and ideographic\u3000space',
  'NEL\u0085line and BOM\ufeffinside \ufeff',
  'line sep\u2028para sep\u2029end',
  'zero width\u200bspace, joiner\u200d and soft\u00adhyphen',
  'control chars \u0001\u0002\u001f\u007f end',
  'A long word: supercalifragilisticexpialidocious antidisestablishmentarianism',
  'Repeated aaaaaaaaaaaaaaaa bbbbbbbb',
  'The the THE tHe',
  '<｜begin▁of▁sentence｜>Hello<｜end▁of▁sentence｜>',
  '<｜User｜>What is 2+2?<｜Assistant｜>4<｜end▁of▁sentence｜>',
  'text<｜User｜>glued<｜Assistant｜>tokens',
  ' <｜User｜> spaces around <｜Assistant｜> ',
  'almost special <｜User> and <User｜> and <|User|> and <｜reserved_0｜>',
  '<｜▁pad▁｜><｜▁pad▁｜>',
  'Fullwidth ｜ bar and ▁ lower block',
]

/** Chat renderings to compare with `apply_chat_template`. */
export const CHAT_CASES: ReadonlyArray<{ messages: ChatMessage[], addGenerationPrompt: boolean }> = [
  { messages: [{ role: 'user', content: 'Hello!' }], addGenerationPrompt: true },
  {
    messages: [
      { role: 'system', content: 'You are terse.' },
      { role: 'user', content: 'What is 2+2?' },
      { role: 'assistant', content: '4' },
      { role: 'user', content: 'And 3+3?' },
    ],
    addGenerationPrompt: true,
  },
  { messages: [{ role: 'user', content: 'No prompt' }, { role: 'assistant', content: 'OK.' }], addGenerationPrompt: false },
]

// Byte token of byte b: the byte tokens follow the five named specials.
const byteId = (b: number) => 5 + b

/** Decodes that exercise invalid UTF-8 and special-token skipping. */
export const DECODE_CASES: ReadonlyArray<{ ids: number[], skipSpecialTokens: boolean }> = [
  { ids: [byteId(0xf0), byteId(0x9f)], skipSpecialTokens: false },
  { ids: [byteId(0x80), byteId(0x41)], skipSpecialTokens: false },
  { ids: [byteId(0xc0), byteId(0xaf)], skipSpecialTokens: false },
  { ids: [byteId(0xef), byteId(0xbb), byteId(0xbf), byteId(0x41)], skipSpecialTokens: false },
  { ids: [0, 2, byteId(0x68), byteId(0x69), 3, 1, 4], skipSpecialTokens: false },
  { ids: [0, 2, byteId(0x68), byteId(0x69), 3, 1, 4], skipSpecialTokens: true },
]

/** The cases file for a tokenizer (deterministic: same tokenizer, same file). */
export function buildCases (tok: Tokenizer, description: string) {
  return {
    description,
    notes: [
      'ids: tokenizer.encode(text, add_special_tokens=False).ids',
      'idsWithSpecialTokens: tokenizer.encode(text).ids (the post-processor prepends bos)',
      'decoded: tokenizer.decode(ids, skip_special_tokens=False)',
      'chat.text: apply_chat_template(messages, tokenize=False, add_generation_prompt=...)',
      'decodes[].text: tokenizer.decode(ids, skip_special_tokens=...)',
    ],
    cases: TEXT_CASES.map((text) => {
      const ids = tok.encode(text)
      return {
        text,
        ids,
        tokens: ids.map((id) => tok.idToToken(id) as string),
        idsWithSpecialTokens: tok.encode(text, { addSpecialTokens: true }),
        decoded: tok.decode(ids),
      }
    }),
    chat: CHAT_CASES.map((c) => {
      const text = renderChat(c.messages, c.addGenerationPrompt)
      return { ...c, text, ids: tok.encode(text) }
    }),
    decodes: DECODE_CASES.map((c) => ({ ...c, text: tok.decode(c.ids, { skipSpecialTokens: c.skipSpecialTokens }) })),
  }
}

/** The tokenizer of the tiny preset, as make-checkpoint writes it. */
export function tinyTokenizer (): Tokenizer {
  const cfg = presetConfig('tiny')
  const files = buildTokenizerFiles(cfg.vocabSize, cfg.maxPositionEmbeddings)
  return Tokenizer.fromJson(JSON.parse(files['tokenizer.json']))
}

/** JSON with two-space indent, but arrays of plain values kept on one line (short diffs, short file). */
export function compactJson (value: unknown, indent = ''): string {
  if (Array.isArray(value)) {
    if (value.every((v) => v === null || typeof v !== 'object')) return JSON.stringify(value)
    const inner = indent + '  '
    return `[\n${value.map((v) => inner + compactJson(v, inner)).join(',\n')}\n${indent}]`
  }
  if (value !== null && typeof value === 'object') {
    const inner = indent + '  '
    const body = Object.entries(value).map(([k, v]) => `${inner}${JSON.stringify(k)}: ${compactJson(v, inner)}`)
    return body.length === 0 ? '{}' : `{\n${body.join(',\n')}\n${indent}}`
  }
  return JSON.stringify(value)
}

/** Path of the committed cases file. */
export const CASES_FILE = fileURLToPath(new URL('./tokenizer-cases.json', import.meta.url))

if (process.argv[1] !== undefined && fileURLToPath(import.meta.url) === process.argv[1]) {
  const cases = buildCases(tinyTokenizer(), 'tokenizer.json of `pd-bridge make-checkpoint --preset tiny` (vocab 512)')
  writeFileSync(CASES_FILE, compactJson(cases) + '\n')
  process.stdout.write(`wrote ${CASES_FILE}: ${cases.cases.length} texts, ${cases.chat.length} chats, ${cases.decodes.length} decodes\n`)
}
