import { describe, expect, it } from 'vitest'
import { ConfigError } from '../../src/errors.ts'
import { DEFAULT_DEPTHS, DEFAULT_LENGTHS, needleGrid, planNeedles, runSeed } from '../../verify/needle/grid.ts'
import { NEEDLE_VALUES } from '../../src/model/checkpoint/needle/words.ts'

describe('the default grid', () => {
  it('is 4 lengths (past the original window of 1024) by 5 depths, lengths outer', () => {
    const grid = needleGrid({ seed: 1 })
    expect(DEFAULT_LENGTHS).toEqual([512, 2048, 4096, 8192])
    expect(DEFAULT_DEPTHS).toEqual([0, 0.25, 0.5, 0.75, 1])
    expect(grid).toHaveLength(20)
    expect(grid.map((r) => r.index)).toEqual([...Array(20).keys()])
    expect(grid.slice(0, 5).map((r) => [r.targetTokens, r.depth])).toEqual([[512, 0], [512, 0.25], [512, 0.5], [512, 0.75], [512, 1]])
    expect(Math.max(...grid.map((r) => r.targetTokens))).toBeGreaterThan(1024)
  })
})

describe('seeds', () => {
  it('every run of an invocation has its own seed, derived deterministically from --seed', () => {
    const a = needleGrid({ seed: 42, repeats: 3, needles: 2 })
    expect(new Set(a.map((r) => r.seed)).size).toBe(a.length)
    expect(needleGrid({ seed: 42, repeats: 3, needles: 2 })).toEqual(a)
    const b = needleGrid({ seed: 43, repeats: 3, needles: 2 })
    expect(b.filter((r, i) => r.seed === a[i].seed)).toEqual([])
    for (const r of a) expect(Number.isSafeInteger(r.seed) && r.seed >= 0 && r.seed < 2 ** 48).toBe(true)
  })

  it('a run seed depends on the cell, not on its place in the grid', () => {
    const full = needleGrid({ seed: 5 })
    const one = needleGrid({ seed: 5, lengths: [4096], depths: [0.5] })
    expect(one[0].seed).toBe(full.find((r) => r.targetTokens === 4096 && r.depth === 0.5)!.seed)
    expect(one[0].seed).toBe(runSeed(5, 4096, 0.5, 0))
  })
})

describe('needles of a run', () => {
  it('distinct keys and values; the asked one at the cell depth; distractors in [0, 1]', () => {
    for (let seed = 0; seed < 200; seed++) {
      const { needles, ask } = planNeedles(seed, 4, 0.75)
      expect(new Set(needles.map((n) => n.key)).size).toBe(4)
      expect(new Set(needles.map((n) => n.value)).size).toBe(4)
      for (const n of needles) {
        expect(NEEDLE_VALUES).toContain(n.value)
        expect(n.depth).toBeGreaterThanOrEqual(0)
        expect(n.depth).toBeLessThanOrEqual(1)
      }
      expect(needles.find((n) => n.key === ask)!.depth).toBe(0.75)
    }
  })

  it('the asked key and the values vary with the seed', () => {
    const asks = new Set<number>()
    const values = new Set<string>()
    for (let seed = 0; seed < 200; seed++) {
      const p = planNeedles(seed, 1, 0)
      asks.add(p.ask)
      values.add(p.needles[0].value)
    }
    expect(asks.size).toBe(4)
    expect(values.size).toBe(16)
  })
})

describe('bad grids are refused with the field named', () => {
  const cases: Array<[string, Parameters<typeof needleGrid>[0], string]> = [
    ['five needles (four keys)', { seed: 1, needles: 5 }, 'needles: must be an integer 1..4'],
    ['a depth past 1', { seed: 1, depths: [0, 2] }, 'depths: must be numbers in [0, 1], got 2'],
    ['a zero length', { seed: 1, lengths: [0] }, 'lengths: must be positive integers, got 0'],
    ['a repeated length', { seed: 1, lengths: [512, 512] }, 'lengths: lists a value twice'],
    ['no repeats', { seed: 1, repeats: 0 }, 'repeats: must be a positive integer'],
    ['a negative seed', { seed: -1 }, 'seed: must be a non-negative integer'],
  ]
  for (const [what, options, message] of cases) {
    it(what, () => {
      expect(() => needleGrid(options)).toThrow(ConfigError)
      expect(() => needleGrid(options)).toThrow(message)
    })
  }
})
