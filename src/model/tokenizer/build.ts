// Build the synthetic tokenizer's files (tokenizer.json, tokenizer_config.json,
// special_tokens_map.json) for a given vocabulary size.
import { ConfigError } from '../../errors.ts'
import { BYTE_TO_CHAR } from './byte-level.ts'
import { CHAT_TEMPLATE } from './chat.ts'
import { TRAINING_TEXT } from './corpus.ts'
import { BOS_TOKEN, EOS_TOKEN, NAMED_SPECIAL_TOKENS, PAD_TOKEN, reservedToken } from './specials.ts'
import { structureSections, type TokenizerStructure } from './structure.ts'
import { trainMerges, type Merge } from './train.ts'

/** The smallest vocabulary: the named special tokens plus the 256 byte tokens. */
export const MIN_VOCAB_SIZE = NAMED_SPECIAL_TOKENS.length + 256

/** The three tokenizer files, as JSON text, ready to write. */
export interface TokenizerFiles {
  'tokenizer.json': string
  'tokenizer_config.json': string
  'special_tokens_map.json': string
}

/** How the vocabulary was filled (for docs and tests). */
export interface VocabLayout {
  /** Token strings by id. */
  tokens: string[]
  /** Ids that are special tokens (named ones, then reserved fillers). */
  specialIds: number[]
  /** Ids of the added tokens that are not special (matched verbatim in text, kept when decoding). */
  addedIds: number[]
  merges: Merge[]
}

/**
 * Ids: the named special tokens (0..4), the 256 byte tokens in byte order, one token per learned
 * merge in merge order, then the `added` texts as ordinary (non-special) added tokens, then
 * `<｜reserved_N｜>` special tokens (N from 0) up to `vocabSize`. Merges are learned for the room
 * the added texts leave, so the vocabulary size stays `vocabSize`.
 */
export function vocabLayout (vocabSize: number, added: readonly string[] = [], trainingText: string = TRAINING_TEXT): VocabLayout {
  if (!Number.isInteger(vocabSize) || vocabSize < MIN_VOCAB_SIZE + added.length) {
    throw new ConfigError('vocab_size', `must be an integer >= ${MIN_VOCAB_SIZE + added.length} (5 special + 256 byte tokens + ${added.length} added), got ${vocabSize}`)
  }
  const tokens = [...NAMED_SPECIAL_TOKENS, ...BYTE_TO_CHAR]
  const merges = trainMerges(trainingText, vocabSize - tokens.length - added.length)
  for (const [a, b] of merges) tokens.push(a + b)
  const addedIds: number[] = []
  for (const text of added) {
    if (text === '' || tokens.includes(text) || added.indexOf(text) !== added.lastIndexOf(text)) {
      throw new ConfigError('added tokens', `${JSON.stringify(text)} is empty, repeated or already a token`)
    }
    addedIds.push(tokens.length)
    tokens.push(text)
  }
  const specialIds = NAMED_SPECIAL_TOKENS.map((_, i) => i)
  for (let n = 0; tokens.length < vocabSize; n++) {
    specialIds.push(tokens.length)
    tokens.push(reservedToken(n))
  }
  return { tokens, specialIds, addedIds, merges }
}

function addedToken (id: number, content: string, special: boolean, normalized: boolean) {
  return { id, content, single_word: false, lstrip: false, rstrip: false, normalized, special }
}

function specialTokenEntry (content: string) {
  return { content, lstrip: false, normalized: false, rstrip: false, single_word: false }
}

// JSON.stringify would list integer-like keys ("0".."9", "10", ...) first; write the vocab in id order.
function vocabJson (tokens: string[], indent: string): string {
  const lines = tokens.map((t, id) => `${indent}  ${JSON.stringify(t)}: ${id}`)
  return `{\n${lines.join(',\n')}\n${indent}}`
}

