// A byte-level BPE tokenizer that reads Hugging Face tokenizer.json files of the family DeepSeek's
// checkpoints and make-checkpoint's belong to, and encodes/decodes exactly as the `tokenizers`
// library does (docs/tokenizer.md says what is read and how parity is proven).
import { readFile } from 'node:fs/promises'
import { join } from 'node:path'
import { ConfigError, PdBridgeError } from '../../errors.ts'
import { AddedMatcher, type AddedToken, type Segment } from './added-tokens.ts'
import { CHAT_TEMPLATE } from './chat.ts'
import { ChatFormat, loadChatFormat, type ChatRenderer, type ChatRenderOptions, type ChatTurn } from './chat-format.ts'
import { loadEncodingFormat } from './encoding-format.ts'
import { BOS_TOKEN, EOS_TOKEN, PAD_TOKEN } from './specials.ts'
import { tokenBytes, toByteLevel } from './byte-level.ts'
import { digestOf } from './digest.ts'
import { parseNormalizer, type Normalize } from './normalizer.ts'
import { parsePostProcessor, type Template } from './post-processor.ts'
import { parsePreTokenizer, type PreTokenize } from './pre-tokenizer.ts'

/** Options for Tokenizer.encode. */
export interface EncodeOptions {
  /** Apply the post-processor template (our files: prepend bos), like `add_special_tokens=True`. Default false. */
  addSpecialTokens?: boolean
}

/** Options for Tokenizer.decode. */
export interface DecodeOptions {
  /** Drop special tokens before decoding, like `skip_special_tokens=True`. Default false. */
  skipSpecialTokens?: boolean
}

type Json = Record<string, unknown>

// With the u flag, only an unpaired surrogate is a code point of category Cs.
const LONE_SURROGATE = /\p{Cs}/gu

function isObject (v: unknown): v is Json {
  return typeof v === 'object' && v !== null && !Array.isArray(v)
}

/** A loaded tokenizer. Build it with Tokenizer.fromJson or loadTokenizer. */
export class Tokenizer {
  /** sha256 of the tokenizer.json text it was read from: two ends that tokenize alike show the same digest. */
  readonly digest: string
  /**
   * The checkpoint's chat format: tokenizer_config.json's template; without one, DeepSeek-V4's encoding
   * for a V4 checkpoint (config.json); else make-checkpoint's CHAT_TEMPLATE.
   */
  chat: ChatRenderer | undefined
  private readonly vocab: Map<string, number>
  private readonly tokensById: string[]
  private readonly ranks: Map<string, number>
  private readonly special: Set<number>
  // What decode writes for an added token, and which ids skip_special_tokens drops (see below).
  private readonly decodedAs: Map<number, string>
  private readonly skipped: Set<number>
  private readonly addedById: Map<number, string>
  private readonly rawAdded: AddedMatcher
  private readonly normalizedAdded: AddedMatcher
  private readonly normalize: Normalize | undefined
  private readonly preTokenize: PreTokenize
  private readonly byteFallback: boolean
  private readonly ignoreMerges: boolean
  private readonly template: Template
  private readonly cache = new Map<string, number[]>()

