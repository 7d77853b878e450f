// src/progress: the live line on a terminal and the JSON lines elsewhere, with a fake clock and a
// fake stream (no sleeps, no wall clock).
import { describe, expect, it } from 'vitest'
import { formatDuration, formatRate, resolveProgressMode, startProgress, type ProgressLine, type ProgressStream } from '../../src/progress/index.ts'

/** A stream that keeps what is written, and a clock the test moves. */
function fake (isTTY: boolean, columns?: number) {
  const writes: string[] = []
  const stream: ProgressStream = { isTTY, columns, write: (text: string) => { writes.push(text); return true } }
  let t = 1000
  return {
    stream,
    writes,
    now: () => t,
    advance: (ms: number) => { t += ms },
    text: () => writes.join(''),
    json: () => writes.join('').split('\n').filter((l) => l !== '').map((l) => JSON.parse(l) as ProgressLine),
  }
}

const CLEAR = '\r\x1b[2K'

describe('non-TTY: JSON lines', () => {
  it('one line per interval at most, on ticks, and one at the end, with rate and ETA from the fake clock', () => {
    const f = fake(false)
    const p = startProgress({ label: 'cold-bench', total: 10, unit: 'runs', stream: f.stream, now: f.now, env: {} })
    expect(p.mode).toBe('json')
    expect(f.writes).toEqual([]) // nothing at the start
    f.advance(2000); p.tick(1)
    f.advance(2000); p.tick(2)
    expect(f.writes).toEqual([]) // 4 s: under the 5 s interval
    f.advance(1000); p.tick(3, '16384 tokens, repeat 1')
    f.advance(1000); p.tick(4)
    f.advance(4000); p.tick(5)
    f.advance(1000); p.tick(6)
    f.advance(5000); p.done()
    p.tick(9) // after done: nothing
    p.fail('late')
    expect(f.json()).toEqual([
      { progress: 'cold-bench', done: 3, total: 10, unit: 'runs', rate: 0.6, eta_s: 11.7, elapsed_s: 5, note: '16384 tokens, repeat 1' },
      { progress: 'cold-bench', done: 5, total: 10, unit: 'runs', rate: 0.5, eta_s: 10, elapsed_s: 10, note: '16384 tokens, repeat 1' },
      { progress: 'cold-bench', done: 6, total: 10, unit: 'runs', rate: 0.375, eta_s: 0, elapsed_s: 16, state: 'done', note: '16384 tokens, repeat 1' },
    ])
    // Lines only: no carriage returns, no escape codes.
    expect(f.text()).not.toMatch(/[\r\x1b]/)
  })

  it('a run shorter than the interval prints nothing, done or failed', () => {
    for (const end of ['done', 'fail'] as const) {
      const f = fake(false)
      const p = startProgress({ label: 'gate: bridge vs native', total: 1088, unit: 'tokens', stream: f.stream, now: f.now, env: {} })
      f.advance(1500); p.tick(1088)
      if (end === 'done') p.done(); else p.fail('boom')
      expect(f.writes).toEqual([])
    }
  })

  it('a failure after the first interval ends with state failed and the reason; object extras become fields', () => {
    const f = fake(false)
    const p = startProgress({ label: 'needle', total: 4, unit: 'runs', stream: f.stream, now: f.now, env: {}, intervalMs: 1000 })
    f.advance(1000); p.tick(1, { tokens: 2048, depth: 0.5, done: 99 })
    f.advance(500); p.fail('front door did not answer')
    expect(f.json()).toEqual([
      { progress: 'needle', done: 1, total: 4, unit: 'runs', rate: 1, eta_s: 3, elapsed_s: 1, tokens: 2048, depth: 0.5 },
      { progress: 'needle', done: 1, total: 4, unit: 'runs', rate: 0.6667, eta_s: 4.5, elapsed_s: 1.5, state: 'failed', error: 'front door did not answer', tokens: 2048, depth: 0.5 },
    ])
  })

  it('without a total: no ETA; before any time has passed: no rate', () => {
    const f = fake(false)
    const p = startProgress({ label: 'export-weights', unit: 'tensors', stream: f.stream, now: f.now, env: {}, intervalMs: 0 })
    p.tick(0)
    f.advance(2000); p.tick(8)
    expect(f.json()).toEqual([
      { progress: 'export-weights', done: 0, total: null, unit: 'tensors', rate: null, eta_s: null, elapsed_s: 0 },
      { progress: 'export-weights', done: 8, total: null, unit: 'tensors', rate: 4, eta_s: null, elapsed_s: 2 },
    ])
  })

  it('log() writes plain lines', () => {
    const f = fake(false)
    const p = startProgress({ label: 'x', total: 2, stream: f.stream, now: f.now, env: {} })
    p.log('[cold-bench] warming the bridged leg')
    expect(f.text()).toBe('[cold-bench] warming the bridged leg\n')
  })
})

