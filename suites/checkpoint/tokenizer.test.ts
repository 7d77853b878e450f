// The synthetic byte-level BPE tokenizer: alphabet, GPT-2 split, training rules, BPE order,
// special tokens, round trips, and the committed cases file the coordinator checks against HF.
import { describe, it, expect } from 'vitest'
import fc from 'fast-check'
import { readFileSync } from 'node:fs'
import { ConfigError, PdBridgeError } from '../../src/errors.ts'
import {
  BYTE_TO_CHAR, CHAR_TO_BYTE, buildTokenizerFiles, renderChat, splitPretokens, toByteLevel, trainMerges,
  vocabLayout, Tokenizer, MIN_VOCAB_SIZE, NAMED_SPECIAL_TOKENS, reservedToken,
} from '../../src/model/tokenizer/index.ts'
import { TRAINING_TEXT } from '../../src/model/tokenizer/corpus.ts'
import { CASES_FILE, buildCases, compactJson, tinyTokenizer } from '../../harness/make-tokenizer-cases.ts'

const tok = tinyTokenizer()

describe('the byte-level alphabet is GPT-2 bytes_to_unicode', () => {
  it('maps 256 bytes to 256 distinct characters and back', () => {
    expect(new Set(BYTE_TO_CHAR).size).toBe(256)
    for (let b = 0; b < 256; b++) expect(CHAR_TO_BYTE.get(BYTE_TO_CHAR[b])).toBe(b)
  })

  it('keeps printable bytes and moves the rest to U+0100.. in byte order', () => {
    expect(BYTE_TO_CHAR[0x41]).toBe('A')
    expect(BYTE_TO_CHAR[0xe9]).toBe('é')
    expect(BYTE_TO_CHAR[0x00]).toBe('\u0100')
    expect(BYTE_TO_CHAR[0x0a]).toBe('Ċ')
    expect(BYTE_TO_CHAR[0x20]).toBe('Ġ')
    expect(BYTE_TO_CHAR[0x7f]).toBe('ġ')
    expect(BYTE_TO_CHAR[0xa0]).toBe('ł')
    expect(BYTE_TO_CHAR[0xad]).toBe('Ń')
  })
})

describe('the GPT-2 split matches Oniguruma semantics', () => {
  it.each([
    ["I'm  here", ['I', "'m", ' ', ' here']],
    ["they'll DON'T", ['they', "'ll", ' DON', "'", 'T']],
    ['a  b', ['a', ' ', ' b']],
    ['x\n\n y', ['x', '\n\n', ' y']],
    ['end   ', ['end', '   ']],
    ['  2024abc', [' ', ' 2024', 'abc']],
    ['hi!!? ok', ['hi', '!!?', ' ok']],
    ['½ Ⅻ', ['½', ' Ⅻ']],
  ])('splits %j', (text, pieces) => {
    expect(splitPretokens(text)).toEqual(pieces)
  })

  it('treats U+0085 and Zs/Zl/Zp as whitespace but not U+FEFF (Oniguruma \\s, unlike JavaScript \\s)', () => {
    expect(splitPretokens('a\u0085b')).toEqual(['a', '\u0085', 'b'])
    // Only an ASCII space may lead a word: U+3000 before a letter stays a whitespace piece of its own.
    expect(splitPretokens('a\u3000\u3000b')).toEqual(['a', '\u3000', '\u3000', 'b'])
    expect(splitPretokens('a\ufeffb')).toEqual(['a', '\ufeff', 'b'])
    expect(splitPretokens('a \ufeffb')).toEqual(['a', ' \ufeff', 'b'])
  })

  it('covers the input exactly', () => {
    fc.assert(fc.property(fc.string({ unit: 'grapheme' }), (s) => splitPretokens(s).join('') === s), { numRuns: 300 })
  })
})

describe('BPE training follows its stated rules', () => {
  it('merges the most frequent pair first and breaks ties by the smaller pair', () => {
    // "xy" and "zw" both occur twice; "x y" < "z w" wins the tie whichever comes first in the text.
    expect(trainMerges('xy,xy,zw,zw', 10)).toEqual([['x', 'y'], ['z', 'w']])
    expect(trainMerges('zw,zw,xy,xy', 10)).toEqual([['x', 'y'], ['z', 'w']])
    // A pair seen three times beats both.
    expect(trainMerges('zw,zw,xy,xy,qq,qq,qq', 10)).toEqual([['q', 'q'], ['x', 'y'], ['z', 'w']])
  })

  it('never merges a pair seen only once', () => {
    expect(trainMerges('abc def', 10)).toEqual([])
  })

  it('learns the same merges every time, each producing a new token', () => {
    const merges = trainMerges(TRAINING_TEXT, 5000)
    expect(trainMerges(TRAINING_TEXT, 5000)).toEqual(merges)
    const results = merges.map(([a, b]) => a + b)
    expect(new Set(results).size).toBe(results.length)
    expect(results.some((r) => BYTE_TO_CHAR.includes(r))).toBe(false)
    expect(merges.slice(0, 3)).toEqual([['Ġ', 't'], ['h', 'e'], ['Ġ', 'a']])
  })
})

