// The pure pieces of the front door: the routing rule, the verdict text and its confirmation by the
// decoder's cached tokens, the request reader, the SSE parser and the bridge queue.
import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import { PrefixClaims } from '../../src/front/prefix-claims.ts'
import { BridgeQueue, QueueFull, QueueLeft, SseParser, confirmBridge, decideRoute, declined, refused, restoredVerdict, readFrontRequest, usableBlocks, verdictHeader, verdictText, FrontApiError } from '../../src/front/index.ts'

const rules = { minTokens: 512, minTail: 256, maxBridgeTokens: 8192 }

describe('routing rule', () => {
  it('usable blocks leave the block holding the last token to the decoder', () => {
    expect([0, 1, 255, 256, 257, 512, 513, 700].map((t) => usableBlocks(t, 256))).toEqual([0, 0, 0, 0, 1, 1, 2, 2])
  })

  it('short, over the guard, warm, nothing new, and bridged, in that order', () => {
    expect(decideRoute({ promptTokens: 40, storedBlocks: 0, blockSize: 256 }, rules)).toEqual({ bridge: false, reason: 'short prompt (40 tokens < PD_MIN_TOKENS 512)', cachedTokens: 0 })
    expect(decideRoute({ promptTokens: 9000, storedBlocks: 0, blockSize: 256 }, rules)).toMatchObject({ bridge: false, reason: 'prompt over the envelope guard (9000 tokens > PD_MAX_BRIDGE_TOKENS 8192)' })
    expect(decideRoute({ promptTokens: 720, storedBlocks: 2, blockSize: 256 }, rules)).toEqual({ bridge: false, reason: 'warm prompt (512 of 720 tokens stored; 208 not stored < PD_MIN_TAIL 256)', cachedTokens: 512, stored: 512 })
    expect(decideRoute({ promptTokens: 720, storedBlocks: 0, blockSize: 256 }, rules)).toEqual({ bridge: true, blocks: 2, bridgeTokens: 512, cachedTokens: 0 })
    // A partly cached prompt with a long uncached tail is bridged to its last usable block.
    expect(decideRoute({ promptTokens: 1100, storedBlocks: 1, blockSize: 256 }, rules)).toEqual({ bridge: true, blocks: 4, bridgeTokens: 1024, cachedTokens: 256 })
    // Stored blocks past the usable ones do not count.
    expect(decideRoute({ promptTokens: 768, storedBlocks: 3, blockSize: 256 }, { ...rules, minTail: 0 })).toEqual({ bridge: false, reason: 'warm prompt (all 2 usable blocks stored)', cachedTokens: 512, stored: 512 })
    expect(decideRoute({ promptTokens: 600, storedBlocks: 0, blockSize: 1024 }, rules)).toMatchObject({ bridge: false, reason: 'no full block to bridge (600 tokens, block size 1024)' })
  })

  it('a bridge always covers every usable block, and only when the rule allows (property)', () => {
    fc.assert(fc.property(fc.integer({ min: 1, max: 20000 }), fc.integer({ min: 0, max: 100 }), fc.integer({ min: 1, max: 4096 }), fc.integer({ min: 0, max: 2000 }), (t, stored, bs, minTail) => {
      const r = { minTokens: 300, minTail, maxBridgeTokens: 10000 }
      const route = decideRoute({ promptTokens: t, storedBlocks: stored, blockSize: bs }, r)
      const usable = Math.floor((t - 1) / bs)
      expect(route.cachedTokens).toBe(Math.min(stored, usable) * bs)
      if (route.bridge) {
        expect(route.blocks).toBe(usable)
        expect(route.bridgeTokens).toBe(usable * bs)
        expect(route.bridgeTokens).toBeLessThan(t)
        expect(t).toBeGreaterThanOrEqual(300)
        expect(t).toBeLessThanOrEqual(10000)
        expect(t - route.cachedTokens).toBeGreaterThanOrEqual(minTail)
        expect(route.cachedTokens).toBeLessThan(route.bridgeTokens)
      }
    }))
  })
})

