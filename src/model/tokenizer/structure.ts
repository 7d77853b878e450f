// The two tokenizer.json structures make-checkpoint can write around the same vocabulary: GPT-2's
// (ByteLevel with its regex; every committed fixture was made with it) and DeepSeek's published
// one (V3, V3.2 and the V4 family): an empty normalizer Sequence, three Split pre-tokenizers
// (numbers of 1-3 digits, CJK runs, a general pattern) and ByteLevel without its regex. The
// regexes are DeepSeek's, as their tokenizer.json spells them (llama.cpp's deepseek-v3 pre-type
// carries the same three).

/** Which structure to write. */
export type TokenizerStructure = 'gpt2' | 'deepseek-v3'

/** The structures, by name (for options and errors). */
export const TOKENIZER_STRUCTURES: readonly TokenizerStructure[] = ['gpt2', 'deepseek-v3']

/** DeepSeek's three Split patterns, in order. */
export const DEEPSEEK_SPLITS: readonly string[] = [
  '\\p{N}{1,3}',
  '[一-龥぀-ゟ゠-ヿ]+',
  "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+| ?[\\p{P}\\p{S}]+[\r\n]*|\\s*[\r\n]+|\\s+(?!\\S)|\\s+",
]

/** The normalizer, pre_tokenizer and decoder sections of a structure. */
export function structureSections (structure: TokenizerStructure): Record<'normalizer' | 'pre_tokenizer' | 'decoder', unknown> {
  const decoder = { type: 'ByteLevel', add_prefix_space: true, trim_offsets: true, use_regex: true }
  if (structure === 'gpt2') {
    return { normalizer: null, pre_tokenizer: { type: 'ByteLevel', add_prefix_space: false, trim_offsets: true, use_regex: true }, decoder }
  }
  return {
    normalizer: { type: 'Sequence', normalizers: [] },
    pre_tokenizer: {
      type: 'Sequence',
      pretokenizers: [
        ...DEEPSEEK_SPLITS.map((Regex) => ({ type: 'Split', pattern: { Regex }, behavior: 'Isolated', invert: false })),
        { type: 'ByteLevel', add_prefix_space: false, trim_offsets: true, use_regex: false },
      ],
    },
    decoder,
  }
}
