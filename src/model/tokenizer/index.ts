// The synthetic DeepSeek-style tokenizer: building its files, and loading/using them.
export { Tokenizer, loadTokenizer, type EncodeOptions, type DecodeOptions } from './tokenizer.ts'
export { buildTokenizerFiles, vocabLayout, MIN_VOCAB_SIZE, type TokenizerFiles, type VocabLayout } from './build.ts'
export { CHAT_TEMPLATE, renderChat, type ChatMessage } from './chat.ts'
export { BOS_TOKEN, EOS_TOKEN, USER_TOKEN, ASSISTANT_TOKEN, PAD_TOKEN, NAMED_SPECIAL_TOKENS, reservedToken } from './specials.ts'
export { trainMerges, MIN_PAIR_COUNT, type Merge } from './train.ts'
export { splitPretokens, GPT2_SPLIT } from './pretokenize.ts'
export { BYTE_TO_CHAR, CHAR_TO_BYTE, toByteLevel } from './byte-level.ts'