  private constructor (parts: {
    digest: string, tokensById: string[], vocab: Map<string, number>, ranks: Map<string, number>,
    added: AddedToken[], normalize: Normalize | undefined, preTokenize: PreTokenize,
    byteFallback: boolean, ignoreMerges: boolean, template: Template,
  }) {
    this.digest = parts.digest
    this.tokensById = parts.tokensById
    this.vocab = parts.vocab
    this.ranks = parts.ranks
    this.normalize = parts.normalize
    this.preTokenize = parts.preTokenize
    this.byteFallback = parts.byteFallback
    this.ignoreMerges = parts.ignoreMerges
    this.template = parts.template
    this.special = new Set(parts.added.filter((a) => a.special).map((a) => a.id))
    this.addedById = new Map(parts.added.map((a) => [a.id, a.content]))
    // Without a normalizer both groups see the same text, but the raw group still goes first.
    this.rawAdded = new AddedMatcher(parts.added.filter((a) => !a.normalized))
    // A normalized token is looked for in normalized text by its own normalized content.
    const norm = parts.normalize ?? ((t: string) => t)
    this.normalizedAdded = new AddedMatcher(parts.added.filter((a) => a.normalized).map((a) => ({ ...a, content: norm(a.content) })))
    // The Rust library also decodes a normalized token as its normalized content, and skips a
    // special one only when that content is still a special token's (measured: flags fixture).
    this.decodedAs = new Map(parts.added.map((a) => [a.id, a.normalized ? norm(a.content) : a.content]))
    const specialContents = new Set(parts.added.filter((a) => a.special).map((a) => a.content))
    this.skipped = new Set(parts.added.filter((a) => a.special && specialContents.has(this.decodedAs.get(a.id) as string)).map((a) => a.id))
  }

  /**
   * Build from a parsed tokenizer.json. Accepts: model BPE (merges as pairs or "a b" strings,
   * byte_fallback, ignore_merges; no unk token, no dropout), the normalizers of normalizer.ts,
   * the pre-tokenizers of pre-tokenizer.ts, a ByteLevel decoder, added tokens with any flags,
   * and a TemplateProcessing/ByteLevel/Sequence post-processor or none.
   */
  static fromJson (json: unknown, file = 'tokenizer.json', digest = digestOf(JSON.stringify(json))): Tokenizer {
    if (!isObject(json)) throw new ConfigError('(root)', 'must be a JSON object', file)
    const model = json.model
    if (!isObject(model) || model.type !== 'BPE') throw new ConfigError('model.type', 'must be "BPE"', file)
    if (model.dropout != null) throw new ConfigError('model.dropout', 'dropout is not supported', file)
    if (model.unk_token != null) throw new ConfigError('model.unk_token', 'an unknown token is not supported (byte-level vocabularies need none)', file)
    if (model.continuing_subword_prefix != null || model.end_of_word_suffix != null) {
      throw new ConfigError('model', 'subword prefixes/suffixes are not supported', file)
    }
    const decoder = json.decoder
    if (!isObject(decoder) || decoder.type !== 'ByteLevel') throw new ConfigError('decoder', 'must be ByteLevel', file)

    if (!isObject(model.vocab)) throw new ConfigError('model.vocab', 'must be an object of token -> id', file)
    const vocab = new Map<string, number>()
    const tokensById: string[] = []
    for (const [token, id] of Object.entries(model.vocab)) {
      if (!Number.isInteger(id) || (id as number) < 0) throw new ConfigError(`model.vocab[${JSON.stringify(token)}]`, 'id must be a non-negative integer', file)
      vocab.set(token, id as number)
      tokensById[id as number] = token
    }

    const added: AddedToken[] = []
    const addedJson = json.added_tokens ?? []
    if (!Array.isArray(addedJson)) throw new ConfigError('added_tokens', 'must be an array', file)
    for (const [i, a] of addedJson.entries()) {
      if (!isObject(a) || typeof a.content !== 'string' || a.content === '' || !Number.isInteger(a.id)) {
        throw new ConfigError(`added_tokens[${i}]`, 'needs a non-empty content and an integer id', file)
      }
      added.push({
        id: a.id as number, content: a.content, special: a.special === true,
        // tokenizers' default for a missing flag: normalized unless special.
        normalized: typeof a.normalized === 'boolean' ? a.normalized : a.special !== true,
        lstrip: a.lstrip === true, rstrip: a.rstrip === true, singleWord: a.single_word === true,
      })
      tokensById[a.id as number] = a.content
    }
    for (let id = 0; id < tokensById.length; id++) {
      if (tokensById[id] === undefined) throw new ConfigError('model.vocab', `no token has id ${id}`, file)
    }

    if (!Array.isArray(model.merges)) throw new ConfigError('model.merges', 'must be an array', file)
    const ranks = new Map<string, number>()
    for (const [rank, m] of model.merges.entries()) {
      const pair = typeof m === 'string' ? m.split(' ') : m
      if (!Array.isArray(pair) || pair.length !== 2 || typeof pair[0] !== 'string' || typeof pair[1] !== 'string') {
        throw new ConfigError(`model.merges[${rank}]`, 'must be a pair of tokens', file)
      }
      for (const part of [pair[0], pair[1], pair[0] + pair[1]]) {
        if (!vocab.has(part)) throw new ConfigError(`model.merges[${rank}]`, `token ${JSON.stringify(part)} is not in the vocab`, file)
      }
      const key = pair[0] + ' ' + pair[1]
      // tokenizers keeps one rank per pair; a repeated pair takes its later position.
      ranks.set(key, rank)
    }

    return new Tokenizer({
      digest, tokensById, vocab, ranks, added,
      normalize: parseNormalizer(json.normalizer, file),
      preTokenize: parsePreTokenizer(json.pre_tokenizer, file),
      byteFallback: model.byte_fallback === true,
      ignoreMerges: model.ignore_merges === true,
      template: parsePostProcessor(json.post_processor, added, file),
    })
  }

