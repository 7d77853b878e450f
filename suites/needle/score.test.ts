import { describe, expect, it } from 'vitest'
import { ConfigError } from '../../src/errors.ts'
import { answerHits, scoreBridged, scoreNative, verdictKind } from '../../verify/needle/score.ts'

describe('a hit is the expected word as a whole word, any case', () => {
  const cases: Array<[string, string, boolean]> = [
    [' amber', 'amber', true],
    ['Amber', ' amber', true],
    ['The secret word is AMBER.', 'amber', true],
    ['  "amber"\n', 'amber', true],
    ['amber-coloured', 'amber', true],
    ['ambers', 'amber', false],
    ['chamber', 'amber', false],
    ['amber2', 'amber', false],
    ['', 'amber', false],
    [' unknown', 'unknown', true],
    ['It is teal, not amber', 'teal', true],
  ]
  for (const [answer, expected, hit] of cases) {
    it(`${JSON.stringify(answer)} for ${JSON.stringify(expected)}: ${hit ? 'hit' : 'miss'}`, () => {
      expect(answerHits(answer, expected)).toBe(hit)
    })
  }

  it('an empty expected word is a ConfigError, not a hit on everything', () => {
    expect(() => answerHits('amber', '  ')).toThrow(ConfigError)
  })

  it('a word with regex characters is matched literally', () => {
    expect(answerHits('a.b', 'a.b')).toBe(true)
    expect(answerHits('axb', 'a.b')).toBe(false)
  })
})

describe('the verdict rule: only complete is a bridged pass', () => {
  it('reads the verdict kinds the front door writes', () => {
    expect(verdictKind('complete')).toBe('complete')
    expect(verdictKind('partial 256/600')).toBe('partial')
    expect(verdictKind('declined: short prompt (100 tokens < PD_MIN_TOKENS 512)')).toBe('declined')
    expect(verdictKind(undefined)).toBe('declined')
    expect(verdictKind('Complete')).toBe('declined')
    expect(verdictKind('completed')).toBe('declined')
    expect(verdictKind('partially')).toBe('declined')
  })

  it('complete with a hit is a pass, complete without one a miss', () => {
    expect(scoreBridged('complete', ' amber', 'amber')).toEqual({ verdictKind: 'complete', hit: true, outcome: 'pass' })
    expect(scoreBridged('complete', ' teal', 'amber')).toEqual({ verdictKind: 'complete', hit: false, outcome: 'miss' })
  })

  it('partial and declined are not bridged, even when the answer hits', () => {
    expect(scoreBridged('partial 256/600', ' amber', 'amber')).toEqual({ verdictKind: 'partial', hit: true, outcome: 'not-bridged' })
    expect(scoreBridged('declined: bridge queue full', ' amber', 'amber')).toEqual({ verdictKind: 'declined', hit: true, outcome: 'not-bridged' })
    expect(scoreBridged(undefined, ' amber', 'amber')).toEqual({ verdictKind: 'declined', hit: true, outcome: 'not-bridged' })
  })

  it('a native leg is a pass or a miss', () => {
    expect(scoreNative('amber', 'amber')).toEqual({ hit: true, outcome: 'pass' })
    expect(scoreNative('unknown', 'amber')).toEqual({ hit: false, outcome: 'miss' })
  })
})