/** The tokenizer.json object (Hugging Face tokenizers format), vocab written separately. */
function tokenizerJson (layout: VocabLayout, structure: TokenizerStructure): string {
  const sections = structureSections(structure)
  const bosPiece = (typeId: number) => ({ SpecialToken: { id: BOS_TOKEN, type_id: typeId } })
  const body = {
    version: '1.0',
    truncation: null,
    padding: null,
    added_tokens: [...layout.specialIds, ...layout.addedIds].sort((a, b) => a - b)
      // DeepSeek's files mark their added tokens normalized (a no-op under its empty normalizer).
      .map((id) => addedToken(id, layout.tokens[id], layout.specialIds.includes(id), structure !== 'gpt2')),
    normalizer: sections.normalizer,
    pre_tokenizer: sections.pre_tokenizer,
    post_processor: {
      type: 'TemplateProcessing',
      single: [bosPiece(0), { Sequence: { id: 'A', type_id: 0 } }],
      pair: [bosPiece(0), { Sequence: { id: 'A', type_id: 0 } }, bosPiece(1), { Sequence: { id: 'B', type_id: 1 } }],
      special_tokens: { [BOS_TOKEN]: { id: BOS_TOKEN, ids: [0], tokens: [BOS_TOKEN] } },
    },
    decoder: sections.decoder,
    model: {
      type: 'BPE',
      dropout: null,
      unk_token: null,
      continuing_subword_prefix: null,
      end_of_word_suffix: null,
      fuse_unk: false,
      byte_fallback: false,
      ignore_merges: false,
      vocab: '@VOCAB@',
      merges: layout.merges,
    },
  }
  // Merges one per line keeps the file readable and diffable. Function replacements, because
  // tokens may hold '$' patterns that a replacement string would interpret.
  const text = JSON.stringify(body, (key, value) => key === 'merges' ? '@MERGES@' : value, 2)
  const merges = layout.merges.map((m) => `      ${JSON.stringify(m)}`).join(',\n')
  return text
    .replace('"@VOCAB@"', () => vocabJson(layout.tokens, '    '))
    .replace('"@MERGES@"', () => layout.merges.length ? `[\n${merges}\n    ]` : '[]') + '\n'
}

/** How a made checkpoint renders chats: make-checkpoint's Jinja template, or DeepSeek-V4's encoding (no template). */
export type CheckpointChatFormat = 'template' | 'deepseek-v4-encoding'

/** The chat formats, by name (for options and errors). */
export const CHECKPOINT_CHAT_FORMATS: readonly CheckpointChatFormat[] = ['template', 'deepseek-v4-encoding']

/**
 * All three files for a vocabulary of `vocabSize` tokens (with `added` ordinary added tokens) and a
 * context of `modelMaxLength`, in the given tokenizer.json structure (the vocabulary and merges do
 * not depend on it), with make-checkpoint's template or none (DeepSeek-V4's encoding).
 */
export function buildTokenizerFiles (
  vocabSize: number, modelMaxLength: number, added: readonly string[] = [],
  options: { structure?: TokenizerStructure, trainingText?: string, chatFormat?: CheckpointChatFormat } = {},
): TokenizerFiles {
  const structure = options.structure ?? 'gpt2'
  const layout = vocabLayout(vocabSize, added, options.trainingText)
  const config = {
    add_bos_token: true,
    add_eos_token: false,
    bos_token: BOS_TOKEN,
    eos_token: EOS_TOKEN,
    pad_token: PAD_TOKEN,
    unk_token: null,
    clean_up_tokenization_spaces: false,
    model_max_length: modelMaxLength,
    tokenizer_class: 'PreTrainedTokenizerFast',
    // A V4 checkpoint as DeepSeek ships it has no template: it renders with DeepSeek's encoding.
    ...(options.chatFormat === 'deepseek-v4-encoding' ? {} : { chat_template: CHAT_TEMPLATE }),
  }
  const map = {
    bos_token: specialTokenEntry(BOS_TOKEN),
    eos_token: specialTokenEntry(EOS_TOKEN),
    pad_token: specialTokenEntry(PAD_TOKEN),
  }
  return {
    'tokenizer.json': tokenizerJson(layout, structure),
    'tokenizer_config.json': JSON.stringify(config, null, 2) + '\n',
    'special_tokens_map.json': JSON.stringify(map, null, 2) + '\n',
  }
}
