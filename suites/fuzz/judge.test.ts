// The fuzz suites' judge itself: it must fail a case that throws anything but the allowed class.
import { describe, expect, it } from 'vitest'
import { ConfigError, PdBridgeError } from '../../src/errors.ts'
import { Tally, judge } from './helpers.ts'

describe('fuzz judge', () => {
  it('counts parses and own-class refusals, and fails on a TypeError or a sibling class', () => {
    const t = new Tally('judge self-test')
    judge(t, 1, () => 1)
    judge(t, 2, () => { throw new ConfigError('f', 'bad') }, ConfigError)
    expect([t.runs, t.parsed, t.refused]).toEqual([2, 1, 1])
    expect(() => judge(t, 3, () => (null as unknown as { x: number }).x)).toThrow(/threw TypeError/)
    expect(() => judge(t, 4, () => { throw new PdBridgeError('x') }, ConfigError)).toThrow(/not ConfigError/)
    expect(() => judge(t, 5, () => { throw new RangeError('deep') })).toThrow(/threw RangeError/)
  })
})