describe('verdicts', () => {
  const plan = { state: 'done' as const, bridgedTokens: 512, promptTokens: 720 }

  it('text: complete, partial B/T, declined: reason', () => {
    expect(verdictText({ kind: 'complete', bridgedTokens: 512, promptTokens: 720 })).toBe('complete')
    expect(verdictText({ kind: 'partial', bridgedTokens: 256, promptTokens: 720 })).toBe('partial 256/720')
    expect(verdictText({ kind: 'declined', reason: 'short prompt' })).toBe('declined: short prompt')
  })

  it('a bridge is confirmed only by cached tokens covering it; otherwise it is declined, never complete', () => {
    expect(confirmBridge(plan, 512)).toEqual({ kind: 'complete', bridgedTokens: 512, promptTokens: 720 })
    expect(confirmBridge({ ...plan, state: 'partial', bridgedTokens: 256 }, 256)).toEqual({ kind: 'partial', bridgedTokens: 256, promptTokens: 720 })
    expect(verdictText(confirmBridge(plan, 0))).toBe('declined: the decoder reported cached_tokens 0, fewer than the 512 bridged tokens: it prefilled them itself')
    expect(verdictText(confirmBridge(plan, 511))).toMatch(/^declined: the decoder reported cached_tokens 511/)
    expect(verdictText(confirmBridge(plan, undefined))).toMatch(/^declined: unconfirmed/)
  })

  it('a refusal says refused, with its status, and what was done before it', () => {
    expect(verdictText(refused(400))).toBe('declined: request refused (400)')
    expect(verdictText(refused(404, 'the decoder refused it after the bridge'))).toBe('declined: request refused (404): the decoder refused it after the bridge')
  })

  it('a warm verdict states what the decoder restored when it differs from what the front door saw stored', () => {
    const warm = declined('warm prompt (2560 of 2588 tokens stored; 28 not stored < PD_MIN_TAIL 256)', { tokens: 2560, promptTokens: 2588 })
    expect(verdictText(restoredVerdict(warm, 1280))).toBe('declined: warm prompt (2560 of 2588 tokens stored; 28 not stored < PD_MIN_TAIL 256); the decoder restored 1280 of the 2588 tokens (cached_tokens), not the 2560 the front door saw stored')
    // The same count, or none reported, leaves it as it is; a reason that counts nothing stored is never rewritten.
    expect(restoredVerdict(warm, 2560)).toBe(warm)
    expect(restoredVerdict(warm, undefined)).toBe(warm)
    const short = declined('short prompt (300 tokens < PD_MIN_TOKENS 512)')
    expect(restoredVerdict(short, 0)).toBe(short)
  })

  it('the header keeps to visible ASCII and a bounded length', () => {
    const v = { kind: 'declined' as const, reason: `bad\nname é ${'x'.repeat(1000)}` }
    const h = verdictHeader(v)
    expect(h).toMatch(/^declined: bad\?name \? x+\.\.\.$/)
    expect(h.length).toBe(400)
    expect(verdictHeader({ kind: 'complete', bridgedTokens: 1, promptTokens: 2 })).toBe('complete')
  })
})