describe('vocabulary layout', () => {
  it('puts the named specials first, then the 256 bytes, then merges', () => {
    const layout = vocabLayout(512)
    expect(layout.tokens.slice(0, 5)).toEqual([...NAMED_SPECIAL_TOKENS])
    expect(layout.tokens.slice(5, 261)).toEqual([...BYTE_TO_CHAR])
    expect(layout.tokens.length).toBe(512)
    expect(layout.merges.length).toBe(251)
    expect(layout.specialIds).toEqual([0, 1, 2, 3, 4])
  })

  it('fills with reserved special tokens when the text runs out of pairs', () => {
    const layout = vocabLayout(4096)
    const learned = layout.merges.length
    expect(learned).toBeLessThan(4096 - MIN_VOCAB_SIZE)
    expect(layout.tokens[MIN_VOCAB_SIZE + learned]).toBe(reservedToken(0))
    expect(layout.tokens[4095]).toBe(reservedToken(4096 - MIN_VOCAB_SIZE - learned - 1))
    expect(layout.specialIds.length).toBe(5 + 4096 - MIN_VOCAB_SIZE - learned)
  })

  it('refuses a vocabulary too small for specials plus bytes', () => {
    expect(() => vocabLayout(260)).toThrow(ConfigError)
  })
})

// GPT-2's original bpe(): find the lowest-ranked pair, merge all its occurrences left to right, repeat.
// An independent formulation of the same order, to check the tokenizer's one-merge-at-a-time loop.
function referenceBpe (word: string, ranks: Map<string, number>): string[] {
  let symbols = Array.from(word)
  for (;;) {
    let best: [string, string] | undefined
    let bestRank = Infinity
    for (let i = 0; i + 1 < symbols.length; i++) {
      const r = ranks.get(symbols[i] + ' ' + symbols[i + 1])
      if (r !== undefined && r < bestRank) {
        bestRank = r
        best = [symbols[i], symbols[i + 1]]
      }
    }
    if (best === undefined) return symbols
    const next: string[] = []
    for (let i = 0; i < symbols.length; i++) {
      if (i + 1 < symbols.length && symbols[i] === best[0] && symbols[i + 1] === best[1]) {
        next.push(best[0] + best[1])
        i++
      }
      else next.push(symbols[i])
    }
    symbols = next
  }
}

describe('encoding', () => {
  const json = JSON.parse(buildTokenizerFiles(512, 32768)['tokenizer.json'])
  const ranks = new Map<string, number>(json.model.merges.map((m: [string, string], i: number) => [m.join(' '), i]))

  it('agrees with GPT-2 reference BPE on every pre-token of arbitrary text', () => {
    fc.assert(fc.property(fc.string({ unit: 'binary', maxLength: 60 }), (s) => {
      const ours = tok.encode(s)
      const want = splitPretokens(s).flatMap((p) => referenceBpe(toByteLevel(p), ranks).map((t) => json.model.vocab[t]))
      return JSON.stringify(ours) === JSON.stringify(want)
    }), { numRuns: 500 })
  })

  it('agrees with GPT-2 reference BPE on English (slices of the training text, mutated)', () => {
    const text = fc.tuple(fc.nat({ max: TRAINING_TEXT.length - 1 }), fc.nat({ max: 300 }), fc.boolean())
      .map(([at, len, upper]) => {
        const slice = TRAINING_TEXT.slice(at, at + len)
        return upper ? slice.toUpperCase() : slice
      })
    let merged = 0
    fc.assert(fc.property(text, (s) => {
      const ours = tok.encode(s)
      merged += ours.filter((id) => id >= 261).length
      const want = splitPretokens(s).flatMap((p) => referenceBpe(toByteLevel(p), ranks).map((t) => json.model.vocab[t]))
      return JSON.stringify(ours) === JSON.stringify(want)
    }), { numRuns: 300 })
    // The inputs must actually exercise merges, or the comparison proves nothing.
    expect(merged).toBeGreaterThan(1000)
  })

  it('round-trips any well-formed text through decode', () => {
    fc.assert(fc.property(fc.string({ unit: 'grapheme', maxLength: 80 }), (s) => tok.decode(tok.encode(s)) === s), { numRuns: 500 })
  })

  it('matches special tokens verbatim before splitting, leftmost first', () => {
    expect(tok.encode('<｜User｜>hi<｜Assistant｜>')).toEqual([2, ...tok.encode('hi'), 3])
    expect(tok.encode('a<｜▁pad▁｜><｜end▁of▁sentence｜>')).toEqual([...tok.encode('a'), 4, 1])
    expect(tok.encode('<｜User>').includes(2)).toBe(false)
  })

  it('prefers the longest added token at a position', () => {
    const json2 = JSON.parse(JSON.stringify(json))
    json2.added_tokens.push({ id: 512, content: '<｜User｜>!', special: true, normalized: false, lstrip: false, rstrip: false, single_word: false })
    const t2 = Tokenizer.fromJson(json2)
    expect(t2.encode('<｜User｜>!?')).toEqual([512, ...tok.encode('?')])
    expect(t2.encode('<｜User｜>?')).toEqual([2, ...tok.encode('?')])
  })

  it('prepends bos only when asked (the TemplateProcessing post-processor)', () => {
    expect(tok.encode('hi', { addSpecialTokens: true })).toEqual([0, ...tok.encode('hi')])
  })
})

