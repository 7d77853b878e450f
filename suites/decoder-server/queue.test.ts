// The engine queue in process: one holder at a time in arrival order, a bound with 429 and
// Retry-After, waiters that leave, stopping; several slots and a memory budget.
import { describe, expect, it } from 'vitest'
import { ApiError, EngineQueue, QueueAbandoned } from '../../src/engines/decoder/index.ts'

const never = new AbortController().signal

describe('EngineQueue order', () => {
  it('grants the engine to one request at a time, first come first served', async () => {
    const q = new EngineQueue(8)
    const order: string[] = []
    const release0 = await q.acquire(never)
    const later = ['a', 'b', 'c'].map((name) => q.acquire(never).then((release) => {
      order.push(name)
      expect(q.stats.running).toBe(1)
      release()
    }))
    expect(q.stats).toMatchObject({ running: 1, waiting: 3 })
    await new Promise((r) => setTimeout(r, 10))
    expect(order).toEqual([])
    release0()
    release0() // a second release is a no-op, not a double grant
    await Promise.all(later)
    expect(order).toEqual(['a', 'b', 'c'])
    expect(q.stats).toMatchObject({ running: 0, waiting: 0, served: 4 })
  })
})

describe('EngineQueue bound', () => {
  it('refuses past maxQueue waiters with 429, rate_limit_error and a Retry-After of at least 1 s', async () => {
    const q = new EngineQueue(1)
    const release = await q.acquire(never)
    const waiting = q.acquire(never)
    const err = await q.acquire(never).then(() => undefined, (e: unknown) => e)
    expect(err).toBeInstanceOf(ApiError)
    const api = err as ApiError
    expect([api.status, api.type, api.code]).toEqual([429, 'rate_limit_error', 'queue_full'])
    expect(api.message).toMatch(/1 requests already wait.*--max-queue 1/)
    expect(Number(api.headers['Retry-After'])).toBeGreaterThanOrEqual(1)
    expect(q.stats.refused).toBe(1)
    release()
    ;(await waiting)()
  })

  it('with maxQueue 0 only the running request is allowed', async () => {
    const q = new EngineQueue(0)
    const release = await q.acquire(never)
    await expect(q.acquire(never)).rejects.toMatchObject({ status: 429 })
    release()
    ;(await q.acquire(never))()
  })
})

describe('EngineQueue abandonment', () => {
  it('a waiter whose signal fires leaves the queue and never gets the engine', async () => {
    const q = new EngineQueue(4)
    const release = await q.acquire(never)
    const gone = new AbortController()
    const first = q.acquire(gone.signal)
    const second = q.acquire(never)
    gone.abort()
    await expect(first).rejects.toBeInstanceOf(QueueAbandoned)
    expect(q.stats).toMatchObject({ waiting: 1, abandoned: 1 })
    release()
    ;(await second)()
    expect(q.stats).toMatchObject({ running: 0, served: 2 })
  })
})

describe('EngineQueue stop', () => {
  it('fails waiters and new requests with 503; the holder finishes normally', async () => {
    const q = new EngineQueue(4)
    const release = await q.acquire(never)
    const waiting = q.acquire(never)
    q.stop()
    await expect(waiting).rejects.toMatchObject({ status: 503, type: 'service_unavailable_error' })
    await expect(q.acquire(never)).rejects.toMatchObject({ status: 503 })
    release()
    expect(q.stats.running).toBe(0)
  })
})

describe('EngineQueue slots and memory budget', () => {
  it('runs up to `slots` at once; the next waits for a release', async () => {
    const q = new EngineQueue(4, { slots: 2 })
    const a = await q.acquire(never)
    const b = await q.acquire(never)
    let third = false
    const c = q.acquire(never).then((release) => { third = true; return release })
    await new Promise((r) => setTimeout(r, 10))
    expect([third, q.stats.running, q.stats.waiting]).toEqual([false, 2, 1])
    a()
    ;(await c)()
    b()
    expect(q.stats).toMatchObject({ running: 0, waiting: 0, served: 3, usedBytes: 0 })
  })

  it('holds a request back until its bytes fit, first come first served, and refuses one that never fits with a 400', async () => {
    const q = new EngineQueue(4, { slots: 8, budgetBytes: 100 })
    const big = await q.acquire(never, 60)
    const order: string[] = []
    const second = q.acquire(never, 60).then((release) => { order.push('second'); return release })
    // 10 bytes would fit now, but it does not overtake the waiting one.
    const small = q.acquire(never, 10).then((release) => { order.push('small'); return release })
    await new Promise((r) => setTimeout(r, 10))
    expect(q.stats).toMatchObject({ running: 1, waiting: 2, usedBytes: 60, budgetBytes: 100 })
    const err = await q.acquire(never, 101).then(() => undefined, (e: unknown) => e)
    expect(err).toMatchObject({ status: 400, type: 'invalid_request_error', code: 'memory_budget_exceeded' })
    expect(q.stats.tooLarge).toBe(1)
    big()
    ;(await second)()
    ;(await small)()
    expect(order).toEqual(['second', 'small'])
    expect(q.stats.usedBytes).toBe(0)
  })

  it('a waiter at the head that leaves lets the ones behind it in', async () => {
    const q = new EngineQueue(4, { slots: 8, budgetBytes: 100 })
    const held = await q.acquire(never, 50)
    const gone = new AbortController()
    const head = q.acquire(gone.signal, 80)
    const behind = q.acquire(never, 40)
    gone.abort()
    await expect(head).rejects.toBeInstanceOf(QueueAbandoned)
    ;(await behind)()
    held()
    expect(q.stats).toMatchObject({ running: 0, waiting: 0, abandoned: 1 })
  })
})