  /** The chat format prompts are rendered with. */
  get chatFormat (): ChatRenderer {
    return this.chat ?? builtinChat()
  }

  /** Digest of everything that turns a request into ids: tokenizer.json and the chat format. */
  get promptDigest (): string {
    return digestOf(`${this.digest}:${this.chatFormat.digest}`)
  }

  /** The ids of a chat prompt: rendered by the chat format (generation prompt on), encoded without adding specials. */
  encodeChat (messages: readonly ChatTurn[], options: ChatRenderOptions = {}): number[] {
    return this.encode(this.chatFormat.render(messages, options))
  }

  /** Number of ids (the highest id + 1). */
  get vocabSize (): number {
    return this.tokensById.length
  }

  /** The token string of an id (added tokens included). */
  idToToken (id: number): string | undefined {
    return this.tokensById[id]
  }

  /** The id of a token string, if it is in the vocabulary or an added token. */
  tokenToId (token: string): number | undefined {
    return this.vocab.get(token) ?? this.findAdded(token)
  }

  /** Whether an id is a special token (dropped by skipSpecialTokens). */
  isSpecial (id: number): boolean {
    return this.special.has(id)
  }

  /**
   * Encode text: added tokens found first (see added-tokens.ts), the rest normalized,
   * pre-tokenized, mapped to byte-level characters and merged by BPE. Lone surrogates become
   * U+FFFD first, as UTF-8 encoding does (the Rust library cannot take them at all).
   */
  encode (text: string, options: EncodeOptions = {}): number[] {
    const ids: number[] = []
    for (const raw of this.rawAdded.split(text.replace(LONE_SURROGATE, '\ufffd'))) {
      if ('id' in raw) {
        ids.push(raw.id)
        continue
      }
      const normalized = this.normalize === undefined ? raw.text : this.normalize(raw.text)
      for (const seg of this.normalizedAdded.split(normalized)) this.encodeSegment(seg, ids)
    }
    if (!options.addSpecialTokens) return ids
    return this.template.flatMap((piece) => piece === 'A' ? ids : [piece.id])
  }

