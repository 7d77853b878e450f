// Tokenizers for the needle suites: the tiny preset's, and the same with the needle phrases as
// added tokens (how the needle preset's tokenizer is built).
import { buildTokenizerFiles, Tokenizer } from '../../src/model/tokenizer/index.ts'
import { needleVocabulary } from '../../src/model/checkpoint/needle/words.ts'

let tiny: Tokenizer | undefined
let needle: Tokenizer | undefined

/** The tiny preset's tokenizer (vocab 512). */
export function tinyTokenizer (): Tokenizer {
  tiny ??= Tokenizer.fromJson(JSON.parse(buildTokenizerFiles(512, 32768)['tokenizer.json']))
  return tiny
}

/** Vocab 512 with every needle string as one added token. */
export function needleTokenizer (): Tokenizer {
  needle ??= Tokenizer.fromJson(JSON.parse(buildTokenizerFiles(512, 32768, needleVocabulary())['tokenizer.json']))
  return needle
}
