// The parity corpus: texts whose ids ours must give exactly as the Rust `tokenizers` library does.
// Deterministic (a seeded generator), so the committed inputs can be rebuilt and compared.
import { TEXT_CASES } from '../make-tokenizer-cases.ts'

// mulberry32: a small seeded generator, enough to vary the fuzz texts reproducibly.
function rng (seed: number): () => number {
  let a = seed >>> 0
  return () => {
    a = (a + 0x6d2b79f5) >>> 0
    let t = a
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
}

/** Pieces the fuzz texts are glued from: every class the Split regexes and the byte-level map treat apart. */
const ALPHABET: readonly string[] = [
  'a', 'Z', 'the', ' word', 'É', 'ß', 'ﬁ', 'Ǆ', 'ǅ', 'µ', 'ª', '日', '本', '語', 'の', 'テ', 'ｶ', '가', '中', '龥', '一', '〆', 'ー',
  '0', '7', '42', '٣', '۴', '߀', '²', '½', 'Ⅻ', '①', '𝟘',
  ' ', '  ', '\t', '\n', '\r\n', '\r', '\u000b', '\u000c', '\u0085', '\u00a0', '\u1680', '\u2003', '\u2028', '\u2029', '\u202f', '\u3000', '\ufeff', '\u200b', '\u200d',
  '!', '"', '#', '$', '%', '&', "'", '(', ')', '*', '+', ',', '-', '.', '/', ':', ';', '<', '=', '>', '?', '@', '[', '\\', ']', '^', '_', '`', '{', '|', '}', '~',
  '！', '。', '、', '「', '」', '…', '—', '–', '‘', '’', '“', '”', '€', '£', '¥', '©', '°', '±', '×', '÷', '→', '∑', '√', '∞', '≠',
  '\u0301', '\u0308', '\u093f', '\u0e31', 'e\u0301', 'ह', 'ि', 'ก', 'ע', 'ع',
  '😀', '👍🏽', '❤️', '👨‍👩‍👧‍👦', '🇫🇷', '\u{1F9EA}', '\u{10FFFF}', '\u{E000}', '\u0000', '\u0001', '\u007f', '\ufffd', '\ud800', '\udfff', '\ud83d',
  "'s", "'LL", 'n\'t', '://', '->', '=>', '!=', '...', '```', '\n\n\n', '    ', '\t\t',
]

function fuzzText (next: () => number): string {
  const n = 1 + Math.floor(next() * 24)
  let s = ''
  for (let i = 0; i < n; i++) s += ALPHABET[Math.floor(next() * ALPHABET.length)]
  return s
}

function digitsOfEveryLength (): string[] {
  const out: string[] = []
  for (let n = 1; n <= 40; n++) {
    let d = ''
    for (let i = 0; i < n; i++) d += String((i * 7 + n) % 10)
    out.push(d, `x${d}y`, ` ${d} `, `-${d}.5`)
  }
  return out
}

const CJK: readonly string[] = [
  '日本語のテキストと中文文本', '一二三四五六七八九十', '漢字かなカナ混じり文、句読点。', '中文，标点！还有“引号”。',
  'ひらがなだけ', 'カタカナダケ', 'ｶﾀｶﾅ半角', '한국어와 日本語 mixed with English', '龥龦龧 (past the 一-龥 range)', '〇〆々ゝゞヽヾ',
  '第3章：２０２４年の計画', '价格是123元，折扣45%', '东京タワー333m', 'テスト123テスト',
]

const CODE: readonly string[] = [
  'def f(x):\n    return x**2 + 1  # comment\n',
  'for (let i = 0; i < n; i++) {\n\tsum += a[i];\n}\n',
  'if (a !== b && c >= 10) { console.log(`${a}:${b}`) }',
  '#include <stdio.h>\nint main(void) { printf("%d\\n", 42); return 0; }',
  'SELECT id, name FROM users WHERE age > 30 ORDER BY name;',
  '<div class="x">Hello &amp; bye</div>',
  '{"key": [1, 2, 3], "nested": {"ok": true, "n": null}}',
  'x=1;y=2;z=x+y\n\n\n    indented\n\t\ttabbed',
  'fn main() -> Result<(), Box<dyn Error>> { Ok(()) }',
  'const re = /^(?:[a-z]+|\\d{3,})$/giu',
  '    \n    \n', 'a\r\nb\rc\nd', '$HOME/.config && ~/bin || ./run.sh',
]

const WHITESPACE: readonly string[] = [
  ' ', '  ', ' '.repeat(17), '\t'.repeat(9), '\n'.repeat(12), ' \n \n ', 'a' + ' '.repeat(40) + 'b', 'end' + ' '.repeat(5),
  ' '.repeat(5) + 'start', '\u3000\u3000全角', 'x\u00a0\u00a0y', '\u2028\u2029', ' \t \t\n\r\n  x', '\n \n  \n   \n    ',
]

const INVALID: readonly string[] = [
  'lone \ud800 high', 'lone \udc00 low', 'reversed \udc00\ud800 pair', 'end with high \ud83d', '\udfff at start',
  'replacement \ufffd char', 'noncharacters \uffff \ufffe \u{10FFFF}', 'NUL\u0000inside', 'private \u{E000}\u{F8FF} use',
]

/** Every added token spelled in user text: alone, glued, spaced, doubled, and half-spelled. */
function specialsInText (added: readonly string[]): string[] {
  const out: string[] = []
  for (const t of added) {
    out.push(t, `x${t}y`, ` ${t} `, `${t}${t}`, `\n${t}\n`, `1${t}2`, t.slice(0, -1), t.slice(1), `${t.slice(0, 3)} ${t.slice(3)}`)
  }
  out.push(added.join(''), added.join(' '))
  return out
}

/** The corpus for a tokenizer whose added tokens are `added` (duplicates removed, order kept). */
export function parityCorpus (added: readonly string[], fuzzCount = 300): string[] {
  const next = rng(20261206)
  const fuzz = Array.from({ length: fuzzCount }, () => fuzzText(next))
  const all = [...TEXT_CASES, ...digitsOfEveryLength(), ...CJK, ...CODE, ...WHITESPACE, ...INVALID, ...specialsInText(added), ...fuzz]
  return [...new Set(all)]
}

/** Extra training text for the test vocabularies, so merges exist across digits, CJK and code. */
export const EXTRA_TRAINING = [...CJK, ...CODE, ...digitsOfEveryLength()].join('\n').repeat(3)
