// decideRange against a direct reading of RFC 9110 14.1.2, for any file size and any numbers.
import { describe, expect, it } from 'vitest'
import fc from 'fast-check'
import { decideRange } from '../../src/share/index.ts'

describe('decideRange: single ranges follow the RFC for every size and position', () => {
  it('bytes=a-b is satisfiable exactly when a <= b and a < size, and ends at min(b, size-1)', () => {
    fc.assert(fc.property(fc.nat(5000), fc.nat(6000), fc.nat(6000), (size, a, b) => {
      const d = decideRange(`bytes=${a}-${b}`, size)
      if (a <= b && a < size) expect(d).toEqual({ kind: 'partial', start: a, end: Math.min(b, size - 1) })
      else expect(d.kind).toBe('unsatisfiable')
    }), { numRuns: 2000 })
  })

  it('bytes=a- runs to the end; bytes=-n is the last n bytes (all of a shorter file)', () => {
    fc.assert(fc.property(fc.nat(5000), fc.nat(6000), (size, n) => {
      const open = decideRange(`bytes=${n}-`, size)
      if (n < size) expect(open).toEqual({ kind: 'partial', start: n, end: size - 1 })
      else expect(open.kind).toBe('unsatisfiable')
      const suffix = decideRange(`bytes=-${n}`, size)
      if (n > 0 && size > 0) expect(suffix).toEqual({ kind: 'partial', start: Math.max(0, size - n), end: size - 1 })
      else expect(suffix.kind).toBe('unsatisfiable')
    }), { numRuns: 2000 })
  })

  it('no header is full; a foreign unit is ignored; more than one range is refused', () => {
    expect(decideRange(undefined, 10)).toEqual({ kind: 'full' })
    expect(decideRange('lines=1-2', 10)).toEqual({ kind: 'full' })
    expect(decideRange('bytes=0-1,3-4', 10)).toMatchObject({ kind: 'unsatisfiable', reason: expect.stringContaining('multiple ranges') })
    expect(decideRange('bytes=0-123456789012345', 10)).toEqual({ kind: 'partial', start: 0, end: 9 })
    expect(decideRange('bytes=0-1234567890123456', 10).kind).toBe('unsatisfiable')
  })
})