  /** Decode ids back to text (invalid UTF-8 becomes U+FFFD, as in tokenizers). Unknown ids throw. */
  decode (ids: readonly number[], options: DecodeOptions = {}): string {
    const chunks: Uint8Array[] = []
    let length = 0
    for (const id of ids) {
      const token = this.decodedAs.get(id) ?? this.tokensById[id]
      if (token === undefined) throw new PdBridgeError(`tokenizer: id ${id} is not in the vocabulary (0..${this.vocabSize - 1})`)
      if (options.skipSpecialTokens && this.skipped.has(id)) continue
      const bytes = tokenBytes(token)
      chunks.push(bytes)
      length += bytes.length
    }
    const all = new Uint8Array(length)
    let at = 0
    for (const c of chunks) {
      all.set(c, at)
      at += c.length
    }
    // ignoreBOM keeps a leading U+FEFF, which Rust's from_utf8_lossy keeps too.
    return new TextDecoder('utf-8', { fatal: false, ignoreBOM: true }).decode(all)
  }

  private findAdded (token: string): number | undefined {
    for (const [id, content] of this.addedById) if (content === token) return id
    return undefined
  }

  private encodeSegment (seg: Segment, ids: number[]): void {
    if ('id' in seg) {
      ids.push(seg.id)
      return
    }
    for (const piece of this.preTokenize(seg.text)) {
      const word = toByteLevel(piece)
      let wordIds = this.cache.get(word)
      if (wordIds === undefined) {
        wordIds = this.ignoreMerges && this.vocab.has(word) ? [this.vocab.get(word) as number] : this.bpe(word)
        if (this.cache.size < 100_000) this.cache.set(word, wordIds)
      }
      for (const id of wordIds) ids.push(id)
    }
  }

  // Merge the lowest-ranked adjacent pair, leftmost first, until none is in the merge table.
  // This is the order tokenizers' priority queue produces when each merge result is unique.
  private bpe (word: string): number[] {
    const symbols = Array.from(word)
    for (;;) {
      let bestRank = Infinity
      let bestAt = -1
      for (let i = 0; i + 1 < symbols.length; i++) {
        const rank = this.ranks.get(symbols[i] + ' ' + symbols[i + 1])
        if (rank !== undefined && rank < bestRank) {
          bestRank = rank
          bestAt = i
        }
      }
      if (bestAt < 0) break
      symbols.splice(bestAt, 2, symbols[bestAt] + symbols[bestAt + 1])
    }
    return symbols.flatMap((s) => {
      const id = this.vocab.get(s)
      if (id !== undefined) return [id]
      // byte_fallback: a symbol the vocabulary lacks becomes its UTF-8 bytes as <0xHH> tokens.
      const bytes = this.byteFallback ? [...new TextEncoder().encode(s)].map((b) => this.vocab.get(`<0x${b.toString(16).toUpperCase().padStart(2, '0')}>`)) : []
      if (bytes.length === 0 || bytes.some((b) => b === undefined)) throw new PdBridgeError(`tokenizer: symbol ${JSON.stringify(s)} is not in the vocabulary`)
      return bytes as number[]
    })
  }
}

/** Load `<dir>/tokenizer.json` with the checkpoint's chat format (see Tokenizer.chat). */
export async function loadTokenizer (dir: string): Promise<Tokenizer> {
  const file = join(dir, 'tokenizer.json')
  let text: string
  try {
    text = await readFile(file, 'utf8')
  }
  catch (err) {
    throw new ConfigError('tokenizer.json', `cannot read: ${(err as Error).message}`, file)
  }
  let json: unknown
  try {
    json = JSON.parse(text)
  }
  catch (err) {
    throw new ConfigError('(root)', `not valid JSON: ${(err as Error).message}`, file)
  }
  const tokenizer = Tokenizer.fromJson(json, file, digestOf(text))
  tokenizer.chat = await loadChatFormat(dir) ?? await loadEncodingFormat(dir)
  return tokenizer
}

let builtin: ChatFormat | undefined
// make-checkpoint's template, for a tokenizer without a tokenizer_config.json beside it.
function builtinChat (): ChatFormat {
  builtin ??= new ChatFormat(CHAT_TEMPLATE, { bos_token: BOS_TOKEN, eos_token: EOS_TOKEN, pad_token: PAD_TOKEN })
  return builtin
}