describe('request reader', () => {
  function status (fn: () => unknown): [number, string | null] {
    try {
      fn()
    } catch (e) {
      expect(e).toBeInstanceOf(FrontApiError)
      return [(e as FrontApiError).status, (e as FrontApiError).param]
    }
    throw new Error('expected a refusal')
  }

  it('reads model, stream, include_usage and the prompt of both endpoints', () => {
    expect(readFrontRequest({ model: 'm', stream: true, stream_options: { include_usage: true }, messages: [{ role: 'developer', content: [{ type: 'text', text: 'a' }, { type: 'text', text: 'b' }] }, { role: 'user', content: 'hi' }] }, 'chat'))
      .toEqual({ endpoint: 'chat', model: 'm', stream: true, includeUsage: true, prompt: { kind: 'chat', messages: [{ role: 'developer', content: 'a\nb' }, { role: 'user', content: 'hi' }], chat: {} } })
    expect(readFrontRequest({ messages: [{ role: 'user', content: 'x' }], chat_template_kwargs: { thinking: true } }, 'chat').prompt).toEqual({ kind: 'chat', messages: [{ role: 'user', content: 'x' }], chat: { kwargs: { thinking: true } } })
    // Tools, tool calls and tool results are read as the decoder reads them, so the front renders the same prompt.
    const tools = [{ type: 'function', function: { name: 'f' } }]
    const call = { id: 'c', type: 'function', function: { name: 'f', arguments: '{}' } }
    expect(readFrontRequest({ messages: [{ role: 'user', content: 'x' }, { role: 'assistant', content: null, tool_calls: [call] }, { role: 'tool', tool_call_id: 'c', content: 'ok' }], tools, reasoning_effort: 'high' }, 'chat').prompt)
      .toEqual({ kind: 'chat', messages: [{ role: 'user', content: 'x' }, { role: 'assistant', tool_calls: [call] }, { role: 'tool', tool_call_id: 'c', content: 'ok' }], chat: { kwargs: { reasoning_effort: 'high' }, tools } })
    expect(readFrontRequest({ prompt: 'hello' }, 'completion').prompt).toEqual({ kind: 'text', text: 'hello' })
    expect(readFrontRequest({ prompt: [5, 6] }, 'completion').prompt).toEqual({ kind: 'tokens', tokens: [5, 6] })
    expect(readFrontRequest({ prompt: [[5, 6]] }, 'completion').prompt).toEqual({ kind: 'tokens', tokens: [5, 6] })
    expect(readFrontRequest({ prompt: ['x'] }, 'completion').prompt).toEqual({ kind: 'text', text: 'x' })
  })

  it('what the front cannot tokenize as the decoder would is opaque (sent natively), not refused', () => {
    expect(readFrontRequest({ messages: [{ role: 'tool', content: 'x' }] }, 'chat').prompt.kind).toBe('opaque')
    expect(readFrontRequest({ messages: [{ role: 'user', content: [{ type: 'image_url' }] }] }, 'chat').prompt.kind).toBe('opaque')
    expect(readFrontRequest({ messages: [{ role: 'user', content: null }] }, 'chat').prompt.kind).toBe('opaque')
    expect(readFrontRequest({ messages: [{ role: 'user', content: 'x' }], tool_choice: 'required' }, 'chat').prompt.kind).toBe('opaque')
    expect(readFrontRequest({ prompt: ['a', 'b'] }, 'completion').prompt.kind).toBe('opaque')
    expect(readFrontRequest({ prompt: [1.5] }, 'completion').prompt.kind).toBe('opaque')
  })

  it('wrong types of the fields routing reads are a 400 naming the field', () => {
    expect(status(() => readFrontRequest([], 'chat'))).toEqual([400, null])
    expect(status(() => readFrontRequest({ model: 3, messages: [] }, 'chat'))).toEqual([400, 'model'])
    expect(status(() => readFrontRequest({ stream: 'yes', prompt: 'x' }, 'completion'))).toEqual([400, 'stream'])
    expect(status(() => readFrontRequest({}, 'chat'))).toEqual([400, 'messages'])
    expect(status(() => readFrontRequest({ messages: 'hi' }, 'chat'))).toEqual([400, 'messages'])
    expect(status(() => readFrontRequest({ messages: [] }, 'chat'))).toEqual([400, 'messages'])
    expect(status(() => readFrontRequest({ messages: [5] }, 'chat'))).toEqual([400, 'messages[0]'])
    expect(status(() => readFrontRequest({ messages: [{ role: 1, content: 'x' }] }, 'chat'))).toEqual([400, 'messages[0].role'])
    expect(status(() => readFrontRequest({ messages: [{ role: 'user', content: 5 }] }, 'chat'))).toEqual([400, 'messages[0].content'])
    expect(status(() => readFrontRequest({ prompt: 5 }, 'completion'))).toEqual([400, 'prompt'])
    expect(status(() => readFrontRequest({ prompt: [] }, 'completion'))).toEqual([400, 'prompt'])
  })
})

describe('SSE parser', () => {
  it('any split of a stream gives the same events (property)', () => {
    const events = ['{"a":1}', '{"b":"x\\ny"}', '[DONE]']
    const text = ': comment\n\n' + events.map((e) => `data: ${e}\r\n\r\n`).join('') + 'data:{"tail":1}'
    const bytes = new TextEncoder().encode(text)
    fc.assert(fc.property(fc.uniqueArray(fc.integer({ min: 1, max: bytes.length - 1 }), { maxLength: 8 }), (cuts) => {
      const p = new SseParser()
      const out: string[] = []
      let at = 0
      for (const c of [...cuts].sort((x, y) => x - y)) {
        out.push(...p.push(bytes.slice(at, c)))
        at = c
      }
      out.push(...p.push(bytes.slice(at)), ...p.end())
      expect(out).toEqual([...events, '{"tail":1}'])
    }))
  })

  it('multi-line data joins with a newline; multi-byte characters split across reads survive', () => {
    const p = new SseParser()
    const bytes = new TextEncoder().encode('data: a\ndata: é\n\n')
    expect([...p.push(bytes.slice(0, 12)), ...p.push(bytes.slice(12))]).toEqual(['a\né'])
  })
})