describe('TTY: one live line', () => {
  it('draws at the start, redraws at most every 200 ms, and ends with a line that stays', () => {
    const f = fake(true)
    const p = startProgress({ label: 'cold-bench', total: 4, unit: 'runs', stream: f.stream, now: f.now, env: {} })
    expect(p.mode).toBe('tty')
    expect(f.writes).toEqual([`${CLEAR}cold-bench  0/4 runs  0%  - runs/s  0s elapsed`])
    f.advance(100); p.tick(1) // 100 ms after the last draw: not redrawn
    expect(f.writes).toHaveLength(1)
    f.advance(100); p.tick(1, '4096 tokens') // 200 ms: redrawn
    f.advance(50); p.tick(2) // too soon again
    f.advance(1750); p.tick(2)
    expect(f.writes.slice(1)).toEqual([
      `${CLEAR}cold-bench  1/4 runs  25%  5.00 runs/s  ETA 1s  4096 tokens`,
      `${CLEAR}cold-bench  2/4 runs  50%  1.00 runs/s  ETA 2s  4096 tokens`,
    ])
    f.advance(118_000); p.tick(4)
    p.done()
    expect(f.writes.slice(3)).toEqual([
      `${CLEAR}cold-bench  4/4 runs  100%  2.00 runs/min  ETA 0s  4096 tokens`,
      `${CLEAR}cold-bench  4/4 runs in 2m00s (2.00 runs/min)\n`,
    ])
    const before = f.writes.length
    p.tick(5)
    p.done()
    expect(f.writes).toHaveLength(before)
  })

  it('log() puts its line above the live line and redraws it', () => {
    const f = fake(true)
    const p = startProgress({ label: 'needle', total: 2, unit: 'runs', stream: f.stream, now: f.now, env: {} })
    f.advance(3000)
    p.log('[needle] wrote run 1')
    expect(f.writes.slice(1)).toEqual([
      `${CLEAR}[needle] wrote run 1\n`,
      `${CLEAR}needle  0/2 runs  0%  0.00 runs/s  3s elapsed`,
    ])
  })

  it('fail() leaves the count, the time and the reason', () => {
    const f = fake(true)
    const p = startProgress({ label: 'gate: bridge vs native', total: 1088, unit: 'tokens', stream: f.stream, now: f.now, env: {} })
    f.advance(750); p.tick(544)
    p.fail('the hook refused a row')
    expect(f.writes.at(-1)).toBe(`${CLEAR}gate: bridge vs native  failed at 544/1,088 tokens after 1s: the hook refused a row\n`)
  })

  it('cuts the line to the terminal width so the redraw never wraps', () => {
    const f = fake(true, 30)
    startProgress({ label: 'make-checkpoint small seed 1', total: 228, unit: 'tensors', stream: f.stream, now: f.now, env: {} })
    const line = f.writes[0].slice(CLEAR.length)
    expect(line.length).toBeLessThanOrEqual(29)
    expect(line.endsWith('…')).toBe(true)
  })
})

describe('mode', () => {
  it('auto follows the stream; PD_PROGRESS and the option override it; a bad PD_PROGRESS is named', () => {
    expect(resolveProgressMode({ write: () => true, isTTY: true }, undefined, {})).toBe('tty')
    expect(resolveProgressMode({ write: () => true, isTTY: true }, undefined, { TERM: 'dumb' })).toBe('json')
    expect(resolveProgressMode({ write: () => true }, undefined, {})).toBe('json')
    expect(resolveProgressMode({ write: () => true }, undefined, { PD_PROGRESS: 'off' })).toBe('off')
    expect(resolveProgressMode({ write: () => true, isTTY: true }, undefined, { PD_PROGRESS: 'json' })).toBe('json')
    expect(resolveProgressMode({ write: () => true }, 'tty', { PD_PROGRESS: 'off' })).toBe('tty')
    expect(() => resolveProgressMode({ write: () => true }, undefined, { PD_PROGRESS: 'loud' })).toThrow('PD_PROGRESS must be one of auto, tty, json, off, got "loud"')
  })

  it('off writes nothing but log lines', () => {
    const f = fake(true)
    const p = startProgress({ label: 'x', total: 3, stream: f.stream, now: f.now, env: { PD_PROGRESS: 'off' } })
    f.advance(10_000); p.tick(1); p.tick(3); p.done()
    p.log('a line')
    expect(f.text()).toBe('a line\n')
  })

  it('refuses a negative total', () => {
    expect(() => startProgress({ label: 'x', total: -1, stream: fake(false).stream, env: {} })).toThrow('progress x: total must be a non-negative number, got -1')
  })
})

describe('formatting', () => {
  it('durations and rates', () => {
    expect([0, 42.4, 59.6, 61, 3599, 3600, 7380].map(formatDuration)).toEqual(['0s', '42s', '1m00s', '1m01s', '59m59s', '1h00m', '2h03m'])
    expect(formatRate(null, 'runs')).toBe('- runs/s')
    expect(formatRate(1234.5, 'tokens')).toBe('1,235 tokens/s')
    expect(formatRate(12.34, 'tokens')).toBe('12.3 tokens/s')
    expect(formatRate(0.05, 'runs')).toBe('3.00 runs/min')
    expect(formatRate(0.0001, 'runs')).toBe('0.36 runs/h')
  })
})
