// The queue: one job at a time in arrival order, positions that count the running job, a bounded
// wait list (429 with Retry-After), unique ids (409), and a stop that fails what never ran.
import { describe, expect, it } from 'vitest'
import { ApiError } from '../../src/engines/prefill/api-error.ts'
import type { PrefillJob } from '../../src/engines/prefill/job.ts'
import { PrefillQueue } from '../../src/engines/prefill/queue.ts'

function job (id: string): PrefillJob {
  return { requestId: id, source: 'tokens', tokens: new Int32Array([1]), state: 'queued', sealedLength: 0, prefilled: 0, timings: {}, submittedAt: 0 }
}

/** A runner whose jobs finish only when the test releases them. */
function gatedRunner (): { run: (j: PrefillJob) => Promise<void>, started: string[], release: (id: string, state?: 'done' | 'failed') => void, active: () => number, maxActive: () => number } {
  const started: string[] = []
  const gates = new Map<string, (state: 'done' | 'failed') => void>()
  let active = 0
  let maxActive = 0
  return {
    started,
    active: () => active,
    maxActive: () => maxActive,
    run: async (j) => {
      started.push(j.requestId)
      j.state = 'running'
      active++
      maxActive = Math.max(maxActive, active)
      const state = await new Promise<'done' | 'failed'>((resolve) => gates.set(j.requestId, resolve))
      active--
      j.state = state
      if (state === 'failed') j.error = 'test'
    },
    release: (id, state = 'done') => {
      const g = gates.get(id)
      if (g === undefined) throw new Error(`${id} has not started`)
      g(state)
    },
  }
}

const tick = (): Promise<void> => new Promise((resolve) => setImmediate(resolve))

function refusalOf (f: () => unknown): ApiError {
  try {
    f()
  }
  catch (e) {
    if (e instanceof ApiError) return e
    throw e
  }
  throw new Error('no refusal')
}

describe('PrefillQueue runs jobs one at a time in arrival order', () => {
  it('starts the first at once, the rest in order as each finishes; positions count the running job', async () => {
    const g = gatedRunner()
    const q = new PrefillQueue(g.run, { maxQueue: 5 })
    const jobs = ['a', 'b', 'c', 'd'].map(job)
    expect(jobs.map((j) => q.submit(j))).toEqual([0, 1, 2, 3])
    expect(q.running?.requestId).toBe('a')
    expect(q.length).toBe(3)
    expect(jobs.map((j) => q.positionOf(j))).toEqual([undefined, 1, 2, 3])
    for (const id of ['a', 'b', 'c', 'd']) {
      await tick()
      expect(g.started.at(-1)).toBe(id)
      g.release(id, id === 'b' ? 'failed' : 'done')
    }
    await tick()
    expect(g.started).toEqual(['a', 'b', 'c', 'd'])
    expect(g.maxActive()).toBe(1)
    expect(q.running).toBeUndefined()
    expect(jobs.map((j) => j.state)).toEqual(['done', 'failed', 'done', 'done'])
    // Settled jobs stay answerable.
    expect(q.get('b')?.error).toBe('test')
  })

  it('an idle queue starts a new job immediately with position 0', async () => {
    const g = gatedRunner()
    const q = new PrefillQueue(g.run, { maxQueue: 1 })
    q.submit(job('a'))
    g.release('a')
    await tick()
    expect(q.submit(job('b'))).toBe(0)
    expect(q.running?.requestId).toBe('b')
  })
})

describe('PrefillQueue refuses what it cannot take', () => {
  it('429 with Retry-After once maxQueue jobs wait behind the running one', () => {
    const g = gatedRunner()
    const q = new PrefillQueue(g.run, { maxQueue: 2, retryAfterSeconds: () => 7.2 })
    q.submit(job('a'))
    q.submit(job('b'))
    q.submit(job('c'))
    const e = refusalOf(() => q.submit(job('d')))
    expect([e.status, e.type, e.headers['Retry-After']]).toEqual([429, 'rate_limit_error', '8'])
    expect(e.message).toContain('2 requests wait behind the running one (--max-queue 2)')
    expect(q.get('d')).toBeUndefined()
  })

  it('maxQueue 0 still runs one job when idle', () => {
    const g = gatedRunner()
    const q = new PrefillQueue(g.run, { maxQueue: 0 })
    expect(q.submit(job('a'))).toBe(0)
    expect(refusalOf(() => q.submit(job('b'))).status).toBe(429)
  })

  it('409 for an id that is queued, running or remembered', async () => {
    const g = gatedRunner()
    const q = new PrefillQueue(g.run, { maxQueue: 3 })
    q.submit(job('a'))
    q.submit(job('b'))
    for (const id of ['a', 'b']) {
      const e = refusalOf(() => q.submit(job(id)))
      expect([e.status, e.param]).toEqual([409, 'request_id'])
      expect(e.message).toContain(`"${id}" is already in use by a ${id === 'a' ? 'running' : 'queued'} request`)
    }
    g.release('a')
    await tick()
    expect(refusalOf(() => q.submit(job('a'))).message).toContain('by a done request')
  })

  it('forgets the oldest settled jobs past keepSettled', async () => {
    const g = gatedRunner()
    const q = new PrefillQueue(g.run, { maxQueue: 3, keepSettled: 2 })
    for (const id of ['a', 'b', 'c']) {
      q.submit(job(id))
      g.release(id)
      await tick()
    }
    expect(['a', 'b', 'c'].map((id) => q.get(id)?.state)).toEqual([undefined, 'done', 'done'])
  })
})

describe('PrefillQueue.stop', () => {
  it('fails every waiting job with the reason, waits for the running one, then refuses with 503', async () => {
    const g = gatedRunner()
    const q = new PrefillQueue(g.run, { maxQueue: 3 })
    const [a, b, c] = ['a', 'b', 'c'].map(job)
    q.submit(a)
    q.submit(b)
    q.submit(c)
    let stopped = false
    const stopping = q.stop('engine shut down (SIGTERM)').then(() => { stopped = true })
    await tick()
    expect([b.state, b.error, c.state]).toEqual(['failed', 'engine shut down (SIGTERM)', 'failed'])
    expect(stopped).toBe(false)
    expect(refusalOf(() => q.submit(job('d'))).status).toBe(503)
    g.release('a')
    await stopping
    expect(a.state).toBe('done')
    expect(g.started).toEqual(['a'])
  })

  it('a runner that throws or forgets to settle leaves a failed job, and the queue moves on', async () => {
    const q = new PrefillQueue(async (j) => {
      if (j.requestId === 'x') throw new Error('boom')
      if (j.requestId === 'y') return
      j.state = 'done'
    }, { maxQueue: 3 })
    const jobs = ['x', 'y', 'z'].map(job)
    for (const j of jobs) q.submit(j)
    await tick()
    expect(jobs.map((j) => [j.state, j.error])).toEqual([
      ['failed', 'internal error: boom'],
      ['failed', 'internal error: the runner returned without settling the request'],
      ['done', undefined],
    ])
    expect(q.running).toBeUndefined()
  })
})
