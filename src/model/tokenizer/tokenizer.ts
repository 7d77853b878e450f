// A byte-level BPE tokenizer that reads Hugging Face tokenizer.json files of the kind
// make-checkpoint writes, and encodes/decodes exactly as the `tokenizers` library does.
import { readFile } from 'node:fs/promises'
import { join } from 'node:path'
import { ConfigError, PdBridgeError } from '../../errors.ts'
import { tokenBytes, toByteLevel } from './byte-level.ts'
import { splitPretokens } from './pretokenize.ts'

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

function isObject (v: unknown): v is Json {
  return typeof v === 'object' && v !== null && !Array.isArray(v)
}

/** A loaded tokenizer. Build it with Tokenizer.fromJson or loadTokenizer. */
export class Tokenizer {
  private readonly vocab: Map<string, number>
  private readonly tokensById: string[]
  private readonly ranks: Map<string, number>
  private readonly special: Set<number>
  // Added tokens by first UTF-16 unit, longest first: leftmost-longest matching, as tokenizers does.
  private readonly addedByFirstUnit: Map<string, Array<{ content: string, id: number }>>
  private readonly addPrefixSpace: boolean
  private readonly template: Array<{ id: number } | 'A'>
  private readonly cache = new Map<string, number[]>()

  private constructor (parts: {
    tokensById: string[], vocab: Map<string, number>, ranks: Map<string, number>,
    added: Array<{ content: string, id: number, special: boolean }>, addPrefixSpace: boolean,
    template: Array<{ id: number } | 'A'>,
  }) {
    this.tokensById = parts.tokensById
    this.vocab = parts.vocab
    this.ranks = parts.ranks
    this.addPrefixSpace = parts.addPrefixSpace
    this.template = parts.template
    this.special = new Set(parts.added.filter((a) => a.special).map((a) => a.id))
    this.addedByFirstUnit = new Map()
    for (const a of [...parts.added].sort((x, y) => y.content.length - x.content.length)) {
      const list = this.addedByFirstUnit.get(a.content[0]) ?? []
      list.push({ content: a.content, id: a.id })
      this.addedByFirstUnit.set(a.content[0], list)
    }
  }