describe('bridge queue', () => {
  const gate = (): { wait: Promise<void>, open: () => void } => {
    let open!: () => void
    const wait = new Promise<void>((resolve) => { open = resolve })
    return { wait, open }
  }

  it('runs one task at a time in order; refuses past maxWaiting; a waiter leaves on deadline or abort', async () => {
    const q = new BridgeQueue(2)
    const order: string[] = []
    const g = gate()
    const first = q.run(async () => { order.push('a'); await g.wait; return 'A' }, 1000)
    const second = q.run(async () => { order.push('b'); return 'B' }, 5000)
    const abort = new AbortController()
    const third = q.run(async () => { order.push('c'); return 'C' }, 5000, abort.signal)
    await expect(q.run(async () => 'D', 5000)).rejects.toBeInstanceOf(QueueFull)
    expect(q.view).toMatchObject({ running: true, waiting: 2, full: 1 })
    abort.abort()
    await expect(third).rejects.toMatchObject({ why: 'aborted' })
    g.open()
    expect((await first).result).toBe('A')
    expect((await second).result).toBe('B')
    expect(order).toEqual(['a', 'b'])
    expect(q.view).toMatchObject({ running: false, waiting: 0, ran: 2, left: 1 })
    const g2 = gate()
    const long = q.run(async () => { await g2.wait }, 1000)
    const late = q.run(async () => 'late', 30)
    await expect(late).rejects.toBeInstanceOf(QueueLeft)
    await expect(late).rejects.toMatchObject({ why: 'deadline' })
    g2.open()
    await long
    // A failing task frees the queue for the next one.
    await expect(q.run(async () => { throw new Error('boom') }, 100)).rejects.toThrow('boom')
    expect((await q.run(async () => 1, 100)).result).toBe(1)
  })

  it('concurrency 2: two run at once, the third waits for a slot and takes the first one freed', async () => {
    const q = new BridgeQueue(1, 2)
    const [g1, g2] = [gate(), gate()]
    const started: string[] = []
    const a = q.run(async () => { started.push('a'); await g1.wait }, 1000)
    const b = q.run(async () => { started.push('b'); await g2.wait }, 1000)
    const c = q.run(async () => { started.push('c') }, 5000)
    await Promise.resolve()
    expect(started).toEqual(['a', 'b'])
    expect(q.view).toMatchObject({ running: true, active: 2, concurrency: 2, waiting: 1 })
    await expect(q.run(async () => 1, 100)).rejects.toBeInstanceOf(QueueFull)
    g2.open()
    await b
    await c
    expect(started).toEqual(['a', 'b', 'c'])
    expect(q.view).toMatchObject({ active: 1, waiting: 0 })
    g1.open()
    await a
    expect(q.view).toMatchObject({ running: false, active: 0 })
  })

  it('maxWaiting 0: one running, every other refused at once', async () => {
    const q = new BridgeQueue(0)
    const g = gate()
    const running = q.run(async () => { await g.wait }, 100)
    await expect(q.run(async () => 1, 100)).rejects.toMatchObject({ waiting: 0 })
    g.open()
    await running
    expect((await q.run(async () => 2, 100)).result).toBe(2)
  })
})

describe('prefix claims', () => {
  it('a prompt sharing a full block with a bridge in flight waits for the latest such bridge; one sharing none does not', async () => {
    const claims = new PrefixClaims()
    const bs = 4
    const first = claims.enter([1, 2, 3, 4, 5, 6, 7, 8], bs)
    expect(first.waitFor).toBeUndefined()
    // Shares tokens 0..4: one full block.
    const second = claims.enter([1, 2, 3, 4, 5, 9, 9, 9, 9], bs)
    expect(second.sharedBlocks).toBe(1)
    // Shares three tokens only: no full block.
    const apart = claims.enter([1, 2, 3, 0, 5, 6, 7, 8], bs)
    expect(apart.waitFor).toBeUndefined()
    // Shares one block with the first and two with the second: waits for the later one, the second.
    const third = claims.enter([1, 2, 3, 4, 5, 9, 9, 9], bs)
    let thirdMayGo = false
    void third.waitFor?.then(() => { thirdMayGo = true })
    let secondMayGo = false
    void second.waitFor?.then(() => { secondMayGo = true })
    first.release()
    await Promise.resolve()
    expect([secondMayGo, thirdMayGo]).toEqual([true, false])
    second.release()
    await Promise.resolve()
    expect(thirdMayGo).toBe(true)
    third.release()
    apart.release()
    expect(claims.size).toBe(0)
  })
})