describe('decoding', () => {
  it('skips special tokens only when asked', () => {
    const ids = [0, 2, ...tok.encode('hi'), 3, 1]
    expect(tok.decode(ids)).toBe('<｜begin▁of▁sentence｜><｜User｜>hi<｜Assistant｜><｜end▁of▁sentence｜>')
    expect(tok.decode(ids, { skipSpecialTokens: true })).toBe('hi')
  })

  it('replaces invalid UTF-8 with U+FFFD per maximal subpart and keeps a leading BOM', () => {
    const b = (x: number) => 5 + x
    expect(tok.decode([b(0xf0), b(0x9f)])).toBe('\ufffd')
    expect(tok.decode([b(0xc0), b(0xaf)])).toBe('\ufffd\ufffd')
    expect(tok.decode([b(0xef), b(0xbb), b(0xbf), b(0x41)])).toBe('\ufeffA')
  })

  it('refuses ids outside the vocabulary', () => {
    expect(() => tok.decode([512])).toThrow(PdBridgeError)
    expect(() => tok.decode([-1])).toThrow(PdBridgeError)
  })
})

describe('the chat template', () => {
  it('renders DeepSeek-style turns', () => {
    expect(renderChat([
      { role: 'system', content: 'S' }, { role: 'user', content: 'U' }, { role: 'assistant', content: 'A' }, { role: 'user', content: 'V' },
    ], true)).toBe('<｜begin▁of▁sentence｜>S<｜User｜>U<｜Assistant｜>A<｜end▁of▁sentence｜><｜User｜>V<｜Assistant｜>')
  })

  it('is the template written into tokenizer_config.json, naming the same markers', () => {
    const config = JSON.parse(buildTokenizerFiles(512, 32768)['tokenizer_config.json'])
    expect(config.chat_template).toContain("'<｜User｜>' + message['content']")
    expect(config.chat_template).toContain("'<｜Assistant｜>' + message['content'] + eos_token")
    expect([config.bos_token, config.eos_token, config.pad_token]).toEqual(NAMED_SPECIAL_TOKENS.filter((_, i) => i !== 2 && i !== 3))
  })
})

describe('tokenizer.json loading refuses what it cannot reproduce', () => {
  const good = () => JSON.parse(buildTokenizerFiles(512, 32768)['tokenizer.json'])
  it.each([
    ['model.type', (j: any) => { j.model.type = 'WordPiece' }],
    ['normalizer.type', (j: any) => { j.normalizer = { type: 'BertNormalizer' } }],
    ['pre_tokenizer.type', (j: any) => { j.pre_tokenizer = { type: 'Whitespace' } }],
    ['pre_tokenizer.pretokenizers[0].behavior', (j: any) => { j.pre_tokenizer = { type: 'Sequence', pretokenizers: [{ type: 'Split', pattern: { Regex: 'a' }, behavior: 'Sideways' }] } }],
    ['pre_tokenizer.pattern', (j: any) => { j.pre_tokenizer = { type: 'Split', pattern: { Regex: '(?i:ab)' }, behavior: 'Isolated' } }],
    ['model.merges[3]', (j: any) => { j.model.merges[3] = ['Ġ', 'nope'] }],
    ['model.unk_token', (j: any) => { j.model.unk_token = '<unk>' }],
    ['added_tokens[0]', (j: any) => { j.added_tokens[0].content = '' }],
  ])('names %s', (field, breakIt) => {
    const j = good()
    breakIt(j)
    const err = (() => { try { Tokenizer.fromJson(j, 'x/tokenizer.json') } catch (e) { return e } })()
    expect(err).toBeInstanceOf(ConfigError)
    expect((err as ConfigError).field).toBe(field)
    expect((err as ConfigError).file).toBe('x/tokenizer.json')
  })
})

describe('the committed harness/tokenizer-cases.json matches the tokenizer', () => {
  it('equals a fresh build byte for byte (regenerate with npx tsx harness/make-tokenizer-cases.ts)', () => {
    const committed = readFileSync(CASES_FILE, 'utf8')
    const fresh = compactJson(buildCases(tok, JSON.parse(committed).description)) + '\n'
    expect(fresh).toBe(committed)
  })

  it('holds about 40 texts whose decoded form is the text itself', () => {
    const cases = JSON.parse(readFileSync(CASES_FILE, 'utf8'))
    expect(cases.cases.length).toBeGreaterThanOrEqual(40)
    for (const c of cases.cases) expect(c.decoded).toBe(c.text)
  })
})
