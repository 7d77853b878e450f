// Streamed text: the incremental detokenizer and the stop matcher, checked against the whole-text
// answer they must reproduce piece by piece.
import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import { IncrementalDetokenizer, StopMatcher } from '../../src/engines/decoder/index.ts'
import { tinyTokenizer } from './helpers.ts'

const tokenizer = tinyTokenizer()
const REPLACEMENT = '\uFFFD'

function streamed (ids: number[]): string[] {
  const d = new IncrementalDetokenizer(tokenizer)
  return [...ids.map((id) => d.push(id)), d.finish()]
}

describe('IncrementalDetokenizer', () => {
  it('pieces concatenate to decode(all ids, skipping specials), and only the last may end in U+FFFD', () => {
    fc.assert(fc.property(fc.array(fc.integer({ min: 0, max: 511 }), { maxLength: 40 }), (ids) => {
      const pieces = streamed(ids)
      expect(pieces.join('')).toBe(tokenizer.decode(ids, { skipSpecialTokens: true }))
      for (const p of pieces.slice(0, -1)) expect(p.endsWith(REPLACEMENT)).toBe(false)
    }), { numRuns: 400 })
  })

  it('holds back a character split across tokens until the token that completes it', () => {
    const ids = tokenizer.encode('é')
    expect(ids.length).toBe(2) // the tiny vocab has no merged é: one token per byte
    const d = new IncrementalDetokenizer(tokenizer)
    expect(d.push(ids[0])).toBe('')
    expect(d.push(ids[1])).toBe('é')
    expect(d.finish()).toBe('')
  })

  it('finish() hands out a dangling partial character as U+FFFD', () => {
    const ids = tokenizer.encode('aé')
    const d = new IncrementalDetokenizer(tokenizer)
    expect(d.push(ids[0])).toBe('a')
    expect(d.push(ids[1])).toBe('')
    expect(d.finish()).toBe(REPLACEMENT)
  })

  it('drops special tokens', () => {
    const ids = tokenizer.encode('<｜User｜>x', { addSpecialTokens: true })
    expect(streamed(ids).join('')).toBe('x')
  })
})

/** The reference: the whole text cut where the first stop string to complete starts (longest on a tie). */
function cutAtStop (text: string, stops: string[]): { text: string, stopped: boolean } {
  for (let end = 1; end <= text.length; end++) {
    const starts = stops.filter((s) => text.slice(0, end).endsWith(s)).map((s) => end - s.length)
    if (starts.length > 0) return { text: text.slice(0, Math.min(...starts)), stopped: true }
  }
  return { text, stopped: false }
}

function runMatcher (pieces: string[], stops: string[]): { text: string, stopped: boolean, sentAfterStop: boolean } {
  const m = new StopMatcher(stops)
  let text = ''
  let stopped = false
  let sentAfterStop = false
  for (const p of pieces) {
    const step = m.push(p)
    if (stopped && step.text !== '') sentAfterStop = true
    text += step.text
    stopped ||= step.stopped
  }
  if (!stopped) text += m.flush()
  return { text, stopped, sentAfterStop }
}

describe('StopMatcher', () => {
  it('any split of any text gives the whole text cut at the first stop string to complete', () => {
    const alphabet = fc.constantFrom('a', 'b', 'c', 'é', '\n')
    const word = fc.array(alphabet, { minLength: 1, maxLength: 4 }).map((a) => a.join(''))
    fc.assert(fc.property(fc.array(fc.array(alphabet, { maxLength: 4 }).map((a) => a.join('')), { maxLength: 12 }), fc.array(word, { maxLength: 4 }), (pieces, stops) => {
      const got = runMatcher(pieces, stops)
      expect({ text: got.text, stopped: got.stopped }).toEqual(cutAtStop(pieces.join(''), stops))
      expect(got.sentAfterStop).toBe(false)
    }), { numRuns: 2000 })
  })

  it('holds back a possible beginning of a stop string and releases it when it cannot be one', () => {
    const m = new StopMatcher(['END'])
    expect(m.push('abcE')).toEqual({ text: 'abc', stopped: false })
    expect(m.push('N')).toEqual({ text: '', stopped: false })
    expect(m.push('x')).toEqual({ text: 'ENx', stopped: false })
    expect(m.push('yEND')).toEqual({ text: 'y', stopped: true })
    expect(m.push('more')).toEqual({ text: '', stopped: true })
  })

  it('the stop that completes first wins, even if another one started earlier', () => {
    const m = new StopMatcher(['cab', 'a'])
    expect(m.push('ca')).toEqual({ text: 'c', stopped: true })
    expect(new StopMatcher(['cab', 'ab']).push('cab')).toEqual({ text: '', stopped: true })
  })

  it('with no stop strings releases everything at once', () => {
    const m = new StopMatcher([])
    expect(m.push('abc')).toEqual({ text: 'abc', stopped: false })
    expect(m.flush()).toBe('')
  })
})