  /**
   * Build from a parsed tokenizer.json. Accepts: model BPE (merges as pairs or "a b" strings,
   * no unk token, no dropout), no normalizer, ByteLevel pre-tokenizer with the GPT-2 regex,
   * ByteLevel decoder, and a TemplateProcessing post-processor (single sequence) or none.
   */
  static fromJson (json: unknown, file = 'tokenizer.json'): Tokenizer {
    if (!isObject(json)) throw new ConfigError('(root)', 'must be a JSON object', file)
    const model = json.model
    if (!isObject(model) || model.type !== 'BPE') throw new ConfigError('model.type', 'must be "BPE"', file)
    if (model.dropout != null) throw new ConfigError('model.dropout', 'dropout is not supported', file)
    if (model.continuing_subword_prefix != null || model.end_of_word_suffix != null) {
      throw new ConfigError('model', 'subword prefixes/suffixes are not supported', file)
    }
    if (model.byte_fallback === true || model.ignore_merges === true) {
      throw new ConfigError('model', 'byte_fallback and ignore_merges are not supported', file)
    }
    if (json.normalizer != null) throw new ConfigError('normalizer', 'must be null', file)
    const pre = json.pre_tokenizer
    if (!isObject(pre) || pre.type !== 'ByteLevel' || pre.use_regex === false) {
      throw new ConfigError('pre_tokenizer', 'must be ByteLevel with use_regex', file)
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

    const added: Array<{ content: string, id: number, special: boolean }> = []
    const addedJson = json.added_tokens ?? []
    if (!Array.isArray(addedJson)) throw new ConfigError('added_tokens', 'must be an array', file)
    for (const [i, a] of addedJson.entries()) {
      if (!isObject(a) || typeof a.content !== 'string' || a.content === '' || !Number.isInteger(a.id)) {
        throw new ConfigError(`added_tokens[${i}]`, 'needs a non-empty content and an integer id', file)
      }
      if (a.single_word === true || a.lstrip === true || a.rstrip === true || a.normalized === true) {
        throw new ConfigError(`added_tokens[${i}]`, 'single_word/lstrip/rstrip/normalized added tokens are not supported', file)
      }
      added.push({ content: a.content, id: a.id as number, special: a.special === true })
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
      tokensById, vocab, ranks, added,
      addPrefixSpace: pre.add_prefix_space === true,
      template: parseTemplate(json.post_processor, added, file),
    })
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

  /** Encode text: added tokens matched verbatim first, then GPT-2 split, byte-level map and BPE. */
  encode (text: string, options: EncodeOptions = {}): number[] {
    const ids: number[] = []
    let segmentStart = 0
    for (let i = 0; i < text.length;) {
      const hit = this.matchAddedAt(text, i)
      if (hit === undefined) {
        i++
        continue
      }
      this.encodeOrdinary(text.slice(segmentStart, i), ids)
      ids.push(hit.id)
      i += hit.content.length
      segmentStart = i
    }
    this.encodeOrdinary(text.slice(segmentStart), ids)
    if (!options.addSpecialTokens) return ids
    return this.template.flatMap((piece) => piece === 'A' ? ids : [piece.id])
  }

  /** Decode ids back to text (invalid UTF-8 becomes U+FFFD, as in tokenizers). Unknown ids throw. */
  decode (ids: readonly number[], options: DecodeOptions = {}): string {
    const chunks: Uint8Array[] = []
    let length = 0
    for (const id of ids) {
      const token = this.tokensById[id]
      if (token === undefined) throw new PdBridgeError(`tokenizer: id ${id} is not in the vocabulary (0..${this.vocabSize - 1})`)
      if (options.skipSpecialTokens && this.special.has(id)) continue
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
    return this.addedByFirstUnit.get(token[0])?.find((a) => a.content === token)?.id
  }

  private matchAddedAt (text: string, at: number): { content: string, id: number } | undefined {
    const candidates = this.addedByFirstUnit.get(text[at])
    return candidates?.find((a) => text.startsWith(a.content, at))
  }

  private encodeOrdinary (segment: string, ids: number[]): void {
    if (segment === '') return
    const text = this.addPrefixSpace && !segment.startsWith(' ') ? ' ' + segment : segment
    for (const piece of splitPretokens(text)) {
      const word = toByteLevel(piece)
      let wordIds = this.cache.get(word)
      if (wordIds === undefined) {
        wordIds = this.bpe(word)
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
    return symbols.map((s) => {
      const id = this.vocab.get(s)
      if (id === undefined) throw new PdBridgeError(`tokenizer: symbol ${JSON.stringify(s)} is not in the vocabulary`)
      return id
    })
  }
}

function parseTemplate (
  post: unknown, added: Array<{ content: string, id: number }>, file: string,
): Array<{ id: number } | 'A'> {
  if (post == null) return ['A']
  if (!isObject(post) || post.type !== 'TemplateProcessing' || !Array.isArray(post.single)) {
    throw new ConfigError('post_processor', 'must be null or TemplateProcessing', file)
  }
  const specials = isObject(post.special_tokens) ? post.special_tokens : {}
  return post.single.flatMap((piece: unknown, i: number): Array<{ id: number } | 'A'> => {
    if (isObject(piece) && isObject(piece.Sequence) && piece.Sequence.id === 'A') return ['A']
    if (isObject(piece) && isObject(piece.SpecialToken) && typeof piece.SpecialToken.id === 'string') {
      const entry = specials[piece.SpecialToken.id]
      if (isObject(entry) && Array.isArray(entry.ids) && entry.ids.every((x) => Number.isInteger(x))) {
        return (entry.ids as number[]).map((id) => ({ id }))
      }
      const a = added.find((t) => t.content === (piece.SpecialToken as Json).id)
      if (a) return [{ id: a.id }]
    }
    throw new ConfigError(`post_processor.single[${i}]`, 'must be Sequence A or a known SpecialToken', file)
  })
}

/** Load `<dir>/tokenizer.json`. */
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
  return Tokenizer.fromJson(json, file)
}
