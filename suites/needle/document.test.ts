import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import { ConfigError } from '../../src/errors.ts'
import { ASSISTANT_TOKEN, BOS_TOKEN, renderChat, USER_TOKEN } from '../../src/model/tokenizer/index.ts'
import { buildNeedleDocument, DEFAULT_MIN_DISTANCE, type NeedleDocument } from '../../verify/needle/document.ts'
import { NEEDLE_KEYS } from '../../src/model/checkpoint/needle/words.ts'
import { needleTokenizer, tinyTokenizer } from './helpers.ts'

const tiny = tinyTokenizer()

// Longest filler sentence in tiny tokens is well under this: the slack of "as long as possible".
const SENTENCE_SLACK = 48

function content (doc: NeedleDocument): string {
  return doc.messages[0].content
}

describe('exact positions with the tiny tokenizer', () => {
  const cases = [
    { seed: 1, targetTokens: 512, depths: [0.5] },
    { seed: 2, targetTokens: 1536, depths: [0, 1, 0.3] },
    { seed: 3, targetTokens: 4096, depths: [0.25, 0.75, 0.75, 1] },
  ]
  for (const c of cases) {
    it(`seed ${c.seed}, ${c.targetTokens} tokens, ${c.depths.length} needle(s)`, () => {
      const values = [' amber', ' teal', ' umber', ' sable']
      const needles = c.depths.map((depth, k) => ({ key: k, value: values[k], depth }))
      const doc = buildNeedleDocument({ seed: c.seed, targetTokens: c.targetTokens, needles, ask: 0, tokenizer: tiny })
      const tokens = doc.tokens!
      expect(doc.positions).toBe('exact')
      expect(doc.messages).toHaveLength(1)
      expect(doc.messages[0].role).toBe('user')
      expect(tokens).toEqual(tiny.encode(renderChat(doc.messages, true)))
      expect(doc.promptTokens).toBe(tokens.length)
      expect(doc.promptTokens).toBeLessThanOrEqual(c.targetTokens)
      expect(c.targetTokens - doc.promptTokens).toBeLessThan(SENTENCE_SLACK)
      for (const [i, n] of doc.needles.entries()) {
        expect(n.key).toBe(needles[i].key)
        // The tokens before the position spell up to the marker; from it on, the value comes first.
        expect(tiny.decode(tokens.slice(0, n.position)).endsWith(NEEDLE_KEYS[n.key].marker)).toBe(true)
        expect(tiny.decode(tokens.slice(n.position)).startsWith(`${n.value}.`)).toBe(true)
        expect(n.distance).toBe(doc.promptTokens - n.position)
        expect(n.distance).toBeGreaterThanOrEqual(DEFAULT_MIN_DISTANCE)
        expect(content(doc).split(`${n.marker}${n.value}.`)).toHaveLength(2)
      }
      expect(tiny.decode(tokens.slice(doc.questionPosition))).toBe(`${NEEDLE_KEYS[0].question}${ASSISTANT_TOKEN}`)
      expect(tiny.decode(tokens.slice(0, doc.questionPosition)).endsWith('.\n\n')).toBe(true)
      expect(content(doc).endsWith(NEEDLE_KEYS[0].question)).toBe(true)
      expect(doc.expected).toBe('amber')
    })
  }
})

describe('exact positions with the needle phrases as single tokens', () => {
  it('the value is the one token at its position, right after its marker token', () => {
    const tok = needleTokenizer()
    const needles = [{ key: 2, value: ' jade', depth: 0.6 }, { key: 3, value: ' ochre', depth: 0.1 }]
    const doc = buildNeedleDocument({ seed: 9, targetTokens: 2048, needles, ask: 2, tokenizer: tok })
    const tokens = doc.tokens!
    for (const n of doc.needles) {
      expect(tokens[n.position]).toBe(tok.tokenToId(n.value))
      expect(tokens[n.position - 1]).toBe(tok.tokenToId(n.marker))
      expect(tokens.filter((t) => t === tok.tokenToId(n.value))).toHaveLength(1)
    }
    expect(tokens[doc.questionPosition]).toBe(tok.tokenToId(NEEDLE_KEYS[2].question))
    expect(tokens.slice(doc.questionPosition)).toEqual([tok.tokenToId(NEEDLE_KEYS[2].question), tok.tokenToId(ASSISTANT_TOKEN)])
  })
})

