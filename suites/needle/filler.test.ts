import { describe, expect, it } from 'vitest'
import { streamFor } from '../../src/model/checkpoint/index.ts'
import { fillerSentence, fillerVocabulary } from '../../verify/needle/filler.ts'
import { needleVocabulary } from '../../src/model/checkpoint/needle/words.ts'

// The proof: filler text is list words (first letter maybe upper case) separated by spaces, commas,
// digits and full stops. A run of letters inside a needle string, wherever the string occurs, lies
// inside one filler word. So if some letter run of every needle string is in no filler word (any
// case), no needle string can occur in any filler text, for any seed.
function letterRuns (s: string): string[] {
  return s.match(/[A-Za-z]+/g) ?? []
}

describe('filler text never holds a needle string', () => {
  const words = fillerVocabulary()

  it('the vocabulary is lower-case ASCII words', () => {
    expect(words.length).toBeGreaterThan(100)
    for (const w of words) expect(w).toMatch(/^[a-z]+$/)
  })

  it('every needle, question and answer string has a letter run that no filler word contains', () => {
    for (const s of needleVocabulary()) {
      const free = letterRuns(s).filter((run) => !words.some((w) => w.includes(run.toLowerCase())))
      expect(free, `${JSON.stringify(s)}: every letter run occurs in some filler word`).not.toEqual([])
    }
  })

  it('sentences use only vocabulary words, spaces, commas, digits and a final full stop', () => {
    const rng = streamFor(3, 'filler-test')
    for (let i = 0; i < 2000; i++) {
      const s = fillerSentence(rng)
      expect(s).toMatch(/^[A-Z][a-z ,0-9]*\.$/)
      for (const run of letterRuns(s)) expect(words, `${run} in ${s}`).toContain(run.toLowerCase())
    }
  })

  it('and, checked directly, 2000 sentences hold none of them', () => {
    const rng = streamFor(4, 'filler-test')
    const text = Array.from({ length: 2000 }, () => fillerSentence(rng)).join(' ')
    for (const s of needleVocabulary()) {
      expect(text.includes(s), s).toBe(false)
      expect(text.toLowerCase().includes(s.trim().toLowerCase()), s).toBe(false)
    }
  })

  it('the check can fail: with "chamber" in the list, " amber" has no free letter run', () => {
    const bad = [...words, 'chamber']
    const free = letterRuns(' amber').filter((run) => !bad.some((w) => w.includes(run)))
    expect(free).toEqual([])
  })
})
