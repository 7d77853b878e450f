// The batcher's schedule, on a stand-in engine whose step only records its rows: seats that come
// back for their next token in the same event-loop turn (as generate()'s decode loop does after
// each step) share one step even while other engine work (prefill chunks) waits, and at most one
// piece of that work runs between two steps. Answers are the property test's (batch-invariance.test.ts);
// this holds the throughput side: no step split for a waiting chunk, no chunk run twice in a row.
import { performance } from 'node:perf_hooks'
import { setImmediate as nextTurn } from 'node:timers/promises'
import { afterEach, describe, expect, it, vi } from 'vitest'
import { DecodeBatcher } from '../../src/engines/decoder/batcher.ts'
import type { ModelCache } from '../../src/model/engine/index.ts'

/** What ran on the engine, in order: `step N` (rows) or `job`. */
function standIn (): { batcher: DecodeBatcher, log: string[] } {
  const log: string[] = []
  const batcher = new DecodeBatcher({
    decodeBatch: (tokens: readonly number[]) => {
      log.push(`step ${tokens.length}`)
      return new Float32Array(tokens.length * 4)
    },
  })
  return { batcher, log }
}

/** A decoding sequence as generate() runs it: a turn between steps, then its next token. */
async function decode (batcher: DecodeBatcher, steps: number): Promise<void> {
  const seat = batcher.join({} as unknown as ModelCache)
  try {
    for (let i = 0; i < steps; i++) {
      await nextTurn()
      await seat.step(i)
    }
  } finally {
    seat.leave()
  }
}

describe('the batcher keeps a batch together while prefill chunks wait', () => {
  it('four sequences and a queue of chunks: every step carries all four, one chunk between two steps', async () => {
    const { batcher, log } = standIn()
    const chunks = Array.from({ length: 6 }, async () => { await batcher.exclusive(() => { log.push('job') }) })
    await Promise.all([...Array.from({ length: 4 }, async () => { await decode(batcher, 5) }), ...chunks])
    const steps = log.filter((e) => e.startsWith('step'))
    expect(steps).toEqual(Array(5).fill('step 4'))
    expect(log.filter((e) => e === 'job')).toHaveLength(6)
    // Between two steps at most one chunk: a long prefill holds the batch up for one chunk only.
    const between = log.join(',').split(/step 4/).slice(1, -1)
    for (const gap of between) expect(gap.split(',').filter((e) => e === 'job').length).toBeLessThanOrEqual(1)
    expect(batcher.stats).toMatchObject({ seats: 0, steps: 5, rows: 20, maxRows: 4, chunks: 6, partialSteps: 0 })
  })

  it('with no sequence decoding, chunks run back to back; a seat that never comes back does not hold the others past the straggler turns', async () => {
    const { batcher, log } = standIn()
    await Promise.all(Array.from({ length: 3 }, async () => { await batcher.exclusive(() => { log.push('job') }) }))
    expect(log).toEqual(['job', 'job', 'job'])
    log.length = 0
    const idle = batcher.join({} as unknown as ModelCache)
    await decode(batcher, 3)
    expect(log).toEqual(['step 1', 'step 1', 'step 1'])
    // Each of those steps went without the idle seat: partial.
    expect(batcher.stats.partialSteps).toBe(3)
    idle.leave()
  })
})

describe('the batcher\'s timing counters', () => {
  afterEach(() => { vi.restoreAllMocks() })

  it('add up the time inside the steps, the chunks and the picks, and the seated wall time around them', async () => {
    // A clock that moves only inside the stand-in engine's calls: 10 per step, 3 per chunk.
    let now = 1000
    vi.spyOn(performance, 'now').mockImplementation(() => now)
    const batcher = new DecodeBatcher({
      decodeBatch: (tokens: readonly number[]) => {
        now += 10
        return new Float32Array(tokens.length * 4)
      },
    })
    const chunks = Array.from({ length: 4 }, async () => { await batcher.exclusive(() => { now += 3 }) })
    await Promise.all([...Array.from({ length: 2 }, async () => { await decode(batcher, 5) }), ...chunks])
    batcher.notePick(0.25)
    batcher.notePick(0.5)
    const stats = batcher.stats
    expect(stats).toMatchObject({ steps: 5, rows: 10, chunks: 4, stepMs: 50, chunkMs: 12, pickMs: 0.75, partialSteps: 0 })
    // Seated from the first join to the last leave: every step, and the chunks that ran meanwhile.
    expect(stats.seatedMs).toBeGreaterThanOrEqual(50)
    expect(stats.seatedMs).toBeLessThanOrEqual(62)
    expect(stats.loopActiveMs).toBeGreaterThanOrEqual(0)
  })
})