describe('depth', () => {
  it('0 puts the needle first in the document', () => {
    const doc = buildNeedleDocument({ seed: 5, targetTokens: 1024, needles: [{ key: 1, value: ' ruby', depth: 0 }], ask: 1, tokenizer: tiny })
    expect(tiny.decode(doc.tokens!.slice(0, doc.needles[0].position))).toBe(`${BOS_TOKEN}${USER_TOKEN}${NEEDLE_KEYS[1].marker}`)
  })

  it('1 puts it as late as the min distance allows (within one sentence of it)', () => {
    for (const minDistance of [192, 257, 400]) {
      const doc = buildNeedleDocument({ seed: 6, targetTokens: 2048, needles: [{ key: 1, value: ' ruby', depth: 1 }], ask: 1, tokenizer: tiny, minDistance })
      expect(doc.needles[0].distance).toBeGreaterThanOrEqual(minDistance)
      expect(doc.needles[0].distance).toBeLessThan(minDistance + SENTENCE_SLACK)
    }
  })

  it('is monotone: a deeper needle never sits earlier, and the min distance always holds', () => {
    fc.assert(fc.property(
      fc.integer({ min: 0, max: 2 ** 32 }), fc.integer({ min: 400, max: 2500 }), fc.double({ min: 0, max: 1, noNaN: true }), fc.double({ min: 0, max: 1, noNaN: true }),
      (seed, targetTokens, a, b) => {
        const [lo, hi] = a <= b ? [a, b] : [b, a]
        const at = (depth: number): NeedleDocument => buildNeedleDocument({ seed, targetTokens, needles: [{ key: 0, value: ' teal', depth }], ask: 0, tokenizer: tiny })
        const x = at(lo)
        const y = at(hi)
        expect(x.needles[0].position).toBeLessThanOrEqual(y.needles[0].position)
        for (const d of [x, y]) {
          expect(d.needles[0].distance).toBeGreaterThanOrEqual(DEFAULT_MIN_DISTANCE)
          expect(d.promptTokens).toBeLessThanOrEqual(targetTokens)
        }
      },
    ), { numRuns: 40 })
  })

  it('needles at the same depth keep the order given', () => {
    const needles = [{ key: 3, value: ' pearl', depth: 0.5 }, { key: 0, value: ' lilac', depth: 0.5 }]
    const doc = buildNeedleDocument({ seed: 7, targetTokens: 1500, needles, ask: 3, tokenizer: tiny })
    expect(doc.needles[0].position).toBeLessThan(doc.needles[1].position)
  })
})

describe('documents are seeded', () => {
  it('the same options give the same document; another seed shares not even the first block', () => {
    const o = { targetTokens: 1024, needles: [{ key: 0, value: ' amber', depth: 0.5 }], ask: 0, tokenizer: tiny }
    const a = buildNeedleDocument({ ...o, seed: 11 })
    expect(buildNeedleDocument({ ...o, seed: 11 })).toEqual(a)
    const b = buildNeedleDocument({ ...o, seed: 12 })
    expect(b.tokens!.slice(0, 256)).not.toEqual(a.tokens!.slice(0, 256))
    // Only the chat template and part of the first sentence can agree.
    let common = 0
    while (a.tokens![common] === b.tokens![common]) common++
    expect(common).toBeLessThan(16)
  })
})

describe('without a tokenizer', () => {
  it('estimates at the ratio and says the positions are approximate', () => {
    const doc = buildNeedleDocument({ seed: 1, targetTokens: 2048, needles: [{ key: 0, value: ' amber', depth: 1 }], ask: 0, charsPerToken: 4 })
    expect(doc.positions).toBe('approximate')
    expect(doc.tokens).toBeNull()
    expect(doc.charsPerToken).toBe(4)
    const text = content(doc)
    expect(doc.promptTokens).toBe(3 + Math.ceil(text.length / 4))
    expect(doc.promptTokens).toBeLessThanOrEqual(2048)
    expect(doc.needles[0].position).toBe(2 + Math.floor(text.indexOf(' amber') / 4))
    expect(doc.needles[0].distance).toBeGreaterThanOrEqual(DEFAULT_MIN_DISTANCE)
  })
})

describe('the question and the expected answer', () => {
  it('asking a key no needle has expects unknown', () => {
    const doc = buildNeedleDocument({ seed: 1, targetTokens: 600, needles: [{ key: 0, value: ' amber', depth: 0.5 }], ask: 2, tokenizer: tiny })
    expect(doc.expected).toBe('unknown')
    expect(content(doc).endsWith(NEEDLE_KEYS[2].question)).toBe(true)
  })
})

describe('bad options are refused with the field named', () => {
  const base = { seed: 1, targetTokens: 1024, needles: [{ key: 0, value: ' amber', depth: 0.5 }], ask: 0 }
  const cases: Array<[string, Record<string, unknown>, string]> = [
    ['a key used twice', { needles: [{ key: 0, value: ' amber', depth: 0 }, { key: 0, value: ' teal', depth: 1 }] }, 'needles.1.key: key 0 is used twice'],
    ['a value not in the list', { needles: [{ key: 0, value: 'amber', depth: 0 }] }, 'needles.0.value: "amber" is not a needle value'],
    ['a depth past 1', { needles: [{ key: 0, value: ' amber', depth: 1.5 }] }, 'needles.0.depth: must be in [0, 1], got 1.5'],
    ['no needles', { needles: [] }, 'needles: must hold at least one needle'],
    ['an unknown key asked', { ask: 9 }, 'ask: must be a key index 0..3, got 9'],
    ['a document too short for the min distance', { targetTokens: 150 }, 'targetTokens: 150 leaves no room to keep a needle 192 tokens before the end'],
    ['a document shorter than its needles', { targetTokens: 10 }, 'targetTokens: 10 is shorter than the needles and the question alone'],
  ]
  for (const [what, patch, message] of cases) {
    it(what, () => {
      const e = (() => { try { buildNeedleDocument({ ...base, tokenizer: tiny, ...patch } as never) } catch (x) { return x } })()
      expect(e).toBeInstanceOf(ConfigError)
      expect((e as Error).message).toContain(message)
    })
  }
})
